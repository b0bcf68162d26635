"""Typed dependencies of the API routes: the services an app was started with."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from graders.problem import ProblemRepository
from server.db import SubmissionStore, UserStore
from server.queue import Completions, JobQueue, WorkerPool
from server.settings import Settings


@dataclass
class Services:
    """Everything a running app holds: settings, stores, problems, queue, workers."""

    settings: Settings
    store: SubmissionStore
    users: UserStore
    problems: ProblemRepository
    jobs: JobQueue
    completions: Completions
    pool: WorkerPool


def get_services(request: Request) -> Services:
    """FastAPI dependency: the app's services (set up in its lifespan)."""
    return request.app.state.services
