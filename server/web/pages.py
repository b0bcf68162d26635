"""The web judge's pages: problem list and pages, submitting, live verdicts, accounts, history,
solutions after a first ACCEPTED, and the instructor's views. Server-rendered (Jinja2); the
JavaScript bundle (web/) only enhances them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, HTTPException, Request, status
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from markupsafe import Markup

from graders.problem import Problem, ProblemError
from graders.verdict import VerdictReport
from server.deps import ServicesDep
from server.services import Services
from server.authz import ANONYMOUS, Access, Action, Principal, decide
from server.store.accounts import UserRecord
from server.store.submissions import SUBMISSION_ID, SubmissionRecord
from server.api.submissions import submit_error
from server.submit import SubmitError
from server.submit import submit as submit_service
from server.web.auth import (
    OptionalUser,
    PrincipalDep,
    check_csrf,
    check_password,
    client_ip,
    csrf_token,
    hash_password,
    session_store,
    sign_in,
    sign_out,
    signup_errors,
)
from server.web.markdown import highlight_python, render_markdown, split_section
from server.web.panel import FILTERS, panel_context
from server.web.sessions import token_hash

# One answer whether or not the email is taken (no account enumeration through sign-up beyond what
# creating an account must reveal: see SECURITY.md).
SIGNUP_REFUSED = (
    "No account was made with these details. If you already have one, sign in (an instructor "
    "can reset a forgotten password)."
)

HERE = WEB_DIR = Path(__file__).resolve().parent
templates = Jinja2Templates(directory=str(HERE / "templates"))


templates.env.filters.update(FILTERS)  # human_bytes, human_flops
templates.env.filters["markdown"] = lambda text: Markup(render_markdown(text))  # raw HTML disabled in it
router = APIRouter(include_in_schema=False)


def render(
    request: Request, name: str, user: UserRecord | None, status_code: int = 200, **context: Any
) -> HTMLResponse:
    """A page with the fields every template uses (user, their principal, CSRF token, whether the
    JS bundle exists). The principal is the one this request's dependencies looked up."""
    principal = request.scope.get("remat_principal", ANONYMOUS) if user is not None else ANONYMOUS
    return templates.TemplateResponse(
        request,
        name,
        {
            "user": user,
            "principal": principal,
            "csrf": csrf_token(request),
            "bundle": (HERE / "static" / "dist" / "app.js").exists(),
            **context,
        },
        status_code=status_code,
    )


def _problem(services: Services, slug: str, principal: Principal) -> Problem:
    """The problem `slug`; 404 when there is none, or it is unpublished and `principal` may not
    manage problems."""
    try:
        if not decide(principal, Action.PROBLEMS_MANAGE) and not services.problems.is_published(slug):
            raise KeyError(slug)
        return services.problems.get(slug)
    except (KeyError, ProblemError):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such problem") from None


def sign_in_redirect(request: Request) -> HTTPException:
    """A 303 to the sign-in page that comes back to this page (its path percent-encoded, so any
    path makes a valid Location header)."""
    return HTTPException(
        status.HTTP_303_SEE_OTHER, headers={"Location": "/signin?" + urlencode({"next": request.url.path})}
    )


def _require_user(user: UserRecord | None, request: Request) -> UserRecord:
    if user is None:
        raise sign_in_redirect(request)
    return user


def _visible_submission(services: Services, submission_id: str, principal: Principal) -> SubmissionRecord:
    """A submission `principal` may read (`submission.read`: its author, the staff of a course
    where it is an assignment of the author's, admins); 404 for anyone else, as for an unknown id."""
    record = services.store.get(submission_id) if SUBMISSION_ID.match(submission_id) else None
    if (
        record is None
        or principal.user_id is None
        and not principal.admin
        or not services.access.may_read(principal, record)
    ):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such submission")
    return record


def _report(record: SubmissionRecord) -> VerdictReport | None:
    return VerdictReport.model_validate_json(record.result_json) if record.result_json else None


# --- problems --------------------------------------------------------------------------------------


@router.get("/", response_class=HTMLResponse)
def problem_list(request: Request, services: ServicesDep, user: OptionalUser, principal: PrincipalDep) -> HTMLResponse:
    solved = services.store.solved(user.id) if user else set()
    problems = sorted(
        services.problems.all(published_only=not decide(principal, Action.PROBLEMS_MANAGE)), key=course_order
    )
    unpublished = {p.slug for p in problems if not services.problems.is_published(p.slug)}
    return render(
        request,
        "problems.html",
        user,
        problems=problems,
        solved=solved,
        unpublished=unpublished,
        solved_here=len(solved & {p.slug for p in problems}),
    )


