"""LMS grade passback rows and their sender (server/store/lti_passback.py, server/lti/grade_sender.py) on a
migrated SQLite database, against the simulated gradebook (tests/lti_gradebook.py): verdicts in
the same second, a verdict while a score is being sent, one sender per row, retries with backoff,
409 once more then failed, 400 failed with the platform's message, the best rule."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from server.lti.ags import AgsClient
from server.lti.grade_sender import LtiGradeSender, Scorer
from server.store import migrate
from server.store.course_store import CourseStore
from server.store.courses import CourseRole
from server.store.db import make_engine, utcnow
from server.store.lti import LtiGradePassback, PassbackStatus
from server.store.lti_passback import PassbackStore
from server.store.lti_store import LtiStore
from server.store.submissions import SubmissionStore
from tests.integration.test_lti_ags import CLIENT_ID, make_key
from tests.lti_gradebook import Gradebook

SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
SLUG = "remat_sin_sin"


class World:
    def __init__(self, tmp_path: Path):
        self.key = make_key()
        self.book = Gradebook(jwks=self.key.jwks(), client_id=CLIENT_ID).start()
        url = f"sqlite:///{tmp_path / 'judge.db'}"
        migrate.upgrade(url)
        self.engine = make_engine(url)
        self.lti, self.rows = LtiStore(self.engine), PassbackStore(self.engine)
        platform = self.lti.register(
            issuer="https://lms.example",
            client_id=CLIENT_ID,
            deployment_ids=["d1"],
            auth_login_url="https://lms.example/auth",
            auth_token_url=self.book.token_url,
            keyset_url="https://lms.example/jwks",
        )
        self.user = self.lti.account_for(
            issuer="https://lms.example", sub="s1", name="Ada", email=None, role=CourseRole.STUDENT
        )
        link = self.lti.save_resource_link(
            platform_id=platform.id,
            deployment_id="d1",
            resource_link_id="l1",
            context_id="c1",
            title="t",
            problem=SLUG,
            ags={"scope": [SCOPE], "lineitem": self.book.lineitem_url("7")},
        )
        self.rows.launched(resource_link_id=link.id, issuer="https://lms.example", sub="s1", user_id=self.user.id)
        self.sender = LtiGradeSender(
            self.rows,
            Scorer(CourseStore(self.engine)),
            self.key,
            AgsClient(timeout_s=5, allow_networks=["127.0.0.0/8"]),
            max_attempts=3,
        )
        self.store = SubmissionStore(self.engine)

    def verdict(self, score: float, problem: str = SLUG, user_id: int | None = None) -> int:
        """Stores a graded submission worth `score` and tells the passback, as grading does."""
        user_id = self.user.id if user_id is None else user_id
        record = self.store.create(problem=problem, source="x = 1", user_id=user_id)
        assert self.store.claim(record.id, worker_id="w", lease_s=60, max_attempts=3).record is not None
        assert self.store.finish(
            record.id,
            verdict="ACCEPTED" if score == 1.0 else "WRONG_POLICY",
            score=score,
            problem_version="v",
            result_json="{}",
            worker_id="w",
        )
        self.last_id = record.id
        return self.rows.verdict_stored(user_id=user_id, problem=problem)

    def drain(self) -> int:
        """Claims and sends until nothing is due; how many sends."""
        sent = 0
        while due := self.rows.claim_due(lease_s=60):
            for row in due:
                self.sender.send(row)
                sent += 1
        return sent

    def row(self) -> LtiGradePassback:
        from sqlalchemy.orm import Session

        with Session(self.engine) as session:
            return session.query(LtiGradePassback).one()

    def make_due(self) -> None:
        with self.engine.begin() as connection:
            connection.execute(update(LtiGradePassback).values(next_at=utcnow() - timedelta(seconds=1)))

    def accepted(self) -> list[dict]:
        return self.book.accepted("7", "s1")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    yield w
    w.book.stop()
    w.engine.dispose()


def stamp(score: dict) -> datetime:
    return datetime.fromisoformat(score["timestamp"])


def test_a_launch_makes_an_idle_row_and_other_problems_or_users_touch_nothing(world: World) -> None:
    assert world.row().status == PassbackStatus.IDLE
    assert world.verdict(1.0, problem="checkpoint_dot_policy") == 0
    assert world.rows.verdict_stored(user_id=world.user.id + 99, problem=SLUG) == 0
    assert world.drain() == 0 and world.book.requests == []


def test_verdicts_in_one_second_are_sent_in_order_with_newer_seconds_and_the_best_rule(world: World) -> None:
    assert world.verdict(0.25) == 1
    assert world.drain() == 1
    world.verdict(1.0)  # within the same second as the first: the timestamp moves on a second
    best = world.last_id
    assert world.drain() == 1
    first, second = world.accepted()
    assert (first["scoreGiven"], second["scoreGiven"]) == (0.25, 1.0)
    assert int(stamp(second).timestamp()) > int(stamp(first).timestamp())
    world.verdict(0.5)  # worse: best stays 1.0, nothing is sent
    assert world.drain() == 1 and len(world.book.requests) == 2
    row = world.row()
    assert (row.status, row.best_score, row.last_sent_score, row.pending_seq) == (PassbackStatus.DELIVERED, 1.0, 1.0, 3)
    assert row.pending_submission_id == best  # the submission that earned the best score


def test_a_verdict_while_sending_is_sent_after_it_and_one_sender_holds_a_row(world: World) -> None:
    world.verdict(0.25)
    [claimed] = world.rows.claim_due(lease_s=60)
    assert world.rows.claim_due(lease_s=60) == []  # another sender (process) gets nothing
    compute = world.sender.scorer

    def score_then_a_verdict_arrives(due):  # type: ignore[no-untyped-def]
        standing = compute(due)  # the score of this send is computed ...
        world.sender.scorer = compute
        world.verdict(1.0)  # ... and a better verdict is stored while it is in flight
        assert world.rows.claim_due(lease_s=60) == []  # the holder's lease is kept: no concurrent send
        return standing

    world.sender.scorer = score_then_a_verdict_arrives
    assert world.sender.send(claimed) is True  # a newer verdict waits
    assert world.row().status == PassbackStatus.PENDING
    assert world.drain() == 1
    assert [s["scoreGiven"] for s in world.accepted()] == [0.25, 1.0]
    assert world.row().status == PassbackStatus.DELIVERED


def test_the_score_is_computed_when_sent_so_a_queue_of_verdicts_sends_only_the_newest(world: World) -> None:
    world.verdict(0.25)
    world.verdict(1.0)
    world.verdict(0.5)
    assert world.drain() == 1
    assert [s["scoreGiven"] for s in world.accepted()] == [1.0]


def test_retryable_failures_back_off_then_deliver(world: World) -> None:
    world.book.script = [503]
    world.verdict(1.0)
    assert world.drain() == 1
    row = world.row()
    assert row.status == PassbackStatus.PENDING and row.attempts == 1 and row.last_code == 503
    assert row.next_at is not None and row.next_at > utcnow() + timedelta(milliseconds=500)  # backoff_s(1) >= 1 s
    assert "503" in (row.last_error or "")
    world.make_due()
    assert world.drain() == 1
    row = world.row()
    assert row.status == PassbackStatus.DELIVERED and row.attempts == 0 and row.last_sent_score == 1.0
    world.book.script = [503, 503, 503]
    world.verdict(0.0)
    world.verdict(1.0)  # same best: nothing to send
    assert world.drain() == 1 and world.row().status == PassbackStatus.DELIVERED


def test_retries_are_used_up(world: World) -> None:
    world.book.script = [503, 503, 503]
    world.verdict(1.0)
    for _ in range(3):
        world.make_due()
        world.drain()
    row = world.row()
    assert row.status == PassbackStatus.FAILED and row.attempts == 3 and world.accepted() == []


def test_a_409_is_tried_once_more_with_the_next_second_then_failed(world: World) -> None:
    world.book.script = [409]
    world.verdict(1.0)
    assert world.drain() == 2  # the 409, then at once the next second
    [accepted] = world.accepted()
    conflicted = [r for r in world.book.requests if r.status == 409]
    assert len(conflicted) == 1
    import json

    refused_at = datetime.fromisoformat(json.loads(conflicted[0].body)["timestamp"])
    assert int(stamp(accepted).timestamp()) == int(refused_at.timestamp()) + 1
    assert world.row().status == PassbackStatus.DELIVERED

    world.book.script = [409, 409]
    world.verdict(0.0)
    world.book.script = [409, 409]
    world.rows.verdict_stored(user_id=world.user.id, problem=SLUG)
    with world.engine.begin() as connection:  # a new best that the platform keeps refusing
        connection.execute(update(LtiGradePassback).values(last_sent_score=0.5))
    assert world.drain() == 2
    row = world.row()
    assert row.status == PassbackStatus.FAILED and row.last_code == 409 and "409" in (row.last_error or "")


def test_a_400_fails_with_the_platforms_message(world: World) -> None:
    world.book.script = [400]
    world.verdict(1.0)
    assert world.drain() == 1
    row = world.row()
    assert row.status == PassbackStatus.FAILED and row.last_code == 400 and "scripted 400" in (row.last_error or "")
    view = world.rows.rows()
    assert [(v.sub, v.status, v.problem) for v in view] == [("s1", "failed", SLUG)]


def test_an_address_outside_the_allowed_networks_is_refused(world: World) -> None:
    world.sender.client = AgsClient(timeout_s=5)  # loopback not allowed
    world.verdict(1.0)
    assert world.drain() == 1
    row = world.row()
    assert row.status == PassbackStatus.REFUSED and "to REMAT_JUDGE_LTI_ALLOW_NETWORKS" in (row.last_error or "")
    assert world.book.requests == [] and world.book.token_requests == []


def test_a_sender_that_died_mid_post_leaves_a_reserved_timestamp_the_next_one_passes(world: World) -> None:
    world.verdict(0.5)
    [claimed] = world.rows.claim_due(lease_s=60)
    later = datetime.now(UTC) + timedelta(seconds=5)
    world.rows.reserve(claimed.id, later)  # a POST with this timestamp may have reached the platform
    world.make_due()  # its lease ran out
    assert world.drain() == 1
    [accepted] = world.accepted()
    assert int(stamp(accepted).timestamp()) == int(later.timestamp()) + 1
