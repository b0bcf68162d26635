"""Policy fingerprints from verdict reports alone (graders/insight.py): order-free, blind to
names, the recompute check's judgment, reports without residuals; and the migration's backfill
of stored verdicts (server/store/migrations/versions/0013)."""

from __future__ import annotations

import copy
import importlib
import json
from pathlib import Path

import sqlalchemy as sa

from graders.insight import fingerprint
from server.store import migrate
from server.store.db import make_engine
from server.store.submissions import SubmissionStore


def fact(shape: list[int], source: str, matched: bool | None, kind: str = "device") -> dict:
    return {"shape": shape, "dtype": "float32", "source": source, "matched": matched, "memory_kind": kind}


def report(
    submitted: list[dict],
    expected: list[dict],
    *,
    verdict: str = "WRONG_POLICY",
    recompute_passed: bool = True,
    expected_flops: int = 100,
    submitted_flops: int = 100,
) -> dict:
    return {
        "verdict": verdict,
        "checks": [{"name": "recompute", "passed": recompute_passed, "message": "", "judged": True}],
        "residuals": {
            "case": "big",
            "expected": expected,
            "submitted": submitted,
            "flops_exact": True,
            "expected_recompute_flops": expected_flops,
            "submitted_recompute_flops": submitted_flops,
        },
    }


REFERENCE = [fact([8, 4], "argument x", True), fact([8, 16], "dot_general", True)]


def test_order_and_names_do_not_matter_and_differences_do() -> None:
    one = report(
        [fact([8, 16], "maximum", False), fact([8, 4], "argument x", True)],
        [fact([8, 4], "argument x", True), fact([8, 16], "dot_general", False)],
    )
    shuffled = copy.deepcopy(one)
    shuffled["residuals"]["submitted"].reverse()
    shuffled["residuals"]["expected"].reverse()
    shuffled["residuals"]["submitted"][0]["note"] = "output of relu from student.py:7 (my_layer)"  # names live here
    a, b = fingerprint(one), fingerprint(shuffled)
    assert a and b and a.key == b.key
    assert a.summary == "saves f32[8,16] from `maximum` where the reference saves f32[8,16] from `dot_general`"
    offloaded = report(
        [fact([8, 16], "maximum", False, "pinned_host"), fact([8, 4], "argument x", True)],
        [fact([8, 4], "argument x", True), fact([8, 16], "dot_general", False)],
    )
    assert fingerprint(offloaded).key != a.key  # type: ignore[union-attr]
    correct = fingerprint(report(REFERENCE, REFERENCE, verdict="ACCEPTED", submitted_flops=120))
    assert correct and correct.summary == "saves what the reference saves" and correct.parts["recompute"] == "same"
    slower = fingerprint(
        report(REFERENCE, REFERENCE, verdict="WRONG_POLICY", recompute_passed=False, submitted_flops=350)
    )
    assert slower and slower.parts["recompute"] == "much more" and "more than twice" in slower.summary


def test_without_a_value_match_avals_decide() -> None:
    unmatched = [dict(f, matched=None) for f in REFERENCE]
    found = fingerprint(report([dict(unmatched[0])], unmatched))
    assert found and found.parts["missed"] == ["f32[8,16] from `dot_general`"] and found.parts["extra"] == []


def test_a_report_without_residuals_is_its_verdict_and_first_failed_check() -> None:
    found = fingerprint(
        {"verdict": "COMPILE_ERROR", "checks": [{"name": "import", "passed": False, "message": ""}], "residuals": None}
    )
    assert found and found.parts == {"verdict": "COMPILE_ERROR", "failed": "import"}
    assert fingerprint({"verdict": None}) is None


def test_the_migration_backfills_stored_verdicts(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'judge.db'}"
    migrate.upgrade(url)
    engine = make_engine(url)
    store = SubmissionStore(engine)
    graded = store.create(problem="p", source="#")
    broken = store.create(problem="p", source="#")
    fault = store.create(problem="p", source="#")
    with engine.begin() as connection:
        for record, verdict, body in (
            (graded, "WRONG_POLICY", json.dumps(report(REFERENCE[:1], REFERENCE))),
            (broken, "WRONG_POLICY", "{not json"),
            (fault, "INTERNAL_ERROR", json.dumps({"verdict": "INTERNAL_ERROR"})),
        ):
            connection.execute(
                sa.text("UPDATE submissions SET status='done', verdict=:v, result_json=:j WHERE id=:i"),
                {"v": verdict, "j": body, "i": record.id},
            )
        backfill = importlib.import_module("server.store.migrations.versions.0013_policy_fingerprints").backfill
        assert backfill(connection) == 1
        rows = dict(connection.execute(sa.text("SELECT id, policy_fingerprint FROM submissions")).all())
    assert rows[graded.id] == fingerprint(report(REFERENCE[:1], REFERENCE)).key  # type: ignore[union-attr]
    assert rows[broken.id] is None and rows[fault.id] is None
