"""Verdicts, check results and the verdict JSON (README.md, "Using the API")."""

from __future__ import annotations

import json
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from graders.artifact_limits import Aval


class Verdict(str, Enum):
    """Outcome of judging one submission. Declaration order is precedence: the first that applies wins.

    INTERNAL_ERROR is only for faults of the judge itself, never for anything a submission did.
    """

    COMPILE_ERROR = "COMPILE_ERROR"
    TIME_LIMIT_EXCEEDED = "TIME_LIMIT_EXCEEDED"
    MEMORY_LIMIT_EXCEEDED = "MEMORY_LIMIT_EXCEEDED"
    OUTPUT_LIMIT_EXCEEDED = "OUTPUT_LIMIT_EXCEEDED"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    WRONG_ANSWER = "WRONG_ANSWER"
    WRONG_GRADIENT = "WRONG_GRADIENT"
    WRONG_POLICY = "WRONG_POLICY"
    ACCEPTED = "ACCEPTED"
    INTERNAL_ERROR = "INTERNAL_ERROR"


VERDICT_EXPLANATIONS: dict[Verdict, str] = {
    Verdict.COMPILE_ERROR: "The source does not compile, or the entry point is missing, not callable, "
    "or takes the wrong number of arguments.",
    Verdict.TIME_LIMIT_EXCEEDED: "The submission (or its exported program) ran longer than the time limit.",
    Verdict.MEMORY_LIMIT_EXCEEDED: "The submission used more memory than the limit (or raised MemoryError).",
    Verdict.OUTPUT_LIMIT_EXCEEDED: "The submission printed or wrote more than the output limit.",
    Verdict.RUNTIME_ERROR: "An exception while importing, tracing or exporting the function, or the process "
    "died without a result.",
    Verdict.WRONG_ANSWER: "The function's output (shape, dtype or value) is wrong on a hidden input.",
    Verdict.WRONG_GRADIENT: "The values are right but the gradients are wrong on a hidden input.",
    Verdict.WRONG_POLICY: "Values and gradients are right, but autodiff saves different residuals "
    "than the problem requires.",
    Verdict.ACCEPTED: "Values, gradients and saved residuals are all as required.",
    Verdict.INTERNAL_ERROR: "The judge itself failed; this is not your fault and the submission will be retried.",
}


def first_verdict(candidates: list[Verdict]) -> Verdict:
    """The verdict of highest precedence among `candidates` (ACCEPTED when empty)."""
    order = list(Verdict)
    return min(candidates, key=order.index) if candidates else Verdict.ACCEPTED


class CheckResult(BaseModel):
    """One check of the verifier.

    Attributes:
        name: "sandbox", "module", "avals", "value", "gradient" ("finite_difference" in reports
            stored before the reference checked itself),
            "residuals" or "peak_memory".
        passed: whether it passed.
        message: text a student can act on.
        details: numbers behind the message (JSON-safe).
        verdict: the verdict this check implies when it fails.
        judged: False when the check only reports numbers and cannot fail (shown without a
            pass mark).
        internal: details for instructors and logs only (a judge fault's cause, tracebacks, host
            paths); never part of the JSON students and API callers get.
        fraction: for a passed check whose part is scored continuously (a budget problem's
            policy, `graders.checks.budget`), the share of its part's weight it earns in [0, 1];
            None: all of it.
    """

    model_config = ConfigDict(use_enum_values=False)

    name: str
    passed: bool
    message: str
    details: dict[str, Any] = Field(default_factory=dict)
    verdict: Verdict | None = Field(default=None, exclude=True)
    judged: bool = True
    internal: dict[str, Any] | None = Field(default=None, exclude=True)
    fraction: float | None = None