def course_order(problem: Problem) -> tuple[int, int, str]:
    """Where a problem sits in the list: its `order` in problem.toml (lowest first; problems
    without one after those with one), then difficulty (easy, medium, hard), then title."""
    difficulty = {"easy": 0, "medium": 1, "hard": 2}[problem.spec.difficulty]
    return (problem.spec.order if problem.spec.order is not None else 100_001, difficulty, problem.spec.title)


@router.get("/problems/{slug}", response_class=HTMLResponse)
def problem_page(
    slug: str, request: Request, services: ServicesDep, user: OptionalUser, principal: PrincipalDep
) -> HTMLResponse:
    problem = _problem(services, slug, principal)
    mine = services.store.for_user(user.id, problem=slug, limit=20) if user else []
    solved = user is not None and (decide(principal, Action.PROBLEMS_MANAGE) or slug in services.store.solved(user.id))
    dues = []
    if user is not None:
        from server.courses.models import CourseStore

        dues = CourseStore(services.engine).due_dates_for(user.id, slug)
    hints = None
    if user is not None:
        from server.web.hints import hint_view

        hints = hint_view(
            services.engine, user_id=user.id, problem=slug, text=problem.read_text("hints.md") or "", everything=solved
        )
    task, rest = split_section(problem.statement, "The task")  # the task first, then the explanations
    return render(
        request,
        "problem.html",
        user,
        problem=problem,
        statement=render_markdown(rest),
        task=render_markdown(task) if task else "",
        starter=problem.starter,
        mine=mine,
        solved=solved,
        dues=dues,
        hints=hints,
        solution_open=solved or _past_deadline(dues),
        draft_key=f"remat-draft:{user.id if user else 'anon'}:{slug}",
    )


def _past_deadline(dues: list) -> bool:
    """Whether a deadline of the user's assignments of this problem (their extension, when they
    have one) has passed in a course that opens solutions after deadlines (an admin's choice:
    `Course.solutions_after_deadline`): the reference solution opens then, as after an ACCEPTED."""
    from server.store.db import utcnow

    now = utcnow()
    return any(
        course.solutions_after_deadline
        and (extension or assignment.due_at) is not None
        and (extension or assignment.due_at) <= now
        for course, assignment, extension in dues
    )


