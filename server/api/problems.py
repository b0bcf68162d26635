"""`/api/v1/problems`: the problem list and one problem's public view."""

from __future__ import annotations

import secrets
import threading
from typing import Annotated

from fastapi import APIRouter, Depends, Header, HTTPException, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from graders.problem import ArrayArg, ListArg, Problem, ProblemError
from graders.publication import published_version, todos
from graders.validate import validate_problem
from server.api.deps import Services, get_services
from server.authz import ADMIN_TOKEN, ANONYMOUS, Action, Principal, decide
from server.packages import PackageError, install, staged_package
from server.schemas import (ArgumentPublic, CasePublic, ProblemDetail, ProblemPublished, ProblemSummary,
                            ValidationRowPublic)

router = APIRouter(prefix="/problems", tags=["problems"])
ServicesDep = Annotated[Services, Depends(get_services)]


def summary(problem: Problem, *, published: bool) -> ProblemSummary:
    spec = problem.spec
    return ProblemSummary(slug=spec.slug, title=spec.title, difficulty=spec.difficulty, tags=list(spec.tags),
                          version=problem.version, published=published)


def token_principal(services: Services, authorization: str | None) -> Principal:
    """`ADMIN_TOKEN` when the request carries the deployment's admin token
    (`REMAT_JUDGE_INSTRUCTOR_TOKEN`), else `ANONYMOUS` (reading problems needs no key)."""
    expected = services.settings.instructor_token
    scheme, _, token = (authorization or "").partition(" ")
    if not expected or scheme.lower() != "bearer":
        return ANONYMOUS
    return ADMIN_TOKEN if secrets.compare_digest(token.encode(), expected.encode()) else ANONYMOUS


def sees_unpublished(services: Services, authorization: str | None) -> bool:
    """Whether the caller may see unpublished problems (`problems.manage`: the admin token)."""
    return decide(token_principal(services, authorization), Action.PROBLEMS_MANAGE)


AuthorizationHeader = Annotated[str | None, Header(description="Bearer <admin token>: unpublished problems too")]


def load_or_404(services: Services, slug: str, *, unpublished_too: bool = False) -> Problem:
    """The problem `slug`, or HTTP 404 (also when it is unpublished and the caller may not see
    unpublished problems)."""
    try:
        if not unpublished_too and not services.problems.is_published(slug):
            raise KeyError(slug)
        return services.problems.get(slug)
    except KeyError:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such problem; GET /api/v1/problems lists them") from None
    except ProblemError as exc:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, f"problem {slug!r} is misconfigured: {exc}") from None


@router.get("", response_model=list[ProblemSummary])
def list_problems(services: ServicesDep, authorization: AuthorizationHeader = None) -> list[ProblemSummary]:
    """Every published problem: slug, title, difficulty, tags, version (with the admin token,
    the unpublished ones too)."""
    repo = services.problems
    return [summary(p, published=repo.is_published(p.slug))
            for p in repo.all(published_only=not sees_unpublished(services, authorization))]


@router.get("/{slug}", response_model=ProblemDetail, responses={404: {"description": "unknown problem"}})
def get_problem(slug: str, services: ServicesDep, authorization: AuthorizationHeader = None) -> ProblemDetail:
    """One published problem (any, with the admin token): statement, starter code and
    signature. Never the reference solution."""
    problem = load_or_404(services, slug, unpublished_too=sees_unpublished(services, authorization))
    spec = problem.spec
    arguments = []
    for a in spec.args:
        if isinstance(a, ArrayArg):
            arguments.append(ArgumentPublic(name=a.name, kind="array", shape=list(a.shape), dtype=a.dtype))
        elif isinstance(a, ListArg):
            arguments.append(ArgumentPublic(name=a.name, kind="list", items=[
                ArgumentPublic(name=f"{a.name}[{i}]", kind="array", shape=list(it.shape), dtype=it.dtype)
                for i, it in enumerate(a.items)]))
        else:
            arguments.append(ArgumentPublic(name=a.name, kind="static"))
    return ProblemDetail(
        **summary(problem, published=services.problems.is_published(slug)).model_dump(), entry_point=spec.entry_point,
        signature=f"{spec.entry_point}({', '.join(a.name for a in spec.args)})", arguments=arguments,
        cases=[CasePublic(name=c.name, dims=dict(c.dims), static=dict(c.static)) for c in spec.cases],
        memory_rule=spec.memory.rule, statement=problem.statement, starter=problem.starter)


