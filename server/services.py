"""The container of a running app's parts (`Services`), built by the composition root
(`server.runtime.build_services`) and handed to routes by `server.deps`. Low on purpose: it
names only types from its own floor and below, and those only for type checking, so an edge that
names `Services` pulls in none of the parts it does not use; LTI's service, from a floor above,
it holds as an `object` that `server.lti.service.get_lti` reads back (docs/ARCHITECTURE.md, "The
server's floors"). Every store a route uses is a field here, built once: routes never build one."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from server.settings import Settings
from server.store.lms_grades import LmsGrades, NoLms

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from graders.problems.problem import ProblemRepository
    from server.authz import Access
    from server.grading.queue import JobQueue, WorkerPool
    from server.grading.redis_jobs import RedisJobs
    from server.grading.waits import CompletionHub
    from server.platform.throttle import SignInThrottle
    from server.store.accounts import ClientStore, SessionStore, UserStore
    from server.store.course_store import CourseStore
    from server.store.hints import HintStore
    from server.store.problems import UploadStore
    from server.store.regrades import RegradeStore
    from server.store.submissions import CallbackOutbox, LeaseStore, SubmissionIntake, SubmissionReports
    from server.submissions.admission import Admission


@dataclass
class Services:
    """Everything a running app holds, built once by `build_services`.

    Attributes:
        settings: the deployment's settings.
        submissions: stores new submissions and reads them back (the web pages and the API).
        leases: workers' claims on submissions (the grading runtime's; routes read none).
        outbox: API clients' callbacks.
        reports: lists and counts of submissions (pages, health, the queue depth).
        users, clients, sessions: accounts, API clients and signed-in browsers.
        courses: courses, enrollments, rosters, assignments and extensions.
        regrades: regrades and the verdicts they replaced.
        hints: which hints students opened.
        uploads: uploaded problem packages and their validation.
        problems: the problem packages (read per request: a published version needs no restart).
        jobs: where new submissions' jobs go (in process, or Redis).
        hub: waits for verdicts without holding threads.
        admission: the submission rate limit and queue-depth bound.
        pool: the grading threads of the embedded mode; None when scaled out (workers grade).
        redis_jobs: the Redis queue when scaled out, else None.
        engine: the database (for the queries of `access` and `server.problems.clusters`).
        lti: the LTI tool's service (a `server.lti.service.LtiService`, held as an `object`: LTI
            stands above the container, and `server.lti.service.get_lti` reads it back); None in
            tests without LTI.
        lms_grades: the LMS side of courses' grades (`server.store.lms_grades.LmsGrades`): LTI's in a
            running judge, `NoLms` in a test that builds its own services.
    """

    settings: Settings
    engine: Engine
    submissions: SubmissionIntake
    leases: LeaseStore
    outbox: CallbackOutbox
    reports: SubmissionReports
    users: UserStore
    clients: ClientStore
    sessions: SessionStore
    courses: CourseStore
    regrades: RegradeStore
    hints: HintStore
    uploads: UploadStore
    problems: ProblemRepository
    jobs: JobQueue
    hub: CompletionHub
    admission: Admission
    pool: WorkerPool | None = None
    redis_jobs: RedisJobs | None = None
    lti: object | None = None
    lms_grades: LmsGrades = field(default_factory=NoLms)
    _throttle: SignInThrottle | None = field(default=None, init=False, repr=False)
    _throttle_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @cached_property
    def access(self) -> Access:
        """Who may do what (`server.authz.Access`) on this database."""
        # a part is imported when first used: an edge that names Services pulls in nothing else
        from server.authz import Access

        return Access(self.engine)

    @property
    def throttle(self) -> SignInThrottle:
        """Failed sign-ins per account and address (`server.platform.throttle`), from the settings (in
        Redis when scaled out). Made once, on first use, under a lock: the sign-in routes run in a
        thread pool, and two first sign-ins that each made a throttle would lose one's counts
        (`functools.cached_property` has no lock from Python 3.12 on)."""
        with self._throttle_lock:
            if self._throttle is None:
                # a part is imported when first used: an edge that names Services pulls in nothing else
                from server.platform.throttle import SignInThrottle

                self._throttle = SignInThrottle(
                    per_account=self.settings.signin_failures_per_account,
                    per_ip=self.settings.signin_failures_per_ip,
                    storage_uri=self.settings.redis_url or "memory://",
                )
            return self._throttle