@router.post("/problems/{slug}/hints")
def next_hint(
    slug: str,
    request: Request,
    services: ServicesDep,
    user: OptionalUser,
    principal: PrincipalDep,
    number: Annotated[int, Form(ge=0, le=10_000)] = 0,
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    """Opens the next hint on request (recorded for instructors), then back to the problem's hints."""
    user = _require_user(user, request)
    check_csrf(request, csrf_token)
    problem = _problem(services, slug, principal)
    from server.web.hints import request_next

    request_next(
        services.engine, user_id=user.id, problem=slug, text=problem.read_text("hints.md") or "", number=number
    )
    return RedirectResponse(f"/problems/{slug}#hints", status_code=status.HTTP_303_SEE_OTHER)


@router.post("/problems/{slug}/submit")
def submit(
    slug: str,
    request: Request,
    services: ServicesDep,
    user: OptionalUser,
    principal: PrincipalDep,
    source: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    """Stores and queues a submission from the problem page. JSON for the page's script
    (`Accept: application/json`), else a redirect to the submission's page."""
    wants_json = "application/json" in request.headers.get("accept", "")
    if user is None:
        if wants_json:
            return JSONResponse({"detail": "sign in to submit"}, status_code=status.HTTP_401_UNAUTHORIZED)
        return RedirectResponse(
            "/signin?" + urlencode({"next": f"/problems/{slug}"}), status_code=status.HTTP_303_SEE_OTHER
        )
    check_csrf(request, csrf_token)
    problem = _problem(services, slug, principal)
    source = source.replace("\r\n", "\n")  # forms send textareas with CRLF line endings
    try:
        record = submit_service(
            services,
            problem=problem.slug,
            source=source,
            owner_key=f"user:{user.id}",
            user_id=user.id,
            unpublished_too=decide(principal, Action.PROBLEMS_MANAGE),
        )
    except SubmitError as exc:
        refused = submit_error(exc)  # the same status and words as the API's
        if wants_json:
            return JSONResponse({"detail": refused.detail}, status_code=refused.status_code, headers=refused.headers)
        raise refused from None
    if wants_json:
        return JSONResponse(
            {
                "id": record.id,
                "status": str(record.status),
                "status_url": f"/submissions/{record.id}/status",
                "panel_url": f"/submissions/{record.id}/panel",
                "page_url": f"/submissions/{record.id}",
            },
            status_code=status.HTTP_201_CREATED,
        )
    return RedirectResponse(f"/submissions/{record.id}", status_code=status.HTTP_303_SEE_OTHER)


@router.get("/problems/{slug}/solution", response_class=HTMLResponse)
def solution(
    slug: str, request: Request, services: ServicesDep, user: OptionalUser, principal: PrincipalDep
) -> HTMLResponse:
    """The reference solution: after the user's first ACCEPTED, or once the deadline of one of
    their assignments of the problem has passed in a course that opens solutions then (admins
    always; course staff like anyone else, since whoever can make an LMS course is staff of it).
    Hints are on the problem page."""
    user = _require_user(user, request)
    problem = _problem(services, slug, principal)
    if not decide(principal, Action.PROBLEMS_MANAGE) and slug not in services.store.solved(user.id):
        from server.courses.models import CourseStore

        dues = CourseStore(services.engine).due_dates_for(user.id, slug)
        if not _past_deadline(dues):
            return render(request, "locked.html", user, problem=problem, status_code=status.HTTP_403_FORBIDDEN)
    reference = without_module_docstring(problem.reference_path.read_text(encoding="utf-8"))
    return render(
        request, "solution.html", user, problem=problem, reference=render_markdown(f"````python\n{reference}\n````")
    )


def without_module_docstring(source: str) -> str:
    """`source` without its module docstring (a reference's note to instructors, such as "never
    served"), or unchanged when it has none or does not parse."""
    import ast

    try:
        body = ast.parse(source).body
    except SyntaxError:
        return source
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        lines = source.splitlines(keepends=True)
        return "".join(lines[body[0].end_lineno :]).lstrip("\n")
    return source


# --- submissions -----------------------------------------------------------------------------------


@router.get("/submissions/{submission_id}", response_class=HTMLResponse)
def submission_page(
    submission_id: str, request: Request, services: ServicesDep, user: OptionalUser, principal: PrincipalDep
) -> HTMLResponse:
    user = _require_user(user, request)
    record = _visible_submission(services, submission_id, principal)
    report = _report(record)
    context = panel_context(report) if report else {}
    return render(
        request,
        "submission.html",
        user,
        record=record,
        pending=report is None,
        peers_fixed=_peers_fixed(services, record, user),
        **context,
    )


def _peers_fixed(services: Services, record: SubmissionRecord, viewer: UserRecord | None) -> int:
    """For the submission's own author, how many others in their courses (those with peer
    insight on) made the same policy mistake and later got ACCEPTED (`server.insight`)."""
    if (
        viewer is None
        or record.user_id != viewer.id
        or record.policy_fingerprint is None
        or record.verdict in (None, "ACCEPTED")
        or services.engine is None
    ):
        return 0
    from server.courses.models import CourseStore
    from server.insight import peers_who_fixed

    courses = CourseStore(services.engine).peer_insight_courses(viewer.id, record.problem)
    return peers_who_fixed(services.engine, record, courses)


@router.get("/submissions/{submission_id}/source.py")
def submission_source(submission_id: str, services: ServicesDep, principal: PrincipalDep) -> Response:
    """The submitted source as plain text, for whoever may read the submission (404 for anyone
    else): what "load into editor" fetches."""
    record = _visible_submission(services, submission_id, principal)
    return Response(
        record.source,
        media_type="text/plain; charset=utf-8",
        headers={"Cache-Control": "private, no-store", "X-Content-Type-Options": "nosniff"},
    )


@router.get("/submissions/{submission_id}/status")
def submission_status(submission_id: str, services: ServicesDep, principal: PrincipalDep) -> JSONResponse:
    record = _visible_submission(services, submission_id, principal)
    return JSONResponse({"id": record.id, "status": str(record.status), "verdict": record.verdict})


@router.get("/submissions/{submission_id}/panel", response_class=HTMLResponse)
def submission_panel(
    submission_id: str, request: Request, services: ServicesDep, user: OptionalUser, principal: PrincipalDep
) -> HTMLResponse:
    record = _visible_submission(services, submission_id, principal)
    report = _report(record)
    if report is None:
        return HTMLResponse('<p class="pending">Not graded yet.</p>', status_code=status.HTTP_202_ACCEPTED)
    return render(
        request,
        "_panel.html",
        user,
        record=record,
        peers_fixed=_peers_fixed(services, record, user),
        **panel_context(report),
    )


@router.get("/me", response_class=HTMLResponse)
def my_submissions(request: Request, services: ServicesDep, user: OptionalUser) -> HTMLResponse:
    user = _require_user(user, request)
    return render(
        request,
        "me.html",
        user,
        submissions=services.store.for_user(user.id, limit=200),
        solved=services.store.solved(user.id),
    )


# --- accounts --------------------------------------------------------------------------------------


def _safe_next(target: str | None) -> str:
    """Only same-site paths: never redirect to another host after sign-in."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/"


@router.get("/signup", response_class=HTMLResponse)
def signup_form(request: Request, user: OptionalUser, next: str = "/") -> HTMLResponse:
    return render(request, "signup.html", user, errors=[], email="", display_name="", next=_safe_next(next))


@router.post("/signup", response_class=HTMLResponse)
def signup(
    request: Request,
    services: ServicesDep,
    email: Annotated[str, Form()] = "",
    display_name: Annotated[str, Form()] = "",
    password: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
    next: Annotated[str, Form()] = "/",
) -> Response:
    check_csrf(request, csrf_token)
    email = email.strip()
    throttle = services.throttle()
    wait_s = throttle.retry_after_s(email, client_ip(request))
    if wait_s is not None:  # the sign-in throttle holds here too: sign-up is no way around it
        response = render(
            request,
            "signup.html",
            None,
            email=email,
            display_name=display_name,
            next=_safe_next(next),
            status_code=status.HTTP_429_TOO_MANY_REQUESTS,
            errors=[f"Too many refused attempts; try again in {wait_s} seconds."],
        )
        response.headers["Retry-After"] = str(wait_s)
        return response
    errors = signup_errors(email, display_name, password)
    if not errors:
        try:
            user = services.users.create(
                email=email, display_name=display_name.strip(), password_hash=hash_password(password)
            )
        except ValueError:
            # The email is taken. Sign-up never signs anyone in to an existing account (it would be
            # a password check outside the sign-in throttle); the refusal counts as a failed
            # sign-in for this email and address.
            throttle.failed(email, client_ip(request))
            errors = [SIGNUP_REFUSED]
        else:
            sign_in(request, services, user)
            return RedirectResponse(_safe_next(next), status_code=status.HTTP_303_SEE_OTHER)
    return render(
        request,
        "signup.html",
        None,
        errors=errors,
        email=email,
        display_name=display_name,
        next=_safe_next(next),
        status_code=status.HTTP_422_UNPROCESSABLE_CONTENT,
    )


@router.get("/signin", response_class=HTMLResponse)
def signin_form(request: Request, user: OptionalUser, next: str = "/") -> HTMLResponse:
    return render(request, "signin.html", user, error=None, email="", next=_safe_next(next))


@router.post("/signin", response_class=HTMLResponse)
def signin(
    request: Request,
    services: ServicesDep,
    email: Annotated[str, Form()] = "",
    password: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
    next: Annotated[str, Form()] = "/",
) -> Response:
    check_csrf(request, csrf_token)
    throttle = services.throttle()
    wait_s = throttle.retry_after_s(email, client_ip(request))
    if wait_s is not None:  # no password is checked past the limit
        response = render(
            request,
            "signin.html",
            None,
            email=email,
            next=_safe_next(next),
            error=f"Too many failed sign-ins; try again in {wait_s} seconds.",
            status_code=status.HTTP_429_TOO_MANY_REQUESTS,
        )
        response.headers["Retry-After"] = str(wait_s)
        return response
    user = services.users.by_email(email.strip())
    ok, new_hash = check_password(user, password)  # the same work for an unknown email
    if user is None or not ok:
        throttle.failed(email, client_ip(request))
        return render(
            request,
            "signin.html",
            None,
            error="Wrong email or password.",
            email=email,
            next=_safe_next(next),
            status_code=status.HTTP_401_UNAUTHORIZED,
        )
    if new_hash:
        services.users.update_password_hash(user.id, new_hash)
    sign_in(request, services, user)
    return RedirectResponse(_safe_next(next), status_code=status.HTTP_303_SEE_OTHER)


@router.get("/account/sessions", response_class=HTMLResponse)
def account_sessions(request: Request, services: ServicesDep, user: OptionalUser) -> HTMLResponse:
    """The signed-in user's sessions (browsers), with buttons to end the others."""
    user = _require_user(user, request)
    store = session_store(services)
    assert store is not None
    current = token_hash(request.session.get("sid", ""))
    return render(request, "sessions.html", user, sessions=store.active(user.id), current=current)


@router.post("/account/sessions/end")
def end_session(
    request: Request,
    services: ServicesDep,
    user: OptionalUser,
    key: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    """Ends one other session (`key`), or every other one (`key` "others")."""
    user = _require_user(user, request)
    check_csrf(request, csrf_token)
    store = session_store(services)
    assert store is not None
    if key == "others":
        store.revoke_all(user.id, except_token=request.session.get("sid"))
    elif not store.revoke_key(user.id, key):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such session")
    return RedirectResponse("/account/sessions", status_code=status.HTTP_303_SEE_OTHER)


@router.post("/signout")
def signout(request: Request, services: ServicesDep, csrf_token: Annotated[str, Form()] = "") -> Response:
    check_csrf(request, csrf_token)
    sign_out(request, services)
    return RedirectResponse("/", status_code=status.HTTP_303_SEE_OTHER)


# --- instructors: admins, and the staff of courses (server/authz.py) -------------------------------


def require_teacher(user: UserRecord | None, principal: Principal, request: Request) -> UserRecord:
    """The signed-in user, when the instructor pages have anything for them (an admin, or staff of
    a course); else 303 to sign in, or 403."""
    user = _require_user(user, request)
    if not principal.teaches:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "for course staff and admins only")
    return user


def require_action(user: UserRecord | None, principal: Principal, request: Request, action: Action) -> UserRecord:
    """The signed-in user, when `principal` may do the site-wide `action`; else 303 to sign in, or 403."""
    user = _require_user(user, request)
    if not decide(principal, action):
        raise HTTPException(status.HTTP_403_FORBIDDEN, "for admins only")
    return user


@router.get("/instructor", response_class=HTMLResponse)
def instructor_home(
    request: Request, services: ServicesDep, user: OptionalUser, principal: PrincipalDep, problem: str | None = None
) -> HTMLResponse:
    """Verdict counts and recent submissions: everyone's for an admin, the students of their
    courses (on those courses' assignments) for course staff."""
    user = require_teacher(user, principal, request)
    scope = Access.submission_scope(principal)
    counts = services.store.verdict_counts(scope)
    return render(
        request,
        "instructor.html",
        user,
        submissions=services.store.recent(problem=problem, limit=300, scope=scope),
        counts=counts,
        students=services.store.student_counts(scope),
        problems=services.problems.all(published_only=not decide(principal, Action.PROBLEMS_MANAGE)),
        selected=problem,
        admin=principal.admin,
    )


@router.get("/instructor/problems/{slug}", response_class=HTMLResponse)
def instructor_problem(
    slug: str, request: Request, services: ServicesDep, user: OptionalUser, principal: PrincipalDep
) -> HTMLResponse:
    """One problem's verdicts and students (scoped as on `/instructor`); admins also regrade it."""
    user = require_teacher(user, principal, request)
    problem = _problem(services, slug, principal)
    scope = Access.submission_scope(principal)
    counts = services.store.verdict_counts(scope).get(slug, {})
    from server.courses.regrade import RegradeStore

    may_regrade = decide(principal, Action.PROBLEMS_REGRADE)
    regrades = RegradeStore(services.engine).recent(problem=slug) if may_regrade else []
    hints_asked = {}
    from server.web.hints import HintStore

    hints_asked = HintStore(services.engine).requested_counts(slug)
    return render(
        request,
        "instructor_problem.html",
        user,
        problem=problem,
        counts=counts,
        total=sum(counts.values()),
        submissions=services.store.recent(problem=slug, limit=300, scope=scope),
        regrades=regrades,
        may_regrade=may_regrade,
        students=services.store.per_student(slug, scope),
        hints_asked=hints_asked,
    )


def _clients_page(
    request: Request, services: Services, user: UserRecord, status_code: int = 200, **context: Any
) -> HTMLResponse:
    return render(
        request, "instructor_clients.html", user, clients=services.clients.all(), status_code=status_code, **context
    )


@router.get("/instructor/clients", response_class=HTMLResponse)
def instructor_clients(
    request: Request, services: ServicesDep, user: OptionalUser, principal: PrincipalDep
) -> HTMLResponse:
    """API clients: list, create (the key shown once), revoke. Admins only."""
    return _clients_page(request, services, require_action(user, principal, request, Action.CLIENTS_MANAGE))


@router.post("/instructor/clients", response_class=HTMLResponse)
def instructor_create_client(
    request: Request,
    services: ServicesDep,
    user: OptionalUser,
    principal: PrincipalDep,
    name: Annotated[str, Form()] = "",
    problems: Annotated[str, Form()] = "",
    callback_allow: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
) -> HTMLResponse:
    import json

    from server.delivery.callbacks import check_prefix

    user = require_action(user, principal, request, Action.CLIENTS_MANAGE)
    check_csrf(request, csrf_token)
    name = name.strip()
    scope = [p.strip() for p in problems.split(",") if p.strip()] or None
    prefixes = [line.strip() for line in callback_allow.splitlines() if line.strip()]
    error = None
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}", name):
        error = "the name: letters, digits, '_', '.', '-' (up to 64), starting with a letter or digit"
    elif scope is not None and (unknown := [p for p in scope if p not in set(services.problems.slugs())]):
        error = f"unknown problems: {', '.join(unknown)}"
    else:
        for prefix in prefixes:
            try:
                check_prefix(prefix)
            except ValueError as exc:
                error = str(exc)
                break
    if error is None:
        try:
            record, api_key = services.clients.create(name, problems=scope, callback_allow=prefixes)
        except ValueError as exc:
            error = str(exc)
        else:
            created = {"client_id": record.name, "api_key": api_key, "callback_secret": record.callback_secret}
            response = _clients_page(
                request,
                services,
                user,
                created=created,
                created_json=json.dumps(created, indent=2),
                status_code=status.HTTP_201_CREATED,
            )
            response.headers["Cache-Control"] = "no-store"
            return response
    return _clients_page(request, services, user, error=error, status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)


@router.post("/instructor/clients/{name}/revoke")
def instructor_revoke_client(
    name: str,
    request: Request,
    services: ServicesDep,
    user: OptionalUser,
    principal: PrincipalDep,
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    require_action(user, principal, request, Action.CLIENTS_MANAGE)
    check_csrf(request, csrf_token)
    if not services.clients.revoke(name):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such active client")
    return RedirectResponse("/instructor/clients", status_code=status.HTTP_303_SEE_OTHER)


@router.get("/instructor/submissions/{submission_id}/source", response_class=HTMLResponse)
def instructor_source(
    submission_id: str, request: Request, services: ServicesDep, user: OptionalUser, principal: PrincipalDep
) -> HTMLResponse:
    """A submission's code, highlighted with line numbers (Pygments, never Markdown), with who
    made it, when and its verdict. For whoever teaches and may read the submission (404 otherwise)."""
    user = require_teacher(user, principal, request)
    record = _visible_submission(services, submission_id, principal)
    author = services.users.get(record.user_id) if record.user_id is not None else None
    return render(
        request,
        "source.html",
        user,
        record=record,
        code=highlight_python(record.source),
        author=(author.contact_email or author.email)
        if author
        else ("API client" if record.client_id is not None else "anonymous"),
    )


def error_page(request: Request, exc: Any) -> Response:
    """HTML error pages for browsers; JSON stays JSON for the API. The page shows the user this
    request's dependencies signed in (none when it failed before them)."""
    if exc.status_code == status.HTTP_303_SEE_OTHER:
        return RedirectResponse(exc.headers["Location"], status_code=status.HTTP_303_SEE_OTHER)
    response = render(
        request,
        "error.html",
        request.scope.get("remat_user"),
        status_code=exc.status_code,
        code=exc.status_code,
        detail=str(exc.detail),
    )
    if exc.status_code in (429, 503) and getattr(exc, "headers", None) and "Retry-After" in exc.headers:
        response.headers["Retry-After"] = exc.headers["Retry-After"]
    return response


__all__ = ["router", "error_page", "WEB_DIR"]
