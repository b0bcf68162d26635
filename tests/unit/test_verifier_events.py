"""The verifier child's result event carries each check's instructor-only details inside the check
(`ReportedCheck`), and the pipeline keeps them in the stored report only: never in the public JSON
that students and API callers get."""

from __future__ import annotations

import json

import pytest

from graders.verdict import CheckResult, Verdict, VerdictReport
from graders.verifier.events import EventError, ReportedCheck, Result, encode_event, parse_event


def _result(*checks: ReportedCheck, verdict: str = "WRONG_GRADIENT") -> bytes:
    event = Result(
        verdict=Verdict(verdict),
        score=0.25,
        checks=list(checks),
        residuals=None,
        problem_version="v1",
        jax_version="0.10.2",
        verify_ms=12.5,
    )
    return encode_event(event)


def test_internal_details_cross_inside_their_check_and_stay_out_of_public_json() -> None:
    secret = {"traceback": "Traceback (most recent call last): /srv/judge/graders/verifier/verify.py"}
    line = _result(
        ReportedCheck(name="values", passed=True, message="ok"),
        ReportedCheck(name="gradients", passed=False, message="wrong", verdict=Verdict.WRONG_GRADIENT, internal=secret),
    )
    event = parse_event(line)
    assert isinstance(event, Result) and event.verdict is Verdict.WRONG_GRADIENT
    assert [c.internal for c in event.checks] == [None, secret]
    # what the pipeline does with them
    report = VerdictReport(problem="p", verdict=event.verdict)
    report.checks.extend(CheckResult.model_validate(c.model_dump()) for c in event.checks)
    assert report.checks[1].internal == secret
    public = report.model_dump_json()
    assert "/srv/judge" not in public and "internal" not in json.loads(public)["checks"][1]
    stored = json.loads(report.stored_json())
    assert stored["checks"][1]["internal"] == secret


def test_an_unknown_verdict_from_the_child_is_refused_when_read() -> None:
    line = _result(ReportedCheck(name="values", passed=True, message="ok"))
    forged = line.replace(b'"WRONG_GRADIENT"', b'"ACCEPTED_REALLY"')
    with pytest.raises(EventError):
        parse_event(forged)
