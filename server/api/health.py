"""Liveness (`/healthz`), readiness (`/readyz`) and Prometheus metrics (`/metrics`)."""

from __future__ import annotations

import secrets
from importlib.metadata import version
from typing import Annotated

from fastapi import APIRouter, Header, HTTPException, Request, Response, status
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from server.deps import ServicesDep
from server.platform import metrics
from server.submissions.schemas import Health

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
async def healthz(services: ServicesDep) -> Health:
    """Liveness: the process answers (no database or Redis call, so it stays fast under load),
    with the grading threads of this process and the requests waiting for verdicts."""
    return Health(
        status="ok",
        jax_version=version("jax"),
        mode="distributed" if services.settings.scaled else "embedded",
        workers=services.pool.workers if services.pool is not None else 0,
        waiting_requests=services.hub.waiting,
        problems=len(services.problems.slugs()),
    )


@router.get(
    "/readyz",
    responses={503: {"description": "the database or Redis is unreachable, or expectations are still being built"}},
)
async def readyz(request: Request, services: ServicesDep) -> JSONResponse:
    """Readiness: 200 when the database answers (and Redis, when scaled out) and this process's
    start-up warm-up is done (`server.grading.warm_expectations`: the jail and verifier templates
    running and the served versions' expectations built; until then a first submission would wait
    for them, so a load balancer should send it elsewhere), with the queue depth and submission
    counts by status; else 503 naming what is not ready."""
    checks: dict[str, str] = {}
    warmup = getattr(request.app.state, "warmup", None)
    if warmup is not None:
        checks["expectations"] = "ok" if warmup.done.is_set() else f"warming: {warmup.progress()}"
    body: dict[str, object] = {}
    try:
        await run_in_threadpool(services.reports.ping)
        checks["database"] = "ok"
        body["queue_depth"] = await run_in_threadpool(services.reports.queue_depth)
        body["submissions"] = await run_in_threadpool(services.reports.count_by_status)
    except Exception as exc:  # noqa: BLE001 - any failure means "not ready"
        checks["database"] = f"unavailable: {type(exc).__name__}"
    if services.redis_jobs is not None:
        ok = await run_in_threadpool(services.redis_jobs.available)
        checks["redis"] = "ok" if ok else "unavailable"
    ready = all(v == "ok" for v in checks.values())
    return JSONResponse(
        {"status": "ready" if ready else "unavailable", "checks": checks, **body}, status_code=200 if ready else 503
    )


@router.get("/metrics", include_in_schema=False)
def prometheus_metrics(services: ServicesDep, authorization: Annotated[str | None, Header()] = None) -> Response:
    """Prometheus exposition format (see `server/platform/metrics.py` for the metrics), for a scraper that
    sends `Authorization: Bearer <REMAT_JUDGE_METRICS_TOKEN>` (401 otherwise). Without a token
    configured, 404: the metrics are then served only on `serve --metrics-port`."""
    expected = services.settings.metrics_token
    if not expected:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND,
            "metrics are not served on this port: set "
            "REMAT_JUDGE_METRICS_TOKEN, or run `remat-judge serve --metrics-port PORT`",
        )
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not secrets.compare_digest(token.encode(), expected.encode()):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "send Authorization: Bearer <metrics token>",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return Response(metrics.render(services.reports.queue_depth), media_type=metrics.CONTENT_TYPE)
