"""`/api/v1/healthz`: is the judge up, and how busy is it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from server.api.deps import Services, get_services
from server.schemas import Health

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
def healthz(services: Annotated[Services, Depends(get_services)]) -> Health:
    """Liveness plus queue depth and submission counts by status."""
    from importlib.metadata import version

    return Health(status="ok", jax_version=version("jax"), workers=services.pool.workers,
                  queue_depth=services.jobs.depth(), submissions=services.store.count_by_status(),
                  problems=len(services.problems.slugs()))
