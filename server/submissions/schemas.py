"""Request and response schemas of the REST API, kept apart from stored records so a response
can never carry an internal field (a source path, a reference, a hidden input)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from graders.verdict import VerdictReport


class ProblemSummary(BaseModel):
    """One row of `GET /api/v1/problems`."""

    slug: str
    title: str
    difficulty: str
    tags: list[str]
    version: str
    published: bool = Field(True, description="students see it (false: shown to the admin token only)")


class ArgumentPublic(BaseModel):
    """A positional argument of the entry point: its shape (dimension names or sizes) and dtype."""

    name: str
    kind: Literal["array", "list", "dict", "static"]
    shape: list[int | str] | None = None
    dtype: str | None = None
    items: list[ArgumentPublic] | None = None
    entries: dict[str, ArgumentPublic] | None = Field(
        default=None, description="a pytree argument's dict node: its subtrees by key (flattened in sorted order)"
    )


class CasePublic(BaseModel):
    """A test case's sizes (the inputs themselves are hidden)."""

    name: str
    dims: dict[str, int]
    static: dict[str, Any]


class ProblemDetail(ProblemSummary):
    """`GET /api/v1/problems/{slug}`: everything a student needs, never the reference."""

    entry_point: str
    signature: str
    arguments: list[ArgumentPublic]
    cases: list[CasePublic]
    memory_rule: Literal["exact", "at_most", "budget"]
    budgets: dict[str, int] = {}  # a budget problem's bytes per case (`MemoryRule.budgets`)
    statement: str
    starter: str


class ValidationRowPublic(BaseModel):
    """One graded file of an uploaded package."""

    file: str
    expected: str
    got: str | None
    ok: bool
    note: str = ""
    seconds: float = 0.0
    residual_bytes: int | None = None
    bwd_peak_bytes: int | None = None
    recompute_flops: int | None = None


class ProblemPublished(BaseModel):
    """`POST /api/v1/problems` 201: the package validated and is installed; students see it when
    `published` (asked with `?publish=true`, or kept from the published problem it replaces)."""

    slug: str
    version: str
    previous_version: str | None
    rows: list[ValidationRowPublic]
    published: bool = False


class SubmissionCreate(BaseModel):
    """`POST /api/v1/submissions` body (and one item of a batch)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "problem": "remat_sin_sin",
                    "source": "import jax\n\ndef remat_sin_sin(x):\n    ...\n",
                    "external_id": "course-42/student-7/attempt-3",
                    "callback_url": "https://lms.example.org/remat-judge/hooks",
                }
            ]
        },
    )

    # lengths are checked by the submission service (server/submissions/submit.py), so that one bad item of a
    # batch is refused on its own, with the same words as a single submission
    problem: str = Field(description="slug of the problem")
    source: str = Field(description="the Python source of the submission (not empty)")
    external_id: str | None = Field(
        default=None,
        description="your own id for it (a student or attempt id, 1 to 128 "
        "characters); filter with GET /api/v1/submissions?external_id=",
    )
    callback_url: str | None = Field(
        default=None,
        description="POSTed the verdict JSON when graded, signed with your callback "
        "secret (header X-Remat-Judge-Signature); must be under one of "
        "your client's allowed callback prefixes",
    )


class BatchSubmissionCreate(SubmissionCreate):
    """One item of a batch: a submission, with its own idempotency key."""

    idempotency_key: str | None = Field(
        default=None,
        description="as the Idempotency-Key header of a single "
        "submission: a repeat of this item within 24 hours answers the "
        "submission stored first",
    )


class SubmissionBatchCreate(BaseModel):
    """`POST /api/v1/submissions/batch` body: up to 20 submissions, each accepted or refused on
    its own."""

    model_config = ConfigDict(extra="forbid")

    submissions: list[BatchSubmissionCreate] = Field(min_length=1, max_length=20)


class CallbackState(BaseModel):
    """Where a submission's callback is.

    Attributes:
        url: where it goes; status: pending, delivered, failed or refused; attempts: deliveries
        tried; last_status_code: the receiver's last HTTP status (None: no answer); last_error:
        why the last attempt failed.
    """

    url: str
    status: str
    attempts: int
    last_status_code: int | None = None
    last_error: str | None = None


class SubmissionPublic(VerdictReport):
    """A submission as the API shows it: the verdict JSON (README.md, "Using the API"), the client's
    `external_id`, the state of its callback, and links."""

    external_id: str | None = None
    callback: CallbackState | None = None
    links: dict[str, str] = Field(default_factory=dict)


class BatchItem(BaseModel):
    """One item of a batch answer: the submission (`id`, `status`), or why it was refused
    (`error` with the HTTP status it would have had alone, and `detail`)."""

    index: int
    id: str | None = None
    status: str | None = None
    error: int | None = None
    detail: str | None = None
    retry_after_s: int | None = Field(
        default=None,
        description="for a 429 or 503 item: seconds to wait before "
        "sending it again (the answer's Retry-After header "
        "is the largest of them)",
    )


class BatchAnswer(BaseModel):
    items: list[BatchItem]


class Health(BaseModel):
    """Liveness: answered without touching the database or Redis.

    Attributes:
        mode: "embedded" (this process grades) or "distributed" (workers grade).
        workers: grading threads in this process (0 in distributed mode).
        waiting_requests: `wait=true` requests waiting for verdicts in this process.
    """

    status: Literal["ok"]
    jax_version: str
    mode: Literal["embedded", "distributed"]
    workers: int
    waiting_requests: int
    problems: int


class ErrorBody(BaseModel):
    detail: str
