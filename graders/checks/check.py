"""What a check is (`Check`), what it is given (`CheckContext`, the runs) and what the panel gives
it to explain a failure (`Evidence`, `Advice`). The checks themselves live one family per module
beside this one; `graders.checks.registry` lists them in the order they are judged."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from graders.checks.comparison import CaseRun
from graders.problems.spec import ProblemSpec
from graders.verdict import CheckResult

ScorePart = Literal["value", "gradient", "policy"]
"""The part of the score a check decides (`ScoringSpec`'s weights): a part counts when every check
of it passes and every part before it counts (`graders.checks.registry.score_of`)."""


@dataclass(frozen=True)
class CheckContext:
    """What a check judges the runs against besides the reference's values in them.

    Attributes:
        spec: the problem (tolerances, the memory rule).
        leaf_names: the names of the argument leaves in JAX's flatten order (`params['w']`), for
            messages about gradients.
    """

    spec: ProblemSpec
    leaf_names: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Evidence:
    """What the panel knows of a failed check when it explains it.

    Attributes:
        message: the failed check's message.
        extra: the values the submission saves that the reference does not, each described in a
            few words (`f32[16,8] (dot_general)`), from the residual comparison; empty if unknown.
        missing: the values the reference saves that the submission does not, the same way.
        yours_peak_bytes, limit_peak_bytes: the backward passes' peak live bytes (submission,
            reference), when the report has them.
    """

    message: str
    extra: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    yours_peak_bytes: int | None = None
    limit_peak_bytes: int | None = None


@dataclass(frozen=True)
class Advice:
    """A failed check said about one submission: `detail`, one or two sentences; `advice`, what to
    change, or "" when there is nothing specific to say; `headline`, when not "", instead of the
    check's own (a residuals failure about where values are kept, not which)."""

    detail: str
    advice: str = ""
    headline: str = ""


class Check(Protocol):
    """One judged property of a submission's runs.

    Attributes:
        name: the name of the `CheckResult` it returns (stored in verdicts: never rename one).
        part: the part of the score it decides (`ScorePart`).
        headline: the panel's first words when it is the first check that failed (what failed, not
            the verdict's general wording).
    """

    name: str
    part: ScorePart
    headline: str

    def run(self, runs: list[CaseRun], context: CheckContext) -> CheckResult:
        """Judges the runs (one per case, values filled in); returns a result named `name`."""
        ...

    def explain(self, evidence: Evidence) -> Advice:
        """What the panel says of this check's failure, from what it knows (`Evidence`)."""
        ...


@dataclass(frozen=True)
class Stage:
    """A check made before any run (the jail's run, the exported module, the avals): it has a
    headline and explains itself by its message, but no `run` of its own."""

    name: str
    headline: str

    def explain(self, evidence: Evidence) -> Advice:
        """The stage's own message is the detail; there is no general advice."""
        return Advice(evidence.message)
