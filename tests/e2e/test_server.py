"""The real server: `remat-judge serve` on a free loopback port, driven over HTTP with httpx."""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from graders.pipeline import JudgeConfig
from tests.support import PROBLEMS, Server, jail_processes

pytestmark = [pytest.mark.e2e, pytest.mark.jail]
DOT = PROBLEMS / "checkpoint_dot_policy"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, judge_config: JudgeConfig) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("server-data")).start()
    yield srv
    srv.stop()


def submit(client: httpx.Client, source: str, *, wait: bool = True) -> httpx.Response:
    return client.post(
        "/api/v1/submissions",
        params={"wait": str(wait).lower()},
        json={"problem": "checkpoint_dot_policy", "source": source},
    )


def test_reference_is_accepted_and_stored(server: Server) -> None:
    with server.client() as client:
        t0 = time.monotonic()
        response = submit(client, (DOT / "reference.py").read_text())
        elapsed = time.monotonic() - t0
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["verdict"] == "ACCEPTED" and body["score"] == 1.0 and body["status"] == "done"
        assert response.headers["location"] == f"/api/v1/submissions/{body['id']}"
        assert [c["name"] for c in body["checks"]][:2] == ["sandbox", "module"]
        assert body["residuals"]["expected_bytes"] == body["residuals"]["submitted_bytes"] > 0
        assert body["jax_version"] == "0.10.2"
        assert set(body["timing_ms"]) >= {"queue", "sandbox", "verify", "total"}
        assert elapsed < 60
        again = client.get(f"/api/v1/submissions/{body['id']}").json()
        assert again["verdict"] == "ACCEPTED" and again["checks"] == body["checks"]
    assert jail_processes() == []


def test_no_checkpoint_is_wrong_policy_with_both_residual_lists(server: Server) -> None:
    with server.client() as client:
        body = submit(client, (DOT / "wrong" / "no_checkpoint.py").read_text()).json()
    assert body["verdict"] == "WRONG_POLICY"
    assert body["score"] == pytest.approx(0.67)
    residuals = body["residuals"]
    assert len(residuals["expected"]) == 5 and len(residuals["submitted"]) == 7
    assert residuals["submitted_bytes"] > residuals["expected_bytes"]
    failed = [c for c in body["checks"] if not c["passed"]]
    assert [c["name"] for c in failed] == ["residuals"]
    assert "the required policy saves: 5 residuals" in failed[0]["message"]
    assert "yours saves: 7 residuals" in failed[0]["message"]
    assert "from `dot_general`" in failed[0]["message"]  # where each saved value comes from
    # the reference's notes never show its file or structure
    assert not any("reference.py" in (r["note"] or "") for r in residuals["expected"])


def test_without_wait_answers_202_then_the_verdict_appears(server: Server) -> None:
    with server.client() as client:
        response = submit(client, (DOT / "wrong" / "wrong_math.py").read_text(), wait=False)
        assert response.status_code == 202
        submission_id = response.json()["id"]
        assert response.json()["status"] in ("queued", "running")
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            body = client.get(f"/api/v1/submissions/{submission_id}").json()
            if body["status"] == "done":
                break
            time.sleep(0.3)
        assert body["verdict"] == "WRONG_ANSWER"


def test_bad_requests_get_clear_4xx_answers(server: Server) -> None:
    with server.client() as client:
        r = client.post("/api/v1/submissions", json={"problem": "no_such_problem", "source": "x = 1"})
        assert r.status_code == 404 and "no_such_problem" in r.json()["detail"]
        r = client.post("/api/v1/submissions", json={"problem": "checkpoint_dot_policy", "source": "#" * (65 * 1024)})
        assert r.status_code == 413 and "limit" in r.json()["detail"]
        r = client.post(
            "/api/v1/submissions",
            content=b'{"problem": "checkpoint_dot_policy", "source": ',
            headers={"content-type": "application/json"},
        )
        assert r.status_code == 400 and "malformed JSON" in r.json()["detail"]
        r = client.post("/api/v1/submissions", json={"problem": "checkpoint_dot_policy"})
        assert r.status_code == 422 and "source" in r.json()["detail"]
        r = client.post("/api/v1/submissions", content=b"x" * (2 << 20), headers={"content-type": "application/json"})
        assert r.status_code == 413
        assert client.get("/api/v1/submissions/0123456789abcdef").status_code == 404
        assert client.get("/api/v1/problems/nope").status_code == 404
        health = client.get("/api/v1/healthz").json()
    assert health["status"] == "ok"


def test_problem_endpoints_never_serve_the_reference(server: Server) -> None:
    reference = (DOT / "reference.py").read_text()
    with server.client() as client:
        listing = client.get("/api/v1/problems").json()
        assert {p["slug"] for p in listing} >= {"checkpoint_dot_policy"}
        detail = client.get("/api/v1/problems/checkpoint_dot_policy")
        assert client.get("/docs").status_code == 200
        assert "/api/v1/submissions" in client.get("/openapi.json").json()["paths"]
    body = detail.json()
    assert body["signature"] == "checkpoint_dot_policy(w1, w2, x)"
    assert body["starter"] and body["statement"].startswith("# ")
    assert "jax.checkpoint(pipeline, policy=policy)" not in detail.text
    assert reference not in detail.text


def test_forgeries_are_judged_by_what_they_compute(server: Server) -> None:
    with server.client() as client:
        fake = submit(client, (DOT / "wrong" / "fake_accepted_output.py").read_text()).json()
        patched = submit(client, (DOT / "wrong" / "patched_saved_residuals.py").read_text()).json()
    assert fake["verdict"] == "WRONG_ANSWER"
    assert '"verdict": "ACCEPTED"' in fake["stdout"]  # it printed its forgery; nobody believed it
    assert patched["verdict"] == "WRONG_POLICY"
    assert len(patched["residuals"]["submitted"]) == 7


def test_queued_and_running_submissions_survive_a_crash(tmp_path: Path, judge_config: JudgeConfig) -> None:
    data = tmp_path / "data"
    first = Server(data, workers=1).start()
    with first.client() as client:
        slow = submit(client, (DOT / "wrong" / "infinite_loop.py").read_text(), wait=False).json()["id"]
        queued = submit(client, (DOT / "reference.py").read_text(), wait=False).json()["id"]
        deadline = time.monotonic() + 30
        while client.get(f"/api/v1/submissions/{slow}").json()["status"] != "running":
            assert time.monotonic() < deadline
            time.sleep(0.2)
    first.stop(signal.SIGKILL)  # a crash: no shutdown handler runs
    rows = dict(sqlite3.connect(data / "remat-judge.db").execute("select id, status from submissions").fetchall())
    assert rows == {slow: "running", queued: "queued"}

    second = Server(data, workers=1).start()
    try:
        with second.client() as client:
            deadline = time.monotonic() + 120
            results = {}
            while time.monotonic() < deadline and len(results) < 2:
                for sid in (slow, queued):
                    body = client.get(f"/api/v1/submissions/{sid}").json()
                    if body["status"] == "done":
                        results[sid] = body
                time.sleep(0.5)
    finally:
        second.stop()
    assert results[slow]["verdict"] == "TIME_LIMIT_EXCEEDED"
    assert results[queued]["verdict"] == "ACCEPTED"
    stored = json.loads(
        sqlite3.connect(data / "remat-judge.db")
        .execute("select result_json from submissions where id = ?", (queued,))
        .fetchone()[0]
    )
    assert stored["verdict"] == "ACCEPTED"
