"""The REST API's rules for batches, `fields` and ownership, fast: FastAPI's TestClient on the real
app with its services replaced (real SQLite, migrated; a queue that records what it is given and
grades nothing). The same rules run end to end through a real server in tests/e2e/test_api_clients.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from server.app import create_app
from server.deps import get_services
from server.settings import Settings
from tests.support import PROBLEMS
from tests.unit.test_api_admission import make_services

SOURCE = (PROBLEMS / "checkpoint_dot_policy" / "reference.py").read_text()
PROBLEM = "checkpoint_dot_policy"


class RecordingQueue:
    """A job queue that keeps the ids it is given, in order (nobody grades them)."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    def put(self, submission_id: str) -> None:
        self.ids.append(submission_id)


class Api:
    """A TestClient on the app, and API keys of two clients: `a` (every problem) and `b` (only
    `remat_sin_sin`)."""

    def __init__(self, tmp_path: Path) -> None:
        settings = Settings(
            data_dir=tmp_path, problems_dir=PROBLEMS, hidden_seed="unit", rate_limit="", wait_timeout_s=0.1
        )
        self.queue = RecordingQueue()
        self.services = make_services(settings, f"sqlite:///{tmp_path / 'judge.db'}", jobs=self.queue)
        _, self.key_a = self.services.clients.create("a")
        _, self.key_b = self.services.clients.create("b", problems=["remat_sin_sin"])
        app = create_app(settings)
        app.dependency_overrides[get_services] = lambda: self.services
        self.client = TestClient(app)  # not entered: the lifespan (grading threads) does not run

    def as_(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}

    def submit(self, key: str, **body: str) -> str:
        answer = self.client.post(
            "/api/v1/submissions", headers=self.as_(key), json={"problem": PROBLEM, "source": SOURCE, **body}
        )
        assert answer.status_code == 202, answer.text
        return str(answer.json()["id"])


@pytest.fixture
def api(tmp_path: Path) -> Api:
    return Api(tmp_path)


def test_a_batch_stores_each_item_on_its_own_and_answers_in_order(api: Api) -> None:
    items = [
        {"problem": PROBLEM, "source": SOURCE, "external_id": "s1"},
        {"problem": "no_such_problem", "source": SOURCE},
        {"problem": PROBLEM, "source": "   "},
        {"problem": PROBLEM, "source": SOURCE, "external_id": "s2"},
    ]
    answer = api.client.post("/api/v1/submissions/batch", headers=api.as_(api.key_a), json={"submissions": items})
    assert answer.status_code == 202, answer.text
    got = answer.json()["items"]
    assert [i["index"] for i in got] == [0, 1, 2, 3]
    assert [i.get("error") for i in got] == [None, 404, 422, None]
    stored = [got[0]["id"], got[3]["id"]]
    assert api.queue.ids == stored  # only the accepted items were queued, in order
    assert "Retry-After" not in answer.headers  # nothing refused for a while


def test_a_batch_outside_one_to_twenty_is_refused_whole(api: Api) -> None:
    item = {"problem": PROBLEM, "source": SOURCE}
    for size in (0, 21):
        answer = api.client.post(
            "/api/v1/submissions/batch", headers=api.as_(api.key_a), json={"submissions": [item] * size}
        )
        assert answer.status_code == 422, (size, answer.text)
    assert api.queue.ids == [] and api.services.reports.count_by_status() == {}


def test_a_batch_item_outside_the_clients_scope_is_refused_alone(api: Api) -> None:
    items = [{"problem": PROBLEM, "source": SOURCE}, {"problem": "remat_sin_sin", "source": SOURCE}]
    got = api.client.post("/api/v1/submissions/batch", headers=api.as_(api.key_b), json={"submissions": items}).json()[
        "items"
    ]
    assert got[0]["error"] == 403 and got[1].get("error") is None


def test_reading_a_batch_keeps_the_order_and_hides_other_owners(api: Api) -> None:
    mine = [api.submit(api.key_a), api.submit(api.key_a)]
    theirs = api.submit(api.key_b, problem="remat_sin_sin")
    ids = [mine[1], theirs, "not-an-id", mine[0]]
    answer = api.client.get(
        "/api/v1/submissions/batch", headers=api.as_(api.key_a), params={"ids": ",".join(ids), "fields": "id,status"}
    )
    assert answer.status_code == 200, answer.text
    rows = answer.json()["submissions"]
    assert [r["id"] for r in rows] == ids
    assert rows[0] == {"id": mine[1], "status": "queued"} and rows[3] == {"id": mine[0], "status": "queued"}
    assert rows[1]["error"] == 404 and rows[2]["error"] == 404  # another owner's id reads as unknown
    for bad in ("", ",".join(mine * 11)):
        assert (
            api.client.get("/api/v1/submissions/batch", headers=api.as_(api.key_a), params={"ids": bad}).status_code
            == 422
        )


def test_fields_choose_what_a_submission_shows_and_unknown_ones_are_named(api: Api) -> None:
    submission_id = api.submit(api.key_a, external_id="ext-1")
    path = f"/api/v1/submissions/{submission_id}"
    assert api.client.get(path, headers=api.as_(api.key_a), params={"fields": "status, external_id"}).json() == {
        "status": "queued",
        "external_id": "ext-1",
    }
    whole = api.client.get(path, headers=api.as_(api.key_a)).json()
    assert whole["id"] == submission_id and "verdict" in whole
    refused = api.client.get(path, headers=api.as_(api.key_a), params={"fields": "status,source_path"})
    assert refused.status_code == 422 and "source_path" in refused.json()["detail"]
    assert api.client.get(path, headers=api.as_(api.key_a), params={"fields": " , "}).status_code == 422


def test_a_client_lists_and_reads_its_own_submissions_only(api: Api) -> None:
    first = api.submit(api.key_a, external_id="alice")
    second = api.submit(api.key_a, external_id="bob")
    theirs = api.submit(api.key_b, problem="remat_sin_sin", external_id="alice")
    listed = api.client.get("/api/v1/submissions", headers=api.as_(api.key_a), params={"fields": "id"}).json()
    assert listed == {"submissions": [{"id": second}, {"id": first}]}  # newest first, none of b's
    alice = api.client.get(
        "/api/v1/submissions", headers=api.as_(api.key_a), params={"external_id": "alice", "fields": "id,external_id"}
    ).json()["submissions"]
    assert alice == [{"id": first, "external_id": "alice"}]
    assert api.client.get(f"/api/v1/submissions/{theirs}", headers=api.as_(api.key_a)).status_code == 404
    assert api.client.get(f"/api/v1/submissions/{first}", headers=api.as_(api.key_b)).status_code == 404
    assert api.client.get(f"/api/v1/submissions/{first}").status_code == 401  # no key, no answer


def test_a_revoked_key_stops_at_once(api: Api) -> None:
    api.submit(api.key_b, problem="remat_sin_sin")
    assert api.services.clients.revoke("b")
    answer = api.client.post(
        "/api/v1/submissions", headers=api.as_(api.key_b), json={"problem": "remat_sin_sin", "source": SOURCE}
    )
    assert answer.status_code == 401
    assert len(api.queue.ids) == 1
