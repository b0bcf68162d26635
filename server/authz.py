"""Who may do what: one answer to "may this principal do this to that" for the web pages, the
REST API, the LTI routes and the CLI.

Roles have a scope (docs/ARCHITECTURE.md, "Authority"):

- a **site role** on the account (`server.store.accounts.SiteRole`): `admin` manages problems, API clients,
  LMS platforms, accounts and every course; everyone else is a plain `user`. Only
  `remat-judge users role EMAIL admin` makes an admin; no LMS launch ever does;
- a **course role** per enrollment (`server.store.courses.CourseRole`): `staff` or `student`,
  from the LTI roles of each launch from the course's LMS context, or from an admin's
  `courses enroll`. Staff see and act on their own course only.

What a principal may do depends on how it relates to the target: the columns of `TABLE`
(`Relation`). Each cell is a `Rule`; `decide` looks the cell up, and SECURITY.md prints the same
table (`markdown_table`; a unit test keeps the two equal). Listings use `Access.submission_scope`,
the SQL form of the `submission.read` row (a test checks they agree).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from sqlalchemy import ColumnElement, and_, exists, or_, select, true
from sqlalchemy.engine import Engine
from sqlalchemy.orm import sessionmaker

from server.store.accounts import SiteRole, UserRecord
from server.store.courses import Assignment, Course, CourseRole, Enrollment
from server.store.submissions import SubmissionRecord


class Action(enum.StrEnum):
    """Everything the judge guards, by the name SECURITY.md's table uses."""

    PROBLEMS_MANAGE = "problems.manage"
    PROBLEMS_REGRADE = "problems.regrade"
    CLIENTS_MANAGE = "clients.manage"
    LTI_MANAGE = "lti.manage"
    ACCOUNTS_MANAGE = "accounts.manage"
    SUBMISSIONS_ALL = "submissions.all"
    COURSES_CREATE = "courses.create"
    COURSE_VIEW = "course.view"
    COURSE_EDIT = "course.edit"
    COURSE_ENROLL = "course.enroll"
    COURSE_SETTINGS = "course.settings"
    COURSE_ROSTER = "course.roster"
    COURSE_BOARD = "course.board"
    SUBMISSION_READ = "submission.read"


ACTION_MEANING: dict[Action, str] = {
    Action.PROBLEMS_MANAGE: "upload, publish, unpublish; see, open and grade unpublished problems; read any "
    "reference solution",
    Action.PROBLEMS_REGRADE: "regrade a problem (every course's submissions of it)",
    Action.CLIENTS_MANAGE: "API clients: create, list, revoke",
    Action.LTI_MANAGE: "LMS platforms, `/lti/setup`, grade passback rows (`/lti/grades`)",
    Action.ACCOUNTS_MANAGE: "site roles, password resets, the account list",
    Action.SUBMISSIONS_ALL: "every submission, and verdict counts over everyone",
    Action.COURSES_CREATE: "make a course by hand (LMS courses are made by launches)",
    Action.COURSE_VIEW: "the course's gradebook and CSV, its students' submissions and sources on its assignments",
    Action.COURSE_EDIT: "the course's assignments (dates, late and grade rules) and extensions",
    Action.COURSE_ENROLL: "enroll an account by email",
    Action.COURSE_SETTINGS: "whether reference solutions open after the course's deadlines",
    Action.COURSE_ROSTER: "sync the course's roster from its LMS (LTI Names and Role Provisioning Services 2.0)",
    Action.COURSE_BOARD: "the course's board of an assignment: each student's best score and point, never a source "
    "(names for students only when the course's staff show them)",
    Action.SUBMISSION_READ: "a submission's page, panel, status and source",
}


class Relation(enum.StrEnum):
    """How a principal stands to a target: the columns of `TABLE`.

    For a course target, `student`/`staff` mean of that course; for a submission, of a course
    where the submission's author is a student and its problem is an assignment; for site-wide
    actions there is no "this course", so every staff member is `other_staff` and every
    student `user`.
    """

    ANONYMOUS = "anonymous"
    USER = "user"
    STUDENT = "student"
    STAFF = "staff"
    OTHER_STAFF = "other_staff"
    ADMIN = "admin"
    API_CLIENT = "api_client"


RELATION_HEADING: dict[Relation, str] = {
    Relation.ANONYMOUS: "anonymous",
    Relation.USER: "signed-in user",
    Relation.STUDENT: "student (this course)",
    Relation.STAFF: "staff (this course)",
    Relation.OTHER_STAFF: "staff (another course)",
    Relation.ADMIN: "admin",
    Relation.API_CLIENT: "API client",
}


