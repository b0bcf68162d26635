"""`/api/v1/problems`: the problem list and one problem's public view."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, status

from graders.problem import ArrayArg, ListArg, Problem, ProblemError
from server.api.deps import Services, get_services
from server.schemas import ArgumentPublic, CasePublic, ProblemDetail, ProblemSummary

router = APIRouter(prefix="/problems", tags=["problems"])
ServicesDep = Annotated[Services, Depends(get_services)]


def summary(problem: Problem) -> ProblemSummary:
    spec = problem.spec
    return ProblemSummary(slug=spec.slug, title=spec.title, difficulty=spec.difficulty, tags=list(spec.tags),
                          version=problem.version)


def load_or_404(services: Services, slug: str) -> Problem:
    """The problem `slug`, or HTTP 404 naming it."""
    try:
        return services.problems.get(slug)
    except KeyError:
        raise HTTPException(status.HTTP_404_NOT_FOUND,
                            f"no problem {slug!r}; GET /api/v1/problems lists them") from None
    except ProblemError as exc:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, f"problem {slug!r} is misconfigured: {exc}") from None


@router.get("", response_model=list[ProblemSummary])
def list_problems(services: ServicesDep) -> list[ProblemSummary]:
    """Every problem: slug, title, difficulty, tags, version."""
    return [summary(p) for p in services.problems.all()]


@router.get("/{slug}", response_model=ProblemDetail, responses={404: {"description": "unknown problem"}})
def get_problem(slug: str, services: ServicesDep) -> ProblemDetail:
    """One problem: statement, starter code and signature. Never the reference solution."""
    problem = load_or_404(services, slug)
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
        **summary(problem).model_dump(), entry_point=spec.entry_point,
        signature=f"{spec.entry_point}({', '.join(a.name for a in spec.args)})", arguments=arguments,
        cases=[CasePublic(name=c.name, dims=dict(c.dims), static=dict(c.static)) for c in spec.cases],
        memory_rule=spec.memory.rule, statement=problem.statement, starter=problem.starter)
