"""Database faults and idempotent submits, fast (TestClient, real SQLite; the database that is away
is a real PostgreSQL URL on a port nobody listens on): every route answers 503 with Retry-After
and a message instead of a 500, counted in the metrics; a submission once stored is answered even
if reading it back fails; an Idempotency-Key makes a retried submit answer the stored submission
(a different body with the same key is a 422), for single submits and batch items, under
concurrency, not counted against the rate limit, and free again after 24 hours."""

from __future__ import annotations

import re
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, update
from sqlalchemy.exc import OperationalError

from server.platform import metrics
from server.store.accounts import ClientStore, SessionStore, UserStore
from server.store.db import make_engine, utcnow
from server.store.submissions import IdempotencyKey, SubmissionRecord, SubmissionStore
from tests.unit.test_api_admission import SOURCE, make_client

DEAD = "postgresql://remat@127.0.0.1:1/judge"  # nothing listens on port 1: connecting is refused at once


def cut_off(client: TestClient, services) -> None:  # type: ignore[no-untyped-def]
    """Points every store of the app at a database that is away."""
    dead = make_engine(DEAD)
    store = SubmissionStore(dead)
    services.submissions, services.leases, services.outbox, services.reports = store, store, store, store
    services.users, services.clients = UserStore(dead), ClientStore(dead)
    services.sessions = SessionStore(dead, max_age_s=services.settings.session_max_age_s)
    services.admission.queue_depth = services.reports.queue_depth
    services.engine = dead


def unavailable_count() -> float:
    return metrics.DATABASE_UNAVAILABLE.labels(where="http")._value.get()


def test_every_door_answers_503_with_retry_after_when_the_database_is_away(tmp_path: Path) -> None:
    client, services = make_client(tmp_path, max_queue_depth=100)
    stored = client.post("/api/v1/submissions", json={"problem": "checkpoint_dot_policy", "source": SOURCE}).json()
    page = client.get("/signin")
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
    cut_off(client, services)
    before = unavailable_count()
    answers = {
        "submit": client.post("/api/v1/submissions", json={"problem": "checkpoint_dot_policy", "source": SOURCE}),
        "read": client.get(f"/api/v1/submissions/{stored['id']}"),
        "batch read": client.get("/api/v1/submissions/batch", params={"ids": stored["id"]}),
        "sign in": client.post(
            "/signin",
            data={"email": "a@uni.example", "password": "pw-123456789", "csrf_token": csrf},
            headers={"accept": "text/html"},
        ),
        "web status": client.get(f"/submissions/{stored['id']}/status"),
    }
    for name, answer in answers.items():
        assert answer.status_code == 503, (name, answer.status_code, answer.text[:300])
        assert answer.headers["retry-after"] == "5", name
        assert "Traceback" not in answer.text and "psycopg" not in answer.text and "127.0.0.1" not in answer.text
    assert "database" in answers["submit"].json()["detail"]  # the queue-depth count failed: the database, not the queue
    assert "Try again in a moment" in answers["sign in"].text  # an HTML page for browsers
    batch = client.post(
        "/api/v1/submissions/batch", json={"submissions": [{"problem": "checkpoint_dot_policy", "source": SOURCE}]}
    )
    assert batch.status_code == 503 or batch.json()["items"][0]["error"] == 503
    assert unavailable_count() - before >= len(answers)


def test_a_stored_submission_is_answered_even_if_reading_it_back_fails(tmp_path: Path) -> None:
    client, services = make_client(tmp_path)

    class ReadBackFails(SubmissionStore):
        def get(self, submission_id: str) -> SubmissionRecord | None:
            raise OperationalError("SELECT", {}, Exception("server closed the connection unexpectedly"))

    services.submissions = ReadBackFails(services.engine)
    answer = client.post("/api/v1/submissions", json={"problem": "checkpoint_dot_policy", "source": SOURCE})
    assert answer.status_code == 202 and answer.json()["status"] == "queued"
    with services.engine.connect() as connection:
        ids = list(connection.execute(select(SubmissionRecord.id)).scalars())
    assert ids == [answer.json()["id"]]


def submit(client: TestClient, key: str | None, source: str = SOURCE, **headers: str):  # type: ignore[no-untyped-def]
    if key is not None:
        headers["Idempotency-Key"] = key if key.isascii() else key.encode("utf-8")  # type: ignore[assignment]
    return client.post(
        "/api/v1/submissions",
        json={"problem": "checkpoint_dot_policy", "source": source, "external_id": "attempt-1"},
        headers=headers,
    )