class Rule(enum.StrEnum):
    """A cell of `TABLE`: `yes`, `no`, `own` (only what the principal itself submitted; an
    anonymous caller "owns" anonymous API submissions, which exist only with
    `REMAT_JUDGE_ALLOW_ANONYMOUS_API`), or `not LMS` (only for a course not made by an LMS
    launch: an LMS course's roster comes from the LMS)."""

    YES = "yes"
    NO = "no"
    OWN = "own"
    NOT_LMS = "not LMS"


_Y, _N, _O, _L = Rule.YES, Rule.NO, Rule.OWN, Rule.NOT_LMS
_COLUMNS = tuple(Relation)


def _row(*cells: Rule) -> dict[Relation, Rule]:
    assert len(cells) == len(_COLUMNS)
    return dict(zip(_COLUMNS, cells, strict=True))


#                                 anon user stud staff other admin client
TABLE: dict[Action, dict[Relation, Rule]] = {
    Action.PROBLEMS_MANAGE: _row(_N, _N, _N, _N, _N, _Y, _N),
    Action.PROBLEMS_REGRADE: _row(_N, _N, _N, _N, _N, _Y, _N),
    Action.CLIENTS_MANAGE: _row(_N, _N, _N, _N, _N, _Y, _N),
    Action.LTI_MANAGE: _row(_N, _N, _N, _N, _N, _Y, _N),
    Action.ACCOUNTS_MANAGE: _row(_N, _N, _N, _N, _N, _Y, _N),
    Action.SUBMISSIONS_ALL: _row(_N, _N, _N, _N, _N, _Y, _N),
    Action.COURSES_CREATE: _row(_N, _N, _N, _N, _N, _Y, _N),
    Action.COURSE_VIEW: _row(_N, _N, _N, _Y, _N, _Y, _N),
    Action.COURSE_EDIT: _row(_N, _N, _N, _Y, _N, _Y, _N),
    Action.COURSE_ENROLL: _row(_N, _N, _N, _L, _N, _Y, _N),
    Action.COURSE_SETTINGS: _row(_N, _N, _N, _N, _N, _Y, _N),
    Action.COURSE_ROSTER: _row(_N, _N, _N, _Y, _N, _Y, _N),
    Action.COURSE_BOARD: _row(_N, _N, _Y, _Y, _N, _Y, _N),
    Action.SUBMISSION_READ: _row(_O, _O, _O, _Y, _O, _Y, _O),
}


@dataclass(frozen=True)
class Principal:
    """Who acts.

    Attributes:
        user_id: the signed-in account, or None.
        admin: the account's site role is admin, or the caller holds the deployment's admin
            token (`REMAT_JUDGE_INSTRUCTOR_TOKEN`), or it is the CLI (whoever runs it can open
            the database).
        client_id: the API client, when an API key was given.
        staff_of, student_of: course ids where the account is staff / a student.
    """

    user_id: int | None = None
    admin: bool = False
    client_id: int | None = None
    staff_of: frozenset[int] = field(default_factory=frozenset)
    student_of: frozenset[int] = field(default_factory=frozenset)

    @property
    def anonymous(self) -> bool:
        return self.user_id is None and self.client_id is None and not self.admin

    @property
    def teaches(self) -> bool:
        """Whether the instructor pages have anything for it (an admin, or staff of a course)."""
        return self.admin or bool(self.staff_of)


ANONYMOUS = Principal()
OPERATOR = Principal(admin=True)  # the CLI
ADMIN_TOKEN = Principal(admin=True)  # the API's admin token


def api_client(client_id: int) -> Principal:
    return Principal(client_id=client_id)


@dataclass(frozen=True)
class CourseTarget:
    """A course as `decide` needs it: its id, and whether an LMS launch made it."""

    course_id: int
    from_lms: bool

    @classmethod
    def of(cls, course: Course) -> CourseTarget:
        return cls(course.id, course.from_lms)


@dataclass(frozen=True)
class SubmissionTarget:
    """A submission as `decide` needs it.

    Attributes:
        user_id, client_id: who made it (web account, API client; both None: anonymous API).
        taught_in: ids of the courses whose staff may read it: the author is a student there and
            the submission's problem is one of the course's assignments.
    """

    user_id: int | None
    client_id: int | None
    taught_in: frozenset[int] = frozenset()


Target = CourseTarget | SubmissionTarget | None


def relation(principal: Principal, target: Target) -> Relation:
    """The column of `TABLE` that `principal` reads for `target` (see `Relation`)."""
    if principal.admin:
        return Relation.ADMIN
    if principal.client_id is not None:
        return Relation.API_CLIENT
    if principal.user_id is None:
        return Relation.ANONYMOUS
    courses: frozenset[int] = frozenset()
    if isinstance(target, CourseTarget):
        courses = frozenset({target.course_id})
    elif isinstance(target, SubmissionTarget):
        courses = target.taught_in
    if principal.staff_of & courses:
        return Relation.STAFF
    if principal.student_of & courses:
        return Relation.STUDENT
    return Relation.OTHER_STAFF if principal.staff_of else Relation.USER


