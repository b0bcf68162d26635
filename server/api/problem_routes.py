"""`/api/v1/problems`: the problem list and one problem's public view."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import APIRouter, Depends, Header, HTTPException, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from graders.problems.problem import Problem
from graders.problems.spec import ArrayArg, ArraySpec, ListArg, ProblemError, TreeArg, TreeNode
from server.authz import ADMIN_TOKEN, ANONYMOUS, Action, Principal, decide
from server.deps import ServicesDep
from server.problems import uploads
from server.services import Services
from server.store.submissions import SUBMISSION_ID
from server.submissions.schemas import ArgumentPublic, CasePublic, ProblemDetail, ProblemSummary

router = APIRouter(prefix="/problems", tags=["problems"])


def summary(problem: Problem, *, published: bool) -> ProblemSummary:
    spec = problem.spec
    return ProblemSummary(
        slug=spec.slug,
        title=spec.title,
        difficulty=spec.difficulty,
        tags=list(spec.tags),
        version=problem.version,
        published=published,
    )


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


def _tree_public(node: TreeNode, path: str) -> ArgumentPublic:
    """A pytree argument's node as the API shows it: dicts by key, lists in order, array leaves
    named by their key path (`params['Dense_0']['kernel']`)."""
    if isinstance(node, dict):
        return ArgumentPublic(
            name=path, kind="dict", entries={k: _tree_public(node[k], f"{path}[{k!r}]") for k in sorted(node)}
        )
    if isinstance(node, list):
        return ArgumentPublic(
            name=path, kind="list", items=[_tree_public(n, f"{path}[{i}]") for i, n in enumerate(node)]
        )
    leaf: ArraySpec = node
    return ArgumentPublic(name=path, kind="array", shape=list(leaf.shape), dtype=leaf.dtype)


@router.get("", response_model=list[ProblemSummary])
def list_problems(services: ServicesDep, authorization: AuthorizationHeader = None) -> list[ProblemSummary]:
    """Every published problem: slug, title, difficulty, tags, version (with the admin token,
    the unpublished ones too)."""
    repo = services.problems
    return [
        summary(p, published=repo.is_published(p.slug))
        for p in repo.all(published_only=not sees_unpublished(services, authorization))
    ]


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
            arguments.append(
                ArgumentPublic(
                    name=a.name,
                    kind="list",
                    items=[
                        ArgumentPublic(name=f"{a.name}[{i}]", kind="array", shape=list(it.shape), dtype=it.dtype)
                        for i, it in enumerate(a.items)
                    ],
                )
            )
        elif isinstance(a, TreeArg):
            arguments.append(_tree_public(a.tree, a.name))
        else:
            arguments.append(ArgumentPublic(name=a.name, kind="static"))
    return ProblemDetail(
        **summary(problem, published=services.problems.is_published(slug)).model_dump(),
        entry_point=spec.entry_point,
        signature=f"{spec.entry_point}({', '.join(a.name for a in spec.args)})",
        arguments=arguments,
        cases=[CasePublic(name=c.name, dims=dict(c.dims), static=dict(c.static)) for c in spec.cases],
        memory_rule=spec.memory.rule,
        budgets=dict(spec.memory.budgets),
        statement=problem.statement,
        starter=problem.starter,
    )


def require_instructor(
    services: ServicesDep,
    authorization: Annotated[str | None, Header(description="Bearer <admin token>")] = None,
) -> None:
    """Dependency: the request carries the admin token (401), and uploads are enabled (403)."""
    expected = services.settings.instructor_token
    if not expected:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, "problem uploads are disabled: the server has no REMAT_JUDGE_INSTRUCTOR_TOKEN"
        )
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not secrets.compare_digest(token.encode(), expected.encode()):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "the admin token (REMAT_JUDGE_INSTRUCTOR_TOKEN) is required: Authorization: Bearer <token>",
            headers={"WWW-Authenticate": "Bearer"},
        )


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    dependencies=[Depends(require_instructor)],
    responses={
        202: {
            "description": "the archive passed the quick checks; poll `status_url` for the "
            "validation through the sandbox"
        },
        400: {
            "description": "not a valid package archive, or an invalid package (every "
            "problem.toml and `# expect:` error at once)"
        },
        401: {"description": "missing or wrong admin token"},
        403: {"description": "uploads disabled"},
        422: {"description": "publish=true and a TODO is left"},
    },
    openapi_extra={
        "requestBody": {
            "content": {"application/gzip": {"schema": {"type": "string", "format": "binary"}}},
            "required": True,
        }
    },
)
async def upload_problem(request: Request, services: ServicesDep, publish: bool = False) -> JSONResponse:
    """Uploads a problem package (a tar.gz of its folder; `remat-judge problems add --server` makes
    one). What can be said at once is answered at once (400/422: an unsafe archive, every
    problem.toml and `# expect:` error, a TODO with publish=true); then 202 with a `status_url`
    (also the Location header) to poll while it is validated through the real sandbox: first the
    reference's self-checks, then every file; when it passes it is installed, a new version served
    at once without a restart.

    A new problem arrives unpublished (admins only) unless `?publish=true`; a package that replaces
    a published problem leaves students on the published version until it is published."""
    data = await request.body()
    try:
        upload_id = await run_in_threadpool(uploads.start, services, data, publish=publish, requested_by="admin token")
    except uploads.UploadRefused as refused:
        return JSONResponse(status_code=refused.status_code, content={"detail": refused.message})
    url = f"/api/v1/problems/uploads/{upload_id}"
    view = services.uploads.get(upload_id)
    assert view is not None
    return JSONResponse(status_code=status.HTTP_202_ACCEPTED, headers={"Location": url}, content=view.public())


@router.get(
    "/uploads/{upload_id}",
    dependencies=[Depends(require_instructor)],
    responses={404: {"description": "no such upload"}},
)
def upload_status(upload_id: str, services: ServicesDep) -> JSONResponse:
    """An upload's state (`validating`, `done`, `failed`), progress (files graded of the package's
    reference, right/ and wrong/), and once finished its report: the reference's failed
    self-checks (`reference_failures`, each `{check, message}`), the validation table (`rows`),
    `warnings`, whether it was `published`, and the version it replaces."""

    view = services.uploads.get(upload_id) if SUBMISSION_ID.match(upload_id) else None
    if view is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such upload")
    return JSONResponse(view.public())
