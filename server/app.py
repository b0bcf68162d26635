"""The FastAPI application: REST API v1 under /api/v1, OpenAPI docs at /docs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request, status
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.gzip import GZipMiddleware

from server.api import health, problem_routes, submissions
from server.courses import board_pages, course_pages  # courses, gradebooks, regrades, boards
from server.lti import deep_linking_pages as lti_deep_linking
from server.lti import login as lti_login
from server.lti import roster_pages as lti_roster  # NRPS roster sync
from server.lti.routes import router as lti_router  # LTI 1.3 tool
from server.lti.setup import router as lti_setup_router  # LTI set-up, one-URL registration
from server.platform import metrics
from server.platform.http_guards import BodySizeLimit, UnstorableTextGuard
from server.problems.packages import MAX_ARCHIVE_BYTES
from server.runtime import build_services, open_database, start_warmup
from server.settings import Settings, get_settings
from server.store import faults as dbfaults
from server.store.faults import DATABASE, is_database_fault
from server.web import account_pages, instructor_pages, student_pages, upload_pages
from server.web.cookies import SchemeAwareSessions
from server.web.markdown import pygments_css
from server.web.rendering import WEB_DIR, error_page

log = logging.getLogger(__name__)


def _validation_message(exc: RequestValidationError) -> tuple[int, str]:
    errors = exc.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        first = next(e for e in errors if e.get("type") == "json_invalid")
        return status.HTTP_400_BAD_REQUEST, f"malformed JSON: {first.get('ctx', {}).get('error', first.get('msg'))}"
    parts = []
    for e in errors[:5]:
        where = ".".join(str(p) for p in e.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {e.get('msg')}")
    return status.HTTP_422_UNPROCESSABLE_CONTENT, "; ".join(parts)


def _offline_docs(app: FastAPI) -> None:
    """`/docs` (Swagger UI) from assets shipped in the swagger-ui-bundle package, served here:
    the page works without internet access (FastAPI's default loads them from a CDN)."""
    # imported on the first /docs request: the Swagger UI bundle stays out of start-up
    import swagger_ui_bundle
    from fastapi.openapi.docs import get_swagger_ui_html

    app.mount("/docs-assets", StaticFiles(directory=swagger_ui_bundle.swagger_ui_path), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> Response:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="remat-judge API",
            swagger_js_url="/docs-assets/swagger-ui-bundle.js",
            swagger_css_url="/docs-assets/swagger-ui.css",
            swagger_favicon_url="/docs-assets/favicon-32x32.png",
        )


def create_app(settings: Settings | None = None) -> FastAPI:
    """Builds the app. Its lifespan:

    - embedded mode (no Redis URL): applies the database migrations, then starts the grading
      threads, which enqueue every submission a previous run left unfinished, and the warm-up of
      the published versions' expectations (`server.runtime.start_warmup`: in the background);
    - distributed mode (`REMAT_JUDGE_REDIS_URL`): refuses to start on a database that is not
      migrated to the latest revision (`remat-judge db upgrade`), and only stores and enqueues:
      `remat-judge worker` processes grade.

    Raises (at start-up):
        RuntimeError: distributed mode on a database behind the code's schema.
    """
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # PostgreSQL down or restarting: wait (said once); then migrate (embedded) or check the schema
        engine = await asyncio.to_thread(open_database, settings)
        services = app.state.services = build_services(settings, engine)
        hub, pool, redis_jobs = services.hub, services.pool, services.redis_jobs
        hub.start(settings.redis_url)
        if pool is not None:
            pool.start()
        warmup = app.state.warmup = start_warmup(settings, services.problems) if pool is not None else None
        log.info(
            "remat-judge: %s, problems from %s, data in %s",
            "distributed mode (workers grade)" if settings.scaled else f"{settings.workers} grading threads",
            settings.problems_dir,
            settings.data_dir.resolve(),
        )
        try:
            yield
        finally:
            if warmup is not None:
                warmup.stop()
            await hub.stop()
            if pool is not None:
                pool.stop()
            if redis_jobs is not None:
                redis_jobs.close()
            engine.dispose()

    app = FastAPI(
        title="remat-judge",
        version="1",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        description="An online judge for JAX gradient-checkpointing (rematerialization) exercises. "
        "Submitting and reading submissions needs an API client's key: "
        "`Authorization: Bearer <api key>` (`remat-judge clients create NAME`). "
        "Reading problems is public.",
    )
    _offline_docs(app)

    _handle_errors(app)
    _add_middleware(app, settings)
    _add_routes(app)
    return app


def _handle_errors(app: FastAPI) -> None:
    """HTML error pages for browsers and JSON for the API; a database that is away is a 503 with
    Retry-After on every route; validation errors say which field and why."""

    @app.exception_handler(StarletteHTTPException)
    async def on_http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if request.url.path.startswith("/api/") or "text/html" not in request.headers.get("accept", ""):
            return await http_exception_handler(request, exc)
        return error_page(request, exc)

    async def on_database_fault(request: Request, exc: Exception) -> Response:
        """A database that is unreachable or restarting is nobody's fault in the request: 503 with
        Retry-After on every route (`server.store.faults`), counted, logged once per outage."""
        if not is_database_fault(exc):
            raise exc
        DATABASE.failed(exc, where=f"{request.method} {request.url.path}")
        metrics.DATABASE_UNAVAILABLE.labels(where="http").inc()
        headers = {"Retry-After": str(dbfaults.RETRY_AFTER_S), "Cache-Control": "no-store"}
        if request.url.path.startswith("/api/") or "text/html" not in request.headers.get("accept", ""):
            return JSONResponse(status_code=503, content={"detail": dbfaults.MESSAGE}, headers=headers)
        return HTMLResponse(status_code=503, headers=headers, content=dbfaults.PAGE)

    for fault in dbfaults.FAULT_TYPES:
        app.add_exception_handler(fault, on_database_fault)

    @app.exception_handler(RequestValidationError)
    async def on_validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        code, message = _validation_message(exc)
        return JSONResponse(status_code=code, content={"detail": message})


def _add_middleware(app: FastAPI, settings: Settings) -> None:
    """Body caps and unstorable-text guards before any route runs, the session cookie that is
    secure by the URL, and gzip."""
    app.add_middleware(UnstorableTextGuard)  # inside BodySizeLimit: it reads bodies already capped
    # JSON escapes can make a 64 KiB source up to 6 times longer on the wire.
    app.add_middleware(
        BodySizeLimit,
        max_body_bytes=6 * settings.max_source_bytes + 64 * 1024,
        per_path={"/api/v1/problems": MAX_ARCHIVE_BYTES, "/instructor/problems/upload": MAX_ARCHIVE_BYTES + 64 * 1024},
    )
    # inside an LMS's iframe the session is a third-party cookie: only SameSite=None (which browsers
    # accept only with Secure) comes back; secure by the URL (server/web/cookies.py); every form checks a CSRF token
    app.add_middleware(
        SchemeAwareSessions,
        secret_key=settings.session_key(),
        session_cookie="remat_session",
        max_age=settings.session_max_age_s,
        public_url=settings.public_url or None,
        forced=settings.cookie_secure,
    )
    app.add_middleware(GZipMiddleware, minimum_size=1024)


def _add_routes(app: FastAPI) -> None:
    """Static files, the favicon and Pygments' stylesheet, then every router (the admin's upload
    page before `/instructor/problems/{slug}`)."""
    app.mount("/static", StaticFiles(directory=str(WEB_DIR / "static")), name="static")

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        """Browsers ask for /favicon.ico whatever the page links: the SVG icon, so no 404s in logs."""
        return Response(
            (WEB_DIR / "static" / "favicon.svg").read_bytes(),
            media_type="image/svg+xml",
            headers={"Cache-Control": "public, max-age=86400"},
        )

    @app.get("/assets/pygments.css", include_in_schema=False)
    def pygments_stylesheet() -> Response:
        return Response(pygments_css(), media_type="text/css", headers={"Cache-Control": "public, max-age=86400"})

    app.include_router(upload_pages.router)  # the admin's upload page (before /instructor/problems/{slug})
    app.include_router(student_pages.router)
    app.include_router(account_pages.router)
    app.include_router(instructor_pages.router)
    app.include_router(lti_login.router)  # LTI 1.3 tool: OIDC login, launch, deep linking
    app.include_router(lti_router)
    app.include_router(lti_deep_linking.router)
    app.include_router(lti_setup_router)  # LTI set-up, one-URL registration
    app.include_router(lti_roster.router)  # a course's roster from its LMS
    app.include_router(course_pages.router)  # courses, gradebooks, regrades
    app.include_router(board_pages.router)  # class boards of a problem
    app.include_router(problem_routes.router, prefix="/api/v1")
    app.include_router(submissions.router, prefix="/api/v1")
    app.include_router(health.router, prefix="/api/v1")
    app.include_router(health.router)


def app_from_environment() -> FastAPI:
    """The app with settings from the environment (uvicorn's factory for `serve --processes N`)."""
    return create_app(get_settings())
