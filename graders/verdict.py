"""Verdicts, check results and the verdict JSON of DESIGN.md."""

from __future__ import annotations

import math
from enum import Enum
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field


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
        name: "sandbox", "module", "avals", "value", "gradient", "finite_difference",
            "residuals" or "peak_memory".
        passed: whether it passed.
        message: text a student can act on.
        details: numbers behind the message (JSON-safe).
        verdict: the verdict this check implies when it fails.
    """

    model_config = ConfigDict(use_enum_values=False)

    name: str
    passed: bool
    message: str
    details: dict[str, Any] = Field(default_factory=dict)
    verdict: Verdict | None = Field(default=None, exclude=True)


class ResidualAval(BaseModel):
    """One saved residual: its aval and, where known, where it came from."""

    shape: list[int]
    dtype: str
    note: str | None = None

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * np.dtype(_dtype(self.dtype)).itemsize

    def short(self) -> str:
        """`f32[16,8]`, as `print_saved_residuals` writes avals."""
        abbrev = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16",
                  "int32": "i32", "int64": "i64", "bool": "bool", "uint8": "u8", "int8": "i8"}
        return f"{abbrev.get(self.dtype, self.dtype)}[{','.join(str(d) for d in self.shape)}]"


def _dtype(name: str) -> Any:
    if name == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return name


class ResidualReport(BaseModel):
    """Residuals of the reference and of the submission (for the case the report shows), and the
    peak live bytes of each one's forward and backward pass (graders/artifacts.py says how peaks
    are measured). `no_checkpoint_*` describe the reference with every `jax.checkpoint` removed.
    All sizes in bytes."""

    case: str | None = None
    expected: list[ResidualAval] = Field(default_factory=list)
    submitted: list[ResidualAval] = Field(default_factory=list)
    expected_bytes: int = 0
    submitted_bytes: int = 0
    expected_bwd_peak_bytes: int | None = None
    submitted_bwd_peak_bytes: int | None = None
    expected_fwd_peak_bytes: int | None = None
    submitted_fwd_peak_bytes: int | None = None
    no_checkpoint_bytes: int | None = None
    no_checkpoint_bwd_peak_bytes: int | None = None


class VerdictReport(BaseModel):
    """The verdict JSON of DESIGN.md (API, CLI `--json`, stored)."""

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
