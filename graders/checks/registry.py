"""The checks, in the order they are judged (`CHECKS`), and what is done with all of them at once:
run them (`run_checks`), score them (`score_of`), find one by name for the panel (`explainer`).

Adding a check: write a class with `name`, `part`, `headline`, `run` and `explain` in its family's
module (`graders.checks.check.Check`), and add an instance to `CHECKS`; `verify`, the score, the
panel's diagnosis and the registry's test follow (docs/ARCHITECTURE.md, "How to add a check").
"""

from __future__ import annotations

from graders.checks.check import Check, CheckContext, Evidence, ScorePart, Stage
from graders.checks.comparison import CaseRun
from graders.checks.gradients import GradientCheck
from graders.checks.peak_memory import PeakMemoryCheck
from graders.checks.recompute import RecomputeCheck
from graders.checks.residuals import ResidualsCheck
from graders.checks.values import ValueCheck
from graders.problems.spec import Scoring
from graders.verdict import CheckResult

CHECKS: tuple[Check, ...] = (ValueCheck(), GradientCheck(), ResidualsCheck(), PeakMemoryCheck(), RecomputeCheck())
"""Every check of a submission's runs, in the order they are judged and listed."""

STAGES: tuple[Stage, ...] = (
    Stage("sandbox", "Your code did not run to the end"),
    Stage("module", "Your file does not define what is asked"),
    Stage("avals", "Your function returns the wrong shape or dtype"),
    # the gradient check's name in reports stored before the reference checked itself
    Stage("finite_difference", "Your gradients are wrong"),
)
"""The checks made before any run: the jail's (`graders.pipeline`), and the exported module's and
its avals' (`graders.verifier.verify`)."""

PARTS: tuple[ScorePart, ...] = ("value", "gradient", "policy")
"""The parts of a score in the order they build on each other."""


def run_checks(runs: list[CaseRun], context: CheckContext) -> list[CheckResult]:
    """Every check of `CHECKS` on the runs, in order (each sees every run; none stops the next)."""
    return [check.run(runs, context) for check in CHECKS]


def score_of(checks: list[CheckResult], scoring: Scoring) -> float:
    """The score in [0, 1] (4 decimals): each part's weight (`Scoring`) counts when every check of
    it passed and every part before it counts; a part with a check that did not run counts for
    nothing (a policy is only worth something when gradients are right, gradients when values are).
    A passed check with a `fraction` (a budget problem's policy) earns that share of its part's
    weight (the smallest fraction of the part's checks).
    """
    passed = {c.name: c.passed for c in checks}
    fractions = {c.name: c.fraction for c in checks if c.fraction is not None}
    total, earned = 0.0, True
    for part in PARTS:
        names = [c.name for c in CHECKS if c.part == part]
        earned = earned and all(passed.get(name, False) for name in names)
        share = min((max(0.0, min(1.0, fractions[n])) for n in names if n in fractions), default=1.0)
        total += getattr(scoring, part) * earned * share
    return round(total, 4)


def explainer(name: str) -> Check | Stage | None:
    """The check or stage named `name`, or None for a name no check has (a stored report's)."""
    entries: tuple[Check | Stage, ...] = (*CHECKS, *STAGES)
    return next((c for c in entries if c.name == name), None)


__all__ = ["CHECKS", "PARTS", "STAGES", "Check", "CheckContext", "Evidence", "explainer", "run_checks", "score_of"]