def rows(services) -> int:  # type: ignore[no-untyped-def]
    with services.engine.connect() as connection:
        return connection.execute(select(func.count()).select_from(SubmissionRecord)).scalar_one()


def test_a_repeated_submit_with_its_key_answers_the_stored_submission(tmp_path: Path) -> None:
    client, services = make_client(tmp_path)
    first = submit(client, "7f1c2a9e-1b2c-4d5e-8f90-123456789abc")
    again = submit(client, "7f1c2a9e-1b2c-4d5e-8f90-123456789abc")
    quoted = submit(client, '"7f1c2a9e-1b2c-4d5e-8f90-123456789abc"')  # the draft's sf-string form
    assert first.status_code == again.status_code == quoted.status_code == 202
    assert first.json()["id"] == again.json()["id"] == quoted.json()["id"] and rows(services) == 1
    other = submit(client, "7f1c2a9e-1b2c-4d5e-8f90-123456789abc", source=SOURCE + "\n# changed\n")
    assert other.status_code == 422 and "another request" in other.json()["detail"] and rows(services) == 1
    assert submit(client, "a-second-key").json()["id"] != first.json()["id"] and rows(services) == 2
    assert submit(client, None).status_code == 202 and rows(services) == 3  # no key: a new one each time


@pytest.mark.parametrize("key", ["", "has space", "é-not-ascii", "x" * 256, "tab\there"])
def test_a_malformed_key_is_422_and_stores_nothing(tmp_path: Path, key: str) -> None:
    client, services = make_client(tmp_path)
    answer = submit(client, key)
    assert answer.status_code == 422 and "Idempotency-Key" in answer.json()["detail"] and rows(services) == 0


def test_keys_belong_to_their_caller_and_expire_after_24_hours(tmp_path: Path) -> None:
    client, services = make_client(tmp_path)
    _, key_a = services.clients.create("lms-a")
    _, key_b = services.clients.create("lms-b")
    a = submit(client, "shared-key", Authorization=f"Bearer {key_a}")
    b = submit(client, "shared-key", Authorization=f"Bearer {key_b}")
    assert a.status_code == b.status_code == 202 and a.json()["id"] != b.json()["id"]
    with services.engine.begin() as connection:  # a day and an hour later
        connection.execute(update(IdempotencyKey).values(created_at=utcnow() - timedelta(hours=25)))
    later = submit(client, "shared-key", Authorization=f"Bearer {key_a}")
    assert later.status_code == 202 and later.json()["id"] != a.json()["id"] and rows(services) == 3


def test_a_replay_is_not_counted_against_the_rate_limit(tmp_path: Path) -> None:
    client, services = make_client(tmp_path, rate_limit="2/minute")
    first = submit(client, "k-1")
    assert [submit(client, "k-1").status_code for _ in range(5)] == [202] * 5  # replays
    assert submit(client, "k-2").status_code == 202
    assert submit(client, "k-3").status_code == 429 and rows(services) == 2
    assert submit(client, "k-1").json()["id"] == first.json()["id"]


def test_concurrent_repeats_store_one_submission(tmp_path: Path) -> None:
    client, services = make_client(tmp_path)
    answers: list = []
    lock = threading.Lock()

    def send() -> None:
        answer = submit(TestClient(client.app), "concurrent-key")
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=send) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    codes = sorted(a.status_code for a in answers)
    assert set(codes) <= {202, 409} and 202 in codes, codes
    assert len({a.json()["id"] for a in answers if a.status_code == 202}) == 1 and rows(services) == 1


def test_batch_items_carry_their_own_keys(tmp_path: Path) -> None:
    client, services = make_client(tmp_path)
    body = {
        "submissions": [
            {"problem": "checkpoint_dot_policy", "source": SOURCE, "idempotency_key": "item-1"},
            {"problem": "checkpoint_dot_policy", "source": SOURCE + "\n", "idempotency_key": "item-2"},
            {"problem": "checkpoint_dot_policy", "source": SOURCE},
        ]
    }
    first = client.post("/api/v1/submissions/batch", json=body).json()["items"]
    again = client.post("/api/v1/submissions/batch", json=body).json()["items"]
    assert [i["id"] for i in first[:2]] == [i["id"] for i in again[:2]] and first[2]["id"] != again[2]["id"]
    assert rows(services) == 4
    body["submissions"][1]["source"] = SOURCE + "\n\n"
    changed = client.post("/api/v1/submissions/batch", json=body).json()["items"]
    assert changed[1]["error"] == 422 and changed[0]["id"] == first[0]["id"]
