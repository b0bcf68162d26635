"""Typed messages between the trusted side and a verifier child (`graders/verifier/main.py`).

Both ends import this module (no JAX here). The job's parameters travel in the child's
`JobSetup.job` (`VerifierParams`); the child's events come back as JSON lines on its result
pipe, parsed strictly with `parse_event`: the child has run untrusted StableHLO in its own
process, so its words are checked like any other input before they become a verdict.

Event order: `ready` (expectations loaded, backend started), then after the bundle has been
read `digest` (the content key of its normalized artifacts, before anything runs), `running`
(the first untrusted artifact is about to run), and `result`; or `error` (a fault of our code:
INTERNAL_ERROR) or `memory_error` (the artifacts ran out of memory: the submission's); or, instead
of `ready`, `reference_failed` (the problem's reference failed a self-check: the author's fault,
and no submission is judged against that version).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from graders.verdict import CheckResult, ResidualReport, Verdict

MAX_EVENT_BYTES = 8 << 20


class VerifierParams(BaseModel):
    """What a verifier child needs before it locks down: read with root's file access.

    Attributes:
        problem_dir: the problem package folder (host path), a working folder or a published
            snapshot; problem_slug: its slug. problem_version: the version the
            worker judges; a package now on disk with another version is refused (judge fault).
        cache_dir: the reference-expectation cache. seed_hex: the deployment's hidden-input seed.
        limits: `graders.artifact_limits.VerifyLimits` fields. bundle_limit_bytes: the largest bundle read.
    """

    model_config = ConfigDict(extra="forbid")
    problem_dir: str
    problem_slug: str = Field(
        default="",
        description="the slug problem.toml must name (a snapshot's folder is "
        "named by its version); empty: the folder's name",
    )
    problem_version: str
    cache_dir: str
    seed_hex: str
    limits: dict[str, int]
    bundle_limit_bytes: int
    reference_export_budget_s: float | None = Field(
        default=None,
        description="wall seconds exporting every case of the reference may take (the jail's wall_time_limit_s)",
    )


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Ready(_Event):
    event: Literal["ready"] = "ready"
    ms: float = Field(description="milliseconds from the fork to ready (loading expectations)")
    version: str


class Digest(_Event):
    event: Literal["digest"] = "digest"
    digest: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class Running(_Event):
    event: Literal["running"] = "running"


class ReportedCheck(CheckResult):
    """A check as the verifier child reports it: with its instructor-only `internal` details,
    which `CheckResult` leaves out of every dump. They cross the process boundary inside their
    check and end in the stored report only (`VerdictReport.stored_json`), never in public JSON."""

    internal: dict[str, Any] | None = None


class Result(_Event):
    event: Literal["result"] = "result"
    verdict: Verdict  # checked against the verdicts the judge knows, like every word of the child
    score: float
    checks: list[ReportedCheck]
    residuals: ResidualReport | None
    problem_version: str
    jax_version: str
    verify_ms: float
    program_digest: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None = None


class Error(_Event):
    event: Literal["error"] = "error"
    message: str
    traceback: str = ""


class OutOfMemory(_Event):
    event: Literal["memory_error"] = "memory_error"


SelfCheck = Literal["finite_difference", "deterministic", "time_limit", "memory_limit", "runtime_error"]


class SelfCheckFailure(BaseModel):
    """One failed self-check of a reference (`graders.reference.failures.SELF_CHECKS`)."""

    model_config = ConfigDict(extra="forbid")
    check: SelfCheck
    message: Annotated[str, Field(max_length=4000)]


class ReferenceFailed(_Event):
    """The reference failed self-checks while its expectations were built (or earlier: cached)."""

    event: Literal["reference_failed"] = "reference_failed"
    failures: Annotated[list[SelfCheckFailure], Field(min_length=1, max_length=len(SelfCheck.__args__))]


Event = Annotated[
    Ready | Digest | Running | Result | Error | OutOfMemory | ReferenceFailed, Field(discriminator="event")
]
_EVENTS: TypeAdapter[Ready | Digest | Running | Result | Error | OutOfMemory | ReferenceFailed] = TypeAdapter(Event)


class EventError(Exception):
    """A line from a verifier child that is not one of its events."""


def parse_event(line: bytes) -> Ready | Digest | Running | Result | Error | OutOfMemory | ReferenceFailed:
    """Parses one event line.

    Raises:
        EventError: too long, not JSON, or not an event of this module.
    """
    if len(line) > MAX_EVENT_BYTES:
        raise EventError(f"an event of {len(line):,} bytes")
    try:
        return _EVENTS.validate_json(line)
    except ValidationError as exc:
        raise EventError(str(exc.errors()[:1])) from None


def encode_event(event: _Event) -> bytes:
    """One JSON line."""
    return event.model_dump_json().encode() + b"\n"