_publish_lock = threading.Lock()


def require_instructor(services: ServicesDep,
                       authorization: Annotated[str | None, Header(description="Bearer <admin token>")] = None,
                       ) -> None:
    """Dependency: the request carries the admin token (401), and uploads are enabled (403)."""
    expected = services.settings.instructor_token
    if not expected:
        raise HTTPException(status.HTTP_403_FORBIDDEN,
                            "problem uploads are disabled: the server has no REMAT_JUDGE_INSTRUCTOR_TOKEN")
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not secrets.compare_digest(token.encode(), expected.encode()):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "the admin token (REMAT_JUDGE_INSTRUCTOR_TOKEN) is required: "
                            "Authorization: Bearer <token>", headers={"WWW-Authenticate": "Bearer"})


def _validate_and_install(services: Services, data: bytes, *, publish: bool) -> tuple[int, dict]:
    try:
        with staged_package(data, services.settings.problems_dir) as problem:
            if publish and (left := todos(problem.root)):
                return status.HTTP_422_UNPROCESSABLE_CONTENT, {
                    "detail": f"publish=true, but {len(left)} TODO{'s' if len(left) > 1 else ''} left (write each "
                              f"part, or upload without publish=true): " + "; ".join(left[:20]),
                    "rows": []}
            report = validate_problem(problem, services.settings.judge_config())
            rows = [ValidationRowPublic(file=r.file, expected=r.expected.value, got=r.got.value if r.got else None,
                                        ok=r.ok, note=r.note, seconds=round(r.seconds, 2),
                                        residual_bytes=r.residual_bytes, bwd_peak_bytes=r.bwd_peak_bytes,
                                        recompute_flops=r.recompute_flops)
                    for r in report.rows]
            if report.reference_failures:
                return status.HTTP_422_UNPROCESSABLE_CONTENT, {
                    "detail": "the reference failed its self-checks; no file was graded:\n"
                              + "\n".join(report.reference_lines()),
                    "reference_failures": [{"check": c, "message": m} for c, m in report.reference_failures],
                    "rows": []}
            if not report.ok:
                return status.HTTP_422_UNPROCESSABLE_CONTENT, {
                    "detail": report.error or "the package does not validate: the reference must be ACCEPTED and "
                                              "every wrong/ file must get its verdict",
                    "rows": [r.model_dump() for r in rows]}
            with _publish_lock:
                try:
                    previous = services.problems.get(problem.slug).version
                except (KeyError, ProblemError):
                    previous = None
                target = install(problem.root, services.settings.problems_dir,
                                 services.settings.data_dir / "problem-history",
                                 publish_version=problem.version if publish else None)
                published = published_version(target) is not None
    except PackageError as exc:
        return status.HTTP_400_BAD_REQUEST, {"detail": f"bad package archive: {exc}"}
    except ProblemError as exc:
        return status.HTTP_400_BAD_REQUEST, {"detail": f"invalid package: {exc}"}
    body = ProblemPublished(slug=problem.slug, version=problem.version, previous_version=previous, rows=rows,
                            published=published)
    return status.HTTP_201_CREATED, body.model_dump()


@router.post("", status_code=status.HTTP_201_CREATED, response_model=ProblemPublished,
             dependencies=[Depends(require_instructor)],
             responses={400: {"description": "not a valid package archive"},
                        401: {"description": "missing or wrong admin token"},
                        403: {"description": "uploads disabled"},
                        422: {"description": "the package does not validate through the sandbox, or "
                                             "publish=true and a TODO is left"}},
             openapi_extra={"requestBody": {"content": {"application/gzip": {"schema": {"type": "string",
                                                                                        "format": "binary"}}},
                                            "required": True}})
async def upload_problem(request: Request, services: ServicesDep, publish: bool = False) -> JSONResponse:
    """Uploads a problem package (a tar.gz of its folder; `remat-judge problems add --server` makes
    one). It is validated through the real sandbox before it is installed; a changed package becomes
    a new version, served at once without a restart.

    A new problem arrives unpublished (instructors only) unless `?publish=true`, which also refuses
    (422) a package with a TODO left; a package that replaces a published problem stays published
    (`remat-judge problems list` flags it until it is published again)."""
    data = await request.body()
    code, body = await run_in_threadpool(_validate_and_install, services, data, publish=publish)
    return JSONResponse(status_code=code, content=body)