class ResidualFact(BaseModel):
    """One saved residual, as the judge knows it: the one value type for residual facts.

    Attributes:
        shape, dtype: its aval, read from the exported forward program.
        note: what `print_saved_residuals` said of it in the jail (advisory, for people).
        source: the op of the forward program that produces it ("dot_general", "sine",
            "argument x"), read from the artifact (graders/untrusted/, `provenance_of`).
        matched: for a submitted residual, whether it equals, as a value on every hidden input, a
            residual the reference saves; for an expected one, whether the submission saves it.
            None when values were not compared.
        memory_kind: where the forward program leaves it until the backward pass: "device", or
            "pinned_host" when a checkpoint policy offloads it to host memory
            (`save_and_offload_only_these_names`), read from the artifact's result attributes.
        layout: for a submitted residual that holds a reference residual's values with its axes
            split, permuted or merged (`graders.checks.layout`), the words that say so; None
            otherwise.
        device_shape, device_bytes, replicas, global_shape: on a problem with a mesh, the piece
            of it each device keeps (shape and bytes), how many devices keep each piece (the
            device count when it is replicated; `graders.verifier.placement.device_layout`, read
            from the compiled forward program's outputs), and the global shape JAX assembles; `shape` is then
            `[devices, *device_shape]`, the pieces stacked by device, which is what is compared
            (`graders.checks.residuals.with_layouts`). None and 1 on one device.
        same_pieces: on a mesh, every device's piece holds the same numbers though the sharding
            gives each its own: the value is copied to every device (replicated by value), as a
            gathered weight a `shard_map` body saves is.
        left_out: why the residual is bookkeeping, left out of comparisons and budgets (no
            argument's data flows into it, or a branch index the backward pass only branches on:
            `graders.checks.comparison.bookkeeping_reasons`); None for a residual like any other.
    """

    shape: list[int]
    dtype: str
    note: str | None = None
    source: str | None = None
    matched: bool | None = None
    memory_kind: str = "device"
    layout: str | None = None
    device_shape: list[int] | None = None
    device_bytes: int | None = None
    replicas: int = 1
    global_shape: list[int] | None = None
    same_pieces: bool = False
    left_out: str | None = None

    @property
    def on_device(self) -> bool:
        return self.memory_kind == "device"

    @property
    def aval(self) -> Aval:
        """Its shape and dtype as the one aval type the judge reads artifacts into."""
        return Aval(tuple(self.shape), self.dtype)

    @property
    def nbytes(self) -> int:
        """Size in bytes (bool as one byte, as XLA stores it)."""
        return self.aval.nbytes

    def short(self) -> str:
        """`f32[16,8]`, as `print_saved_residuals` writes avals (the global shape on a mesh)."""
        if self.global_shape is not None:
            return Aval(tuple(self.global_shape), self.dtype).short()
        return self.aval.short()

    def per_device(self) -> str:
        """On a mesh, what each device keeps of it: `, f32[16,64] per device` (`, replicated: each
        of 4 devices keeps all of it` when every device holds the whole of it, `, replicated: each of
        4 devices keeps the same f32[64,128]` when every device's piece holds the same numbers,
        `same_pieces`); "" on one device."""
        if self.device_shape is None:
            return ""
        piece = Aval(tuple(self.device_shape), self.dtype).short()
        if self.replicas > 1 and self.device_shape == self.global_shape:
            return f", replicated: each of {self.replicas} devices keeps all of it"
        if self.replicas > 1:
            return f", {piece} per device, each piece kept by {self.replicas} devices"
        if self.same_pieces:  # `shape` is [devices, *piece] on a mesh
            return f", replicated: each of {self.shape[0]} devices keeps the same {piece}"
        return f", {piece} per device"

    def described(self) -> str:
        """`f32[16,8] from dot_general` for messages (`, offloaded to pinned_host` when it is;
        what each device keeps on a mesh, `per_device`)."""
        return (
            self.short()
            + (f" from `{self.source}`" if self.source else "")
            + self.per_device()
            + ("" if self.on_device else f", offloaded to {self.memory_kind}")
        )