def _owns(principal: Principal, target: SubmissionTarget) -> bool:
    if principal.client_id is not None:
        return target.client_id == principal.client_id
    if principal.user_id is not None:
        return target.user_id == principal.user_id
    return target.user_id is None and target.client_id is None


def decide(principal: Principal, action: Action, target: Target = None) -> bool:
    """Whether `principal` may do `action` to `target` (None: site-wide), by `TABLE`.

    Raises:
        ValueError: a course action without a `CourseTarget`, or `submission.read` without a
            `SubmissionTarget`.
    """
    if action.value.startswith("course.") and not isinstance(target, CourseTarget):
        raise ValueError(f"{action} needs a course")
    if action == Action.SUBMISSION_READ and not isinstance(target, SubmissionTarget):
        raise ValueError(f"{action} needs a submission")
    rule = TABLE[action][relation(principal, target)]
    if rule == Rule.YES:
        return True
    if rule == Rule.OWN:
        return isinstance(target, SubmissionTarget) and _owns(principal, target)
    if rule == Rule.NOT_LMS:
        return isinstance(target, CourseTarget) and not target.from_lms
    return False


class Access:
    """`decide` with the facts read from the database: principals of accounts, submission
    targets, and the SQL scope of what a principal may read. Thread-safe (a session per call).

    Args:
        engine: the judge's database.
    """

    def __init__(self, engine: Engine):
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def principal(self, user: UserRecord | None) -> Principal:
        """The principal of a signed-in account (`ANONYMOUS` for None), with its courses."""
        if user is None:
            return ANONYMOUS
        with self._sessions() as session:
            rows = session.execute(
                select(Enrollment.course_id, Enrollment.role).where(Enrollment.user_id == user.id)
            ).all()
        return Principal(
            user_id=user.id,
            admin=user.role == SiteRole.ADMIN,
            staff_of=frozenset(c for c, r in rows if r == CourseRole.STAFF),
            student_of=frozenset(c for c, r in rows if r == CourseRole.STUDENT),
        )

    def submission_target(self, record: SubmissionRecord) -> SubmissionTarget:
        """`record` with the courses whose staff may read it."""
        taught: frozenset[int] = frozenset()
        if record.user_id is not None:
            with self._sessions() as session:
                taught = frozenset(
                    session.execute(
                        select(Enrollment.course_id)
                        .join(Assignment, Assignment.course_id == Enrollment.course_id)
                        .where(
                            Enrollment.user_id == record.user_id,
                            Enrollment.role == CourseRole.STUDENT,
                            Assignment.problem == record.problem,
                        )
                    ).scalars()
                )
        return SubmissionTarget(user_id=record.user_id, client_id=record.client_id, taught_in=taught)

    def may_read(self, principal: Principal, record: SubmissionRecord) -> bool:
        return decide(principal, Action.SUBMISSION_READ, self.submission_target(record))

    @staticmethod
    def submission_scope(principal: Principal) -> ColumnElement[bool]:
        """The SQL condition on `submissions` that selects exactly what `principal` may read
        (the `submission.read` row of `TABLE`, for listings and counts)."""
        s = SubmissionRecord
        if decide(principal, Action.SUBMISSIONS_ALL):
            return true()
        if principal.client_id is not None:
            return s.client_id == principal.client_id
        if principal.user_id is None:
            return and_(s.user_id.is_(None), s.client_id.is_(None))
        own = s.user_id == principal.user_id
        if not principal.staff_of:
            return own
        taught = exists(
            select(Enrollment.id)
            .join(Assignment, Assignment.course_id == Enrollment.course_id)
            .where(
                Enrollment.user_id == s.user_id,
                Enrollment.role == CourseRole.STUDENT,
                Enrollment.course_id.in_(sorted(principal.staff_of)),
                Assignment.problem == s.problem,
            )
        )
        return or_(own, taught)


def markdown_table() -> str:
    """`TABLE` as the Markdown table SECURITY.md holds: one row per action, one column per relation."""
    lines = [
        "| action | what it covers | " + " | ".join(RELATION_HEADING[r] for r in _COLUMNS) + " |",
        "|---|---|" + "---|" * len(_COLUMNS),
    ]
    for action, cells in TABLE.items():
        lines.append(
            f"| `{action.value}` | {ACTION_MEANING[action]} | " + " | ".join(cells[r].value for r in _COLUMNS) + " |"
        )
    return "\n".join(lines)


if __name__ == "__main__":  # python -m server.authz: the table for SECURITY.md
    print(markdown_table())
