"""The checks registry (`graders.checks.registry`): every check can be run, scored and explained
on the panel, and the panel's diagnosis is each check's own."""

from __future__ import annotations

import pytest

from graders.checks.check import Advice, Check, Evidence, Stage
from graders.checks.registry import CHECKS, PARTS, STAGES, explainer, score_of
from graders.problems.spec import Scoring
from graders.verdict import CheckResult, Verdict
from server.web.diagnosis import diagnose
from server.web.views import check_views

EVIDENCE = Evidence(
    message="case 'large': your function fails this check.",
    extra=["f32[8,4] (sine)"],
    missing=["f32[8,4] (dot_general)"],
    yours_peak_bytes=3 << 20,
    limit_peak_bytes=1 << 20,
)


def test_names_are_unique_across_checks_and_stages() -> None:
    names = [c.name for c in (*CHECKS, *STAGES)]
    assert names and len(names) == len(set(names))


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.name)
def test_every_check_has_a_headline_a_part_and_a_diagnosis(check: Check) -> None:
    entry = explainer(check.name)
    assert entry is check
    assert check.part in PARTS
    assert check.headline.startswith("Your ") and len(check.headline) < 80
    said = check.explain(EVIDENCE)
    assert isinstance(said, Advice) and said.detail.strip()
    # the panel shows the check's own headline and words when it is the first to fail
    views = check_views([{"name": check.name, "passed": False, "message": EVIDENCE.message}])
    d = diagnose(
        Verdict.WRONG_POLICY, views, [], {"submitted_bwd_peak_bytes": 3 << 20, "expected_bwd_peak_bytes": 1 << 20}
    )
    assert d.headline == (said.headline or check.headline) and d.detail


@pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.name)
def test_every_stage_has_a_headline_and_explains_itself_by_its_message(stage: Stage) -> None:
    assert stage.headline.startswith("Your ")
    assert stage.explain(EVIDENCE).detail == EVIDENCE.message


def test_a_check_no_registry_knows_gets_the_verdicts_general_words() -> None:
    views = check_views([{"name": "a_check_from_the_future", "passed": False, "message": "m"}])
    d = diagnose(Verdict.WRONG_POLICY, views, [], None)
    assert d.detail == "m" and d.headline.startswith("Values and gradients are right")


def _results(failing: set[str]) -> list[CheckResult]:
    return [CheckResult(name=c.name, passed=c.name not in failing, message="") for c in CHECKS]


def test_each_part_counts_only_when_every_check_of_it_and_every_part_before_it_pass() -> None:
    scoring = Scoring(value=0.5, gradient=0.3, policy=0.2)
    assert score_of(_results(set()), scoring) == 1.0
    for check in CHECKS:
        parts_before = PARTS[: PARTS.index(check.part)]
        expected = sum(getattr(scoring, p) for p in parts_before)
        assert score_of(_results({check.name}), scoring) == pytest.approx(expected), check.name
    # a check that did not run counts for nothing
    assert score_of([r for r in _results(set()) if r.name != CHECKS[-1].name], scoring) == pytest.approx(0.8)


def test_every_check_class_in_the_checks_package_is_registered() -> None:
    """A check written but not added to `CHECKS` would never run: every class of graders/checks/
    with a `run` and an `explain` is in the tuple."""
    import importlib
    import inspect
    import pkgutil

    import graders.checks

    registered = {type(c) for c in CHECKS}
    found = set()
    for info in pkgutil.iter_modules(graders.checks.__path__):
        module = importlib.import_module(f"graders.checks.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and hasattr(cls, "run") and not getattr(cls, "_is_protocol", False):
                found.add(cls)
    assert len(found) >= 5 and found == registered
