"""Grading stored submissions, exactly once each: claim, grade, store, announce.

One `Grader` per worker process (the embedded server, or `remat-judge worker`), whatever queue
delivers the jobs. A job names a submission id and nothing else: everything else is read from the
database, which is the source of truth (`server/store/submissions/`):

1. `claim` takes the submission with one conditional UPDATE (queued, or running with an expired
   lease -> running, attempts + 1). A second delivery of the same job finds it claimed or finished
   and does nothing (counted as a redelivery).
2. While it grades, a `LeaseKeeper` thread renews the claim every `lease_s / 3` seconds. A worker
   that dies stops renewing; `lease_s` later another may claim the submission again.
3. The verdict is stored (`finish`) only while this worker still holds the claim, and only then
   is the job acknowledged (the caller returns): a worker killed before that leaves the job
   unacknowledged, and the queue delivers it again.
4. After `max_attempts` claims the submission ends "failed" with an INTERNAL_ERROR verdict that
   instructors see, instead of being graded (and crashing a worker) forever.
5. A submission whose problem is refused when it is graded (published, its snapshot gone and its
   folder changed: `ProblemUnavailable`) ends "failed" with no verdict and a message that says so
   (`not_served_report`): not graded, not retried, counted nowhere; a regrade grades it again.

`server.grading.sweeper.Sweeper` re-enqueues what no queue holds any more: jobs never accepted by
the queue, expired claims, and (for Redis) everything queued when the Redis server restarted and
lost its data.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from graders.config import JudgeConfig
from graders.insight import fingerprint
from graders.pipeline import grade, internal_error_report
from graders.problems.problem import ProblemRepository, ProblemUnavailable
from graders.problems.spec import ProblemError
from graders.verdict import CheckResult, Verdict, VerdictReport
from server.delivery.senders import DueSender
from server.platform import metrics
from server.platform.logs import submission_context
from server.store.db import utcnow
from server.store.faults import DATABASE, Outage, is_database_fault
from server.store.submissions import SubmissionRecord, SubmissionStatus, SubmissionStore

log = logging.getLogger(__name__)
STORE_RETRY_S = 900.0  # how long a computed verdict waits for the database before its job is given back
ANNOUNCE_FAULTS = Outage("announcing verdicts (waiting requests poll the database meanwhile)", log)


def new_worker_id(kind: str) -> str:
    """A name for one worker process, unique across machines and restarts:
    `<kind>-<host>-<pid>-<random>` (at most 64 characters)."""
    return f"{kind}-{socket.gethostname()[:24]}-{os.getpid()}-{uuid.uuid4().hex[:8]}"[:64]


class GradePassback(Protocol):
    """The LMS grade sender as the grader uses it (`server.lti.grade_sender.LtiGradeSender`, above)."""

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def verdict_stored(self, *, user_id: int | None, problem: str) -> int: ...


class LeaseKeeper:
    """Renews this worker's claims on the submissions it is grading, every `lease_s / 3` s."""

    def __init__(self, store: SubmissionStore, *, worker_id: str, lease_s: float):
        self.store, self.worker_id, self.lease_s = store, worker_id, lease_s
        self._held: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="remat-leases", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def hold(self, submission_id: str) -> None:
        with self._lock:
            self._held.add(submission_id)

    def release(self, submission_id: str) -> None:
        with self._lock:
            self._held.discard(submission_id)

    def _loop(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            with self._lock:
                held = sorted(self._held)
            try:
                self.store.renew_leases(held, worker_id=self.worker_id, lease_s=self.lease_s)
            except Exception as exc:  # the database is away: the claims may lapse, nothing else breaks
                if not is_database_fault(exc):
                    log.exception("renewing leases failed")
                DATABASE.failed(exc, where="renewing leases")


class Grader:
    """Grades one stored submission per `grade` call (thread-safe; one per worker process).

    Args:
        store: the submissions.
        problems: the problem packages.
        config_factory: the judge configuration (seed, cache and limits) for each grading.
        worker_id: this process's name in claims (`new_worker_id`).
        lease_s: claim lease in seconds; max_attempts: claims before "failed".
        on_finished: called with the id once its verdict is stored (announces it to waiting
            requests: in process, or through Redis).
        callbacks: sends the callbacks of API clients' submissions (off the grading path).
        grades: passes web users' scores back to the LMS of their LTI launches (off the grading
            path; `server.lti.grade_sender`).
    """

    def __init__(
        self,
        *,
        store: SubmissionStore,
        problems: ProblemRepository,
        config_factory: Callable[[], JudgeConfig],
        worker_id: str,
        lease_s: float,
        max_attempts: int,
        on_finished: Callable[[str], None] = lambda submission_id: None,
        callbacks: DueSender | None = None,
        grades: GradePassback | None = None,
    ):
        self.store, self.problems, self.config_factory = store, problems, config_factory
        self.worker_id, self.lease_s, self.max_attempts = worker_id, lease_s, max_attempts
        self.on_finished, self.callbacks, self.grades = on_finished, callbacks, grades
        self.leases = LeaseKeeper(store, worker_id=worker_id, lease_s=lease_s)
        self._stopping = threading.Event()

    def start(self) -> None:
        self._stopping.clear()
        self.leases.start()
        if self.callbacks is not None:
            self.callbacks.start()
        if self.grades is not None:
            self.grades.start()

    def stop(self) -> None:
        self._stopping.set()
        self.leases.stop()
        if self.callbacks is not None:
            self.callbacks.stop()
        if self.grades is not None:
            self.grades.stop()

    def grade(self, submission_id: str) -> str:
        """Claims, grades and stores one submission. Never raises for anything the submission
        does; a database failure propagates (the job is then retried or delivered again).

        Returns:
            What happened: "graded", "refused" (its problem is not served: stored "failed" without
            a verdict), "failed" (attempts exhausted), "lost" (the claim was taken over before the
            verdict was stored; the other worker stores its own), or the claim's refusal:
            "unknown", "finished", "held".
        """
        with submission_context(submission_id):
            claim = self.store.claim(
                submission_id, worker_id=self.worker_id, lease_s=self.lease_s, max_attempts=self.max_attempts
            )
            if claim.reason == "exhausted":
                return self._fail(submission_id)
            if claim.record is None:
                if claim.reason in ("finished", "held"):
                    metrics.REDELIVERIES.inc()
                log.info("not grading %s: %s", submission_id, claim.reason)
                return claim.reason
            record = claim.record
            if record.attempts > 1:
                metrics.REDELIVERIES.inc()
                log.warning("grading %s again (attempt %d of %d)", submission_id, record.attempts, self.max_attempts)
            self.leases.hold(submission_id)
            report = self._grade_busy(submission_id, record)
            try:
                stored = self._store_verdict(submission_id, record, report)
            finally:
                self.leases.release(submission_id)
            if not stored:
                log.warning("the claim on %s was taken over before its verdict was stored", submission_id)
                return "lost"
            if report.verdict is None:  # its problem is refused: nothing was graded, nothing counts
                log.warning("not grading %s: %s is not served", submission_id, record.problem)
                self._announce(submission_id)
                return "refused"
            metrics.observe_verdict(self._metric_label(record.problem), report.verdict.value, report.timing_ms)
            log.info(
                "graded %s (%s): %s in %.0f ms",
                submission_id,
                record.problem,
                report.verdict.value,
                report.timing_ms.get("total", 0.0),
            )
            self._announce(submission_id, record=record, verdict=report.verdict.value, score=report.score)
            return "graded"

    def _grade_busy(self, submission_id: str, record: SubmissionRecord) -> VerdictReport:
        """Grades a claimed submission, counted as a busy worker meanwhile; a fault of the judge
        gives the submission INTERNAL_ERROR."""
        metrics.BUSY_WORKERS.inc()
        metrics.IDLE_WORKERS.dec()
        try:
            return self._grade(record.problem, record.source)
        except Exception as exc:  # a fault of the judge: the submission gets INTERNAL_ERROR
            log.exception("grading %s failed", submission_id)
            return internal_error_report(record.problem, f"{type(exc).__name__}: {exc}")
        finally:
            metrics.BUSY_WORKERS.dec()
            metrics.IDLE_WORKERS.inc()

    def _store_verdict(self, submission_id: str, record: SubmissionRecord, report: VerdictReport) -> bool:
        """Completes the report (id, status, queue time, timestamps) and stores its verdict while
        this worker holds the claim; False when the claim was taken over. A report without a
        verdict (`not_served_report`) is stored "failed", with no verdict and no score."""
        queue_ms = (record.started_at - record.created_at).total_seconds() * 1000 if record.started_at else 0.0
        status = SubmissionStatus.DONE if report.verdict is not None else SubmissionStatus.FAILED
        report.id = record.id
        report.status = status.value
        report.timing_ms = {"queue": round(queue_ms, 1), **report.timing_ms}
        report.created_at = record.created_at.isoformat()
        report.finished_at = utcnow().isoformat()
        verdict = report.verdict.value if report.verdict is not None else None
        score, result_json = (report.score if verdict is not None else None), report.stored_json()
        policy = policy_fingerprint(report)
        return self._store_when_possible(
            lambda: self.store.finish(
                submission_id,
                verdict=verdict,
                score=score,
                problem_version=report.problem_version,
                result_json=result_json,
                worker_id=self.worker_id,
                status=status,
                policy_fingerprint=policy,
                program_digest=report.program_digest,
            )
        )

    def _store_when_possible(self, store: Callable[[], bool]) -> bool:
        """Runs `store` (a verdict's one UPDATE) until the database takes it: a verdict computed
        while the database is away is kept and stored when it returns, instead of being graded
        again (which would use up one of the submission's attempts for our fault). Tries every
        quarter second at first, then every second, for up to `STORE_RETRY_S`, while this worker
        is not stopping; the claim's lease may lapse meanwhile, but `finish` only needs the claim
        to be still this worker's (nobody else can claim while the database is away).

        Raises:
            What `store` raises that is not a database fault, or a database fault past the time
            or once the worker stops (the job is then delivered again).
        """
        delay_s, deadline = 0.25, time.monotonic() + STORE_RETRY_S
        while True:
            try:
                stored = store()
            except Exception as exc:
                if not is_database_fault(exc) or time.monotonic() >= deadline or self._stopping.is_set():
                    raise
                DATABASE.failed(exc, where="storing a verdict (kept, stored when the database is back)")
                metrics.DATABASE_UNAVAILABLE.labels(where="verdict").inc()
                self._stopping.wait(delay_s)
                delay_s = min(1.0, delay_s * 2)
                continue
            DATABASE.recovered()
            return stored

    def _metric_label(self, slug: str) -> str:
        """The `problem` label of a verdict metric: the slug of a published problem, else
        "unpublished" (metrics must not announce problems students cannot see)."""
        try:
            return slug if self.problems.is_published(slug) else metrics.UNPUBLISHED
        except Exception:  # noqa: BLE001 - a package that does not load: no name either
            return metrics.UNPUBLISHED

    def _fail(self, submission_id: str) -> str:
        record = self.store.get(submission_id)
        slug = record.problem if record is not None else "?"
        report = internal_error_report(
            slug,
            f"grading failed {self.max_attempts} times (the worker died or the "
            f"judge failed each time); not retried again",
        )
        report.id = submission_id
        report.status = SubmissionStatus.FAILED.value
        if record is not None:
            report.created_at = record.created_at.isoformat()
        report.finished_at = utcnow().isoformat()
        result_json = report.stored_json()
        self._store_when_possible(
            lambda: self.store.finish(
                submission_id,
                verdict=Verdict.INTERNAL_ERROR.value,
                score=0.0,
                problem_version=None,
                result_json=result_json,
                worker_id=self.worker_id,
                status=SubmissionStatus.FAILED,
            )
        )
        metrics.observe_verdict(self._metric_label(slug), Verdict.INTERNAL_ERROR.value, {})
        log.error("submission %s failed after %d attempts", submission_id, self.max_attempts)
        self._announce(submission_id)
        return "failed"

    def _announce(
        self,
        submission_id: str,
        *,
        record: SubmissionRecord | None = None,
        verdict: str | None = None,
        score: float | None = None,
    ) -> None:
        """Tells waiting requests, makes a pending callback due and, for a web user's graded
        verdict (`record` given; INTERNAL_ERROR is the judge's fault, never a grade), makes the
        LMS passback of their launches on that problem pending. None of it raises."""
        try:
            self.on_finished(submission_id)
            ANNOUNCE_FAULTS.recovered()
        except Exception as exc:  # noqa: BLE001 - Redis is away: waiting requests also poll the database (said once)
            ANNOUNCE_FAULTS.failed(exc)
        try:
            self.store.callback_due_now(submission_id)  # no-op without a pending callback
            if self.callbacks is not None:
                self.callbacks.kick()
        except Exception as exc:
            if is_database_fault(exc):  # said once per outage, without a traceback
                DATABASE.failed(exc, where="scheduling a callback (it stays pending)")
            else:
                log.exception("scheduling the callback of %s failed", submission_id)
        if (
            self.grades is not None
            and record is not None
            and record.user_id is not None
            and score is not None
            and verdict != Verdict.INTERNAL_ERROR.value
        ):
            try:  # one UPDATE (no row for an account without LTI launches)
                self.grades.verdict_stored(user_id=record.user_id, problem=record.problem)
            except Exception as exc:
                if is_database_fault(exc):  # said once per outage, without a traceback
                    DATABASE.failed(exc, where="scheduling an LMS grade passback")
                else:
                    log.exception("scheduling the LMS grade passback of %s failed", submission_id)

    def _grade(self, slug: str, source: str) -> VerdictReport:
        try:
            problem = self.problems.get(slug)
        except ProblemUnavailable as exc:  # refused, not broken: not graded, and grading again changes nothing
            return not_served_report(slug, str(exc))
        except (KeyError, ProblemError) as exc:
            return internal_error_report(slug, f"the problem cannot be loaded: {exc}")
        config = self.config_factory()
        if config.ready_children and self._backlog():
            config = replace(config, ready_refill=False)
        return grade(source, problem, config)

    def _backlog(self) -> bool:
        """Whether submissions are queued now (then no child is started ahead: the next job is
        already waiting). A database that cannot say counts as no backlog."""
        try:
            return self.store.queue_depth() > 0
        except Exception as exc:  # noqa: BLE001 - only a hint; the grading goes on either way
            if is_database_fault(exc):
                DATABASE.failed(exc, where="reading the queue depth before a grading")
            else:
                log.warning("cannot read the queue depth: %s", exc)
            return False


def not_served_report(slug: str, reason: str) -> VerdictReport:
    """The report of a submission whose problem is refused when it is graded
    (`ProblemUnavailable`: `reason`): no verdict, and one failed check that tells the student it
    was not graded and does not count (course rules and hints count verdicts only)."""
    message = f"this problem is not being served right now: {reason}; your submission was not graded and does not count"
    return VerdictReport(problem=slug, checks=[CheckResult(name="problem", passed=False, message=message)])


def policy_fingerprint(report: VerdictReport) -> str | None:
    """The stored fingerprint of a verdict's policy (`graders.insight`), or None: an
    INTERNAL_ERROR is the judge's fault, not a policy, and a report that cannot be read is
    never a reason to lose its verdict."""
    if report.verdict is None or report.verdict == Verdict.INTERNAL_ERROR:
        return None
    try:
        found = fingerprint(report.model_dump(mode="json"))
    except Exception:
        log.exception("fingerprinting the policy of %s failed", report.id)
        return None
    return found.key if found is not None else None
