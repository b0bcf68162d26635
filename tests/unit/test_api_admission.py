"""The submission service and admission control through the API, fast: FastAPI's TestClient with
the app's services replaced (real SQLite, migrated; a queue nobody consumes; no grading)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from graders.problems.problem import ProblemRepository
from server.app import create_app
from server.deps import get_services
from server.grading.queue import InProcessQueue
from server.grading.waits import CompletionHub
from server.services import Services
from server.settings import Settings
from server.store import migrate
from server.store.accounts import ClientStore, SessionStore, UserStore
from server.store.course_store import CourseStore
from server.store.db import make_engine
from server.store.hints import HintStore
from server.store.problems import UploadStore
from server.store.regrades import RegradeStore
from server.store.submissions import SubmissionStatus, SubmissionStore
from server.submissions.admission import Admission
from tests.support import PROBLEMS

SOURCE = (PROBLEMS / "checkpoint_dot_policy" / "reference.py").read_text()


class BrokenQueue:
    def put(self, submission_id: str) -> None:
        raise ConnectionError("redis is down")


def make_services(settings: Settings, url: str, *, jobs: object | None = None) -> Services:
    """The app's services on the database at `url` (migrated here), with an in-process queue
    nobody consumes (or `jobs`) and no grading."""
    migrate.upgrade(url)
    engine = make_engine(url)
    store = SubmissionStore(engine)
    return Services(
        settings=settings,
        submissions=store,
        leases=store,
        outbox=store,
        reports=store,
        users=UserStore(engine),
        sessions=SessionStore(engine, max_age_s=settings.session_max_age_s),
        courses=CourseStore(engine),
        regrades=RegradeStore(engine),
        hints=HintStore(engine),
        uploads=UploadStore(engine),
        problems=ProblemRepository(PROBLEMS),
        jobs=jobs or InProcessQueue(),
        hub=CompletionHub(store.finished_among, poll_s=0.05),  # type: ignore[arg-type]
        admission=Admission(
            rate_limit=settings.rate_limit,
            storage_uri="memory://",
            max_queue_depth=settings.max_queue_depth,
            queue_depth=store.queue_depth,
        ),
        clients=ClientStore(engine),
        engine=engine,
    )


def make_client(
    tmp_path: Path,
    *,
    rate_limit: str = "",
    max_queue_depth: int = 0,
    jobs: object | None = None,
    wait_timeout_s: float = 0.2,
    database_url: str | None = None,
) -> tuple[TestClient, Services]:
    settings = Settings(
        data_dir=tmp_path,
        problems_dir=PROBLEMS,
        hidden_seed="unit",
        rate_limit=rate_limit,
        max_queue_depth=max_queue_depth,
        wait_timeout_s=wait_timeout_s,
        allow_anonymous_api=True,
    )
    services = make_services(settings, database_url or f"sqlite:///{tmp_path / 'judge.db'}", jobs=jobs)
    app = create_app(settings)
    app.dependency_overrides[get_services] = lambda: services
    return TestClient(app), services  # not entered: the lifespan (grading threads) does not run


def post(client: TestClient, source: str = SOURCE, problem: str = "checkpoint_dot_policy", **params: str):
    return client.post("/api/v1/submissions", params=params, json={"problem": problem, "source": source})


def test_the_api_refuses_what_the_web_refuses(tmp_path: Path) -> None:
    client, services = make_client(tmp_path)
    assert post(client, " \n\t").status_code == 422
    assert post(client, problem="nope").status_code == 404
    assert post(client, "x" * 70_000).status_code == 413
    assert services.reports.count_by_status() == {}


def test_rate_limit_answers_429_with_retry_after_per_client(tmp_path: Path) -> None:
    client, services = make_client(tmp_path, rate_limit="3/minute")
    assert [post(client).status_code for _ in range(3)] == [202, 202, 202]
    refused = post(client)
    assert refused.status_code == 429
    assert 0 < int(refused.headers["retry-after"]) <= 60 and "3 per 1 minute" in refused.json()["detail"]
    assert services.reports.count_by_status() == {"queued": 3}
    services.admission.check("ip:another-client")  # another client has its own budget


def test_a_full_queue_answers_503_and_stores_nothing(tmp_path: Path) -> None:
    client, services = make_client(tmp_path, max_queue_depth=2)
    assert [post(client).status_code for _ in range(2)] == [202, 202]
    refused = post(client)
    assert refused.status_code == 503 and refused.headers["retry-after"] == "30"
    assert "2 submissions are waiting" in refused.json()["detail"]
    assert services.reports.queue_depth() == 2
    assert client.get("/metrics").status_code == 404  # no token configured: not on the API's port
    services.settings = services.settings.model_copy(update={"metrics_token": "scrape-token"})
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    metrics = client.get("/metrics", headers={"Authorization": "Bearer scrape-token"}).text
    assert 'remat_judge_rejected_requests_total{reason="queue_full"}' in metrics
    assert "remat_judge_queue_depth 2.0" in metrics


def test_a_job_the_queue_refuses_is_still_stored_for_the_sweeper(tmp_path: Path) -> None:
    client, services = make_client(tmp_path, jobs=BrokenQueue())
    response = post(client)
    assert response.status_code == 202
    record = services.submissions.get(response.json()["id"])
    assert record.status == SubmissionStatus.QUEUED and record.enqueued_at is None
    assert services.leases.to_enqueue(older_than_s=0) == [record.id]


def test_wait_answers_202_with_the_stored_submission_after_the_timeout(tmp_path: Path) -> None:
    client, services = make_client(tmp_path, wait_timeout_s=0.3)
    pending = post(client, wait="true")
    assert pending.status_code == 202 and pending.json()["status"] == "queued"
    assert pending.headers["location"] == f"/api/v1/submissions/{pending.json()['id']}"
    assert services.hub.waiting == 0  # the finished wait left nothing behind


def test_the_hub_wakes_waiters_from_threads_and_from_polls() -> None:
    import asyncio
    import threading

    finished: set[str] = set()

    async def scenario() -> None:
        hub = CompletionHub(lambda ids: finished & set(ids), poll_s=0.05)
        hub.start()
        threading.Timer(0.1, hub.notify_threadsafe, args=("a",)).start()  # a grading thread
        assert await hub.wait("a", timeout_s=5)

        async def finish_later() -> None:
            await asyncio.sleep(0.1)
            finished.add("b")  # stored by another process: only the poll sees it

        task = asyncio.create_task(finish_later())
        assert await hub.wait("b", timeout_s=5)
        await task
        assert not await hub.wait("c", timeout_s=0.1)
        waits = [asyncio.create_task(hub.wait("d", timeout_s=5)) for _ in range(300)]
        await asyncio.sleep(0.05)
        assert hub.waiting == 300
        hub.notify("d")
        assert all(await asyncio.gather(*waits)) and hub.waiting == 0
        await hub.stop()

    asyncio.run(scenario())


@pytest.mark.parametrize("path", ["/healthz", "/api/v1/healthz"])
def test_healthz_touches_neither_database_nor_queue(tmp_path: Path, path: str) -> None:
    client, services = make_client(tmp_path)
    services.submissions = services.leases = services.outbox = services.reports = None  # type: ignore[assignment]
    body = client.get(path).json()
    assert body["status"] == "ok" and body["mode"] == "embedded" and body["waiting_requests"] == 0