class ResidualReport(BaseModel):
    """Residuals of the reference and of the submission (for the case the report shows), and the
    peak live bytes of each one's forward and backward pass (graders/untrusted/ says how peaks
    are measured). `no_checkpoint_*` describe the reference with every `jax.checkpoint` removed;
    `full_remat_*` the reference under one plain `jax.checkpoint` (saves the inputs, recomputes
    everything). All sizes in bytes. `*_bwd_flops`: FLOPs of one run of the backward program
    (graders/untrusted/, `ModuleInfo.flops`); `*_recompute_flops`: of those, the forward work the
    backward pass does again (`ModuleInfo.recompute_flops`: ops that depend on no cotangent and
    repeat an operation of the forward program), not the derivative's own arithmetic.
    `*_host_bytes`: the part of the residual bytes a policy offloads to host memory (the rest
    stays on the device). `flops_exact`: False when a loop's trip count could not be read in
    either backward program (the FLOPs then count such a loop once: a lower bound). On a mesh the
    residual bytes are per device, and `*_bwd_collectives` / `*_bwd_received_bytes` give each
    compiled backward program's collectives by kind and the bytes one device receives through them
    (`graders.verifier.collectives`); reported, not judged. `*_xla_memory` on a mesh: XLA's own
    per-device figures of each side's compiled programs (`graders.verifier.xla_memory`):
    {"fwd": {...}, "bwd": {...}, "residual_bytes": the residuals by XLA's count, "parted": why that
    differs from the judge's count, or "", "bwd_device_bytes": what one device holds while the
    backward pass runs}; empty on one device; `*_bwd_device_bytes` the same for the variants.
    On a budget problem: `budget_bytes` (the case's), `optimum` (the least recomputation any policy
    within it needs, and what that policy keeps: `graders.reference.budget_facts`) and `frontier`
    (budget -> least recomputation, each point {"bytes", "flops", "bound_flops", "optimal"});
    `budget_of`: what the budget counts, "residuals" or "peak" (the backward pass's static peak:
    then the frontier's bytes are peaks and the optimum is the best measured schedule); `schedules`:
    the reference's named schedules as measured (`graders.reference.schedules`: {"label", "bytes",
    "peak_bytes", "flops"})."""

    case: str | None = None
    expected: list[ResidualFact] = Field(default_factory=list)
    submitted: list[ResidualFact] = Field(default_factory=list)
    expected_bytes: int = 0
    submitted_bytes: int = 0
    expected_host_bytes: int = 0
    submitted_host_bytes: int = 0
    expected_bwd_peak_bytes: int | None = None
    submitted_bwd_peak_bytes: int | None = None
    expected_fwd_peak_bytes: int | None = None
    submitted_fwd_peak_bytes: int | None = None
    no_checkpoint_bytes: int | None = None
    no_checkpoint_bwd_peak_bytes: int | None = None
    expected_bwd_flops: int | None = None
    submitted_bwd_flops: int | None = None
    no_checkpoint_bwd_flops: int | None = None
    expected_recompute_flops: int | None = None
    submitted_recompute_flops: int | None = None
    full_remat_bytes: int | None = None
    full_remat_bwd_flops: int | None = None
    full_remat_recompute_flops: int | None = None
    full_remat_bwd_peak_bytes: int | None = None
    expected_bwd_collectives: dict[str, int] = Field(default_factory=dict)
    submitted_bwd_collectives: dict[str, int] = Field(default_factory=dict)
    expected_bwd_received_bytes: int | None = None
    submitted_bwd_received_bytes: int | None = None
    no_checkpoint_bwd_received_bytes: int | None = None
    full_remat_bwd_received_bytes: int | None = None
    no_checkpoint_bwd_device_bytes: int | None = None
    full_remat_bwd_device_bytes: int | None = None
    budget_bytes: int | None = None
    optimum: dict[str, Any] = Field(default_factory=dict)
    frontier: list[dict[str, Any]] = Field(default_factory=list)
    budget_of: str | None = None
    schedules: list[dict[str, Any]] = Field(default_factory=list)
    expected_xla_memory: dict[str, Any] = Field(default_factory=dict)
    submitted_xla_memory: dict[str, Any] = Field(default_factory=dict)
    flops_exact: bool = True


class VerdictReport(BaseModel):
    """The verdict JSON (README.md, "Using the API"; the API, CLI `--json`, stored)."""

    id: str | None = None
    problem: str
    problem_version: str | None = None
    status: str = "done"
    verdict: Verdict | None = None
    score: float = 0.0
    checks: list[CheckResult] = Field(default_factory=list)
    residuals: ResidualReport | None = None
    stdout: str = ""
    stderr: str = ""
    timing_ms: dict[str, float] = Field(default_factory=dict)
    jax_version: str | None = None
    created_at: str | None = None
    finished_at: str | None = None
    # the bundle's programs, blind to names (graders/verifier/verify.py `program_digest`): kept for
    # course staff (identical programs), never shown to students or API callers
    program_digest: str | None = Field(default=None, exclude=True)

    def stored_json(self) -> str:
        """The JSON to store: the verdict JSON plus each check's instructor-only `internal`
        details, which `model_dump_json` (what students and API callers get) leaves out."""
        data = self.model_dump(mode="json")
        for check, out in zip(self.checks, data["checks"], strict=True):
            if check.internal:
                out["internal"] = check.internal
        if self.program_digest:
            data["program_digest"] = self.program_digest
        return json.dumps(data)
