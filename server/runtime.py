"""The composition root: the one place where a process's parts are built from its settings.

The web app (`server.app.create_app`'s lifespan) and a grading worker (`server.worker.run`) build
through here, so the database, the queue, the grader and its senders are wired once
(docs/ARCHITECTURE.md, "The server's floors"). Routes never build anything: they get what they
need through the dependencies of `server.deps`, which a test overrides. The CLI's other commands
open an existing database with `server.cli.common.engine_for`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from sqlalchemy.engine import Engine

from graders.pipeline import prestart
from graders.problems.problem import ProblemRepository
from server.grading.grader import Grader, new_worker_id
from server.grading.queue import InProcessQueue, JobQueue, WorkerPool
from server.grading.redis_jobs import RedisJobs
from server.grading.waits import CompletionHub
from server.grading.warm_expectations import ExpectationWarmup
from server.lti.grade_sender import grade_sender
from server.lti.service import LtiService
from server.services import Services
from server.settings import Settings
from server.store import faults as dbfaults
from server.store import migrate
from server.store.accounts import ClientStore, SessionStore, UserStore
from server.store.course_store import CourseStore
from server.store.db import make_engine
from server.store.hints import HintStore
from server.store.lti_passback import LtiCourseGrades, PassbackStore
from server.store.lti_store import LtiStore, RegistrationStore
from server.store.problems import UploadStore
from server.store.regrades import RegradeStore
from server.store.submissions import SubmissionStore
from server.submissions.admission import Admission
from server.submissions.callback_sender import CallbackSender


def require_migrated(url: str) -> None:
    """Raises RuntimeError unless the database at `url` is at the code's latest migration (the
    scaled-out API and every worker refuse to start on an older schema)."""
    current, head = migrate.current(url), migrate.head()
    if current != head:
        raise RuntimeError(
            f"the database is at migration {current or 'none'}, the code needs {head}: run "
            f"`remat-judge db upgrade` first"
        )


def open_database(settings: Settings, *, stop: threading.Event | None = None) -> Engine:
    """Waits for the database (said once while it is away), brings its schema to the code's (the
    embedded mode migrates; scaled out it must be migrated already) and returns its engine.

    Raises:
        InterruptedError: `stop` was set while waiting.
        RuntimeError: scaled out on a database behind the code's schema.
    """
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    url = settings.resolved_database_url
    dbfaults.wait_for_database(url, stop=stop)
    if settings.scaled:
        require_migrated(url)
    else:
        migrate.upgrade(url)
    return make_engine(url)


def build_grader(
    settings: Settings,
    engine: Engine,
    store: SubmissionStore,
    problems: ProblemRepository,
    *,
    kind: str,
    on_finished: Callable[[str], None],
) -> Grader:
    """The grader of one process (embedded app or worker), with its callback and LMS grade
    senders; `kind` names its worker id (`embedded`, `worker`)."""
    config = settings.judge_config()
    callbacks = CallbackSender(
        store,
        ClientStore(engine),
        max_attempts=settings.callback_max_attempts,
        timeout_s=settings.callback_timeout_s,
    )
    return Grader(
        store=store,
        problems=problems,
        config_factory=lambda: config,
        worker_id=new_worker_id(kind),
        lease_s=settings.lease_s,
        max_attempts=settings.max_attempts,
        on_finished=on_finished,
        callbacks=callbacks,
        grades=grade_sender(settings, PassbackStore(engine), CourseStore(engine)),
    )


def start_warmup(settings: Settings, problems: ProblemRepository) -> ExpectationWarmup | None:
    """Starts building, in the background, the expectations of every published problem version
    not yet cached (`server.grading.warm_expectations`), with the judge configuration grading uses;
    returns at once. None when `settings.warm_expectations` is off. The caller stops it."""
    if not settings.warm_expectations:
        return None
    warmup = ExpectationWarmup(problems, settings.judge_config(), templates=prestart)
    warmup.start()
    return warmup


def build_lti(settings: Settings, engine: Engine, courses: CourseStore | None = None) -> LtiService:
    """The LTI tool's service on an open database (its stores, the tool's key: made at the first
    start), sharing `courses` when given."""
    return LtiService.start(
        settings,
        store=LtiStore(engine),
        passbacks=PassbackStore(engine),
        courses=courses or CourseStore(engine),
        registrations=RegistrationStore(engine),
    )


def build_services(settings: Settings, engine: Engine) -> Services:
    """The web app's parts on an open database: stores, problems, the waits hub, admission, the
    LTI service, and the queue (Redis when scaled out; else an in-process queue with the grading
    threads, not yet started). The caller starts `hub` and `pool` and closes them."""
    store = SubmissionStore(engine)  # every submission store on one engine, one object
    problems = ProblemRepository(settings.problems_dir)
    hub = CompletionHub(store.finished_among, poll_s=1.0 if settings.scaled else 2.0)
    admission = Admission(
        rate_limit=settings.rate_limit,
        storage_uri=settings.redis_url or "memory://",
        max_queue_depth=settings.max_queue_depth,
        queue_depth=store.queue_depth,
    )
    pool: WorkerPool | None = None
    redis_jobs: RedisJobs | None = None
    jobs: JobQueue
    if settings.scaled:
        assert settings.redis_url is not None
        redis_jobs = RedisJobs(settings.redis_url, heartbeat_timeout_s=settings.heartbeat_timeout_s)
        jobs = redis_jobs
    else:
        in_process = InProcessQueue()
        grader = build_grader(settings, engine, store, problems, kind="embedded", on_finished=hub.notify_threadsafe)
        pool = WorkerPool(
            jobs=in_process,
            store=store,
            grader=grader,
            workers=settings.workers,
            sweep_interval_s=settings.sweep_interval_s,
        )
        jobs = in_process
    courses = CourseStore(engine)
    return Services(
        settings=settings,
        engine=engine,
        submissions=store,
        leases=store,
        outbox=store,
        reports=store,
        users=UserStore(engine),
        clients=ClientStore(engine),
        sessions=SessionStore(engine, max_age_s=settings.session_max_age_s),
        courses=courses,
        regrades=RegradeStore(engine),
        hints=HintStore(engine),
        uploads=UploadStore(engine),
        problems=problems,
        jobs=jobs,
        hub=hub,
        admission=admission,
        pool=pool,
        redis_jobs=redis_jobs,
        lti=build_lti(settings, engine, courses),
        lms_grades=LtiCourseGrades(PassbackStore(engine)),
    )
