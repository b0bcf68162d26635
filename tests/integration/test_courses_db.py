"""Courses, regrades and hints on both databases (SQLite and a real PostgreSQL started by the tests):
concurrent first launches make one course, a regrade keeps old verdicts and takes running
submissions away from their worker, the gradebook reads the verdicts as they are."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

import pytest

from server.courses.gradebook import gradebook
from server.store import migrate
from server.store.accounts import UserStore
from server.store.course_store import CourseStore
from server.store.courses import CourseRole, LateRule, Policy
from server.store.db import make_engine, utcnow
from server.store.hints import HintStore, RevealReason
from server.store.lti_store import LtiStore
from server.store.regrades import RegradeStore
from server.store.submissions import SubmissionStatus, SubmissionStore


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'judge.db'}" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    migrate.upgrade(url)
    made = make_engine(url)
    yield made
    made.dispose()


def graded(store: SubmissionStore, user_id: int, problem: str, verdict: str, score: float) -> str:
    record = store.create(problem=problem, source="x = 1", user_id=user_id)
    assert store.claim(record.id, worker_id="w", lease_s=60, max_attempts=3).record is not None
    assert store.finish(record.id, verdict=verdict, score=score, problem_version="v0", result_json="{}", worker_id="w")
    return record.id


def test_concurrent_first_launches_make_one_course(engine) -> None:  # type: ignore[no-untyped-def]
    platform = LtiStore(engine).register(
        issuer="https://lms.example",
        client_id="c",
        deployment_ids=["d"],
        auth_login_url="https://lms.example/a",
        auth_token_url="https://lms.example/t",
        keyset_url="https://lms.example/k",
    )
    courses, made = CourseStore(engine), []
    barrier = threading.Barrier(6)

    def launch() -> None:
        barrier.wait()
        made.append(courses.for_context(platform_id=platform.id, deployment_id="d", context_id="ctx", title="JAX"))

    threads = [threading.Thread(target=launch) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({c.id for c in made}) == 1 and len(courses.all()) == 1 and courses.all()[0].title == "JAX"


def test_a_regrade_keeps_old_verdicts_and_the_gradebook_follows(engine) -> None:  # type: ignore[no-untyped-def]
    store, users, courses = SubmissionStore(engine), UserStore(engine), CourseStore(engine)
    ada = users.create(email="ada@uni.example", display_name="Ada", password_hash="x")
    course = courses.create("c1", "C1")
    courses.enroll(course.id, ada.id, CourseRole.STUDENT)
    courses.set_assignment(course.id, "p", Policy(due_at=utcnow() + timedelta(days=1), late_rule=LateRule.NONE))
    done = graded(store, ada.id, "p", "ACCEPTED", 1.0)
    running = store.create(problem="p", source="y = 2", user_id=ada.id).id
    assert store.claim(running, worker_id="old", lease_s=60, max_attempts=3).record is not None
    queued = store.create(problem="p", source="z = 3", user_id=ada.id).id
    other = graded(store, ada.id, "q", "ACCEPTED", 1.0)
    book = gradebook(courses, course)
    assert book.cells[(ada.id, book.assignments[0].id)].standing.score == 1.0

    regrade = RegradeStore(engine).start("p", problem_version="v1", requested_by="cli")
    assert regrade.submissions == 2  # the finished and the running one; the queued one waits as it was
    assert store.get(done).status == store.get(running).status == SubmissionStatus.QUEUED  # type: ignore[union-attr]
    assert store.get(queued).status == SubmissionStatus.QUEUED and store.get(other).status == SubmissionStatus.DONE  # type: ignore[union-attr]
    assert not store.finish(
        running, verdict="ACCEPTED", score=1.0, problem_version="v0", result_json="{}", worker_id="old"
    )  # the old worker's verdict is dropped
    assert set(store.to_enqueue()) >= {done, running}  # the sweeper of any grading process picks them up
    book = gradebook(courses, course)
    assert book.cells[(ada.id, book.assignments[0].id)].standing.score is None  # nothing graded right now

    for sid, verdict, score in ((done, "WRONG_ANSWER", 0.0), (running, "ACCEPTED", 1.0)):
        assert store.claim(sid, worker_id="new", lease_s=60, max_attempts=3).record is not None
        assert store.finish(sid, verdict=verdict, score=score, problem_version="v1", result_json="{}", worker_id="new")
    progress = RegradeStore(engine).progress(regrade.id)
    assert progress is not None and progress.done and (progress.finished, progress.total) == (2, 2)
    assert [(c.submission_id, c.old_verdict, c.new_verdict) for c in progress.changes] == [
        (done, "ACCEPTED", "WRONG_ANSWER")
    ]
    [before] = RegradeStore(engine).history(done)
    assert (before.verdict, before.score, before.status) == ("ACCEPTED", 1.0, "done")
    book = gradebook(courses, course)
    assert book.cells[(ada.id, book.assignments[0].id)].standing.score == 1.0  # the running one's new verdict


def test_hint_reveals_are_recorded_once(engine) -> None:  # type: ignore[no-untyped-def]
    ada = UserStore(engine).create(email="ada@uni.example", display_name="Ada", password_hash="x")
    hints = HintStore(engine)
    assert hints.reveal(ada.id, "p", 1, RevealReason.ATTEMPTS)
    assert not hints.reveal(ada.id, "p", 1, RevealReason.REQUEST)
    assert hints.reveal(ada.id, "p", 2, RevealReason.REQUEST)
    assert hints.revealed(ada.id, "p") == {1: RevealReason.ATTEMPTS, 2: RevealReason.REQUEST}
    assert hints.requested_counts("p") == {ada.id: 1}


def test_per_student_counts(engine) -> None:  # type: ignore[no-untyped-def]
    store, users = SubmissionStore(engine), UserStore(engine)
    ada = users.create(email="ada@uni.example", display_name="Ada", password_hash="x")
    bob = users.create(email="bob@uni.example", display_name="Bob", password_hash="x")
    graded(store, ada.id, "p", "WRONG_POLICY", 0.5)
    first = graded(store, ada.id, "p", "ACCEPTED", 1.0)
    graded(store, ada.id, "p", "ACCEPTED", 1.0)
    graded(store, bob.id, "p", "WRONG_VALUE", 0.0)
    store.create(problem="p", source="api", user_id=None)  # an API submission has no student
    assert store.student_counts() == {"p": (2, 1)}
    ada_row, bob_row = store.per_student("p")
    assert (ada_row.email, ada_row.attempts, ada_row.best_score) == ("ada@uni.example", 3, 1.0)
    assert ada_row.solved_at == store.get(first).created_at  # type: ignore[union-attr]
    assert ada_row.solved_at.tzinfo is not None and bob_row.solved_at is None and bob_row.attempts == 1
