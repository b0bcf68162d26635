"""Typed dependencies of the API routes: the services an app was started with."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from fastapi import Request
from sqlalchemy.engine import Engine

from graders.problem import ProblemRepository
from server.admission import Admission
from server.db import ClientStore, SubmissionStore, UserStore
from server.queue import JobQueue, WorkerPool
from server.redisqueue import RedisJobs
from server.settings import Settings
from server.waits import CompletionHub

if TYPE_CHECKING:
    from server.authz import Access


@dataclass
class Services:
    """Everything a running app holds.

    Attributes:
        jobs: where new submissions' jobs go (in process, or Redis).
        redis_jobs: the Redis queue when scaled out, else None.
        pool: the grading threads of the embedded mode; None when scaled out (workers grade).
        hub: waits for verdicts without holding threads.
        engine: the database (courses, regrades and other stores made per request).
    """

    settings: Settings
    store: SubmissionStore
    users: UserStore
    problems: ProblemRepository
    jobs: JobQueue
    hub: CompletionHub
    admission: Admission
    clients: ClientStore | None = None
    pool: WorkerPool | None = None
    redis_jobs: RedisJobs | None = None
    engine: Engine | None = None

    @cached_property
    def access(self) -> "Access":
        """Who may do what (`server.authz.Access`) on this database."""
        from server.authz import Access

        assert self.engine is not None, "authorization needs the database"
        return Access(self.engine)


def get_services(request: Request) -> Services:
    """FastAPI dependency: the app's services (set up in its lifespan)."""
    return request.app.state.services


def client_key(request: Request) -> str:
    """Who is calling, for rate limiting: the client's IP address (`ip:<address>`)."""
    host = request.client.host if request.client else "unknown"
    return f"ip:{host}"
