"""Courses, assignments, enrollments and extensions (migration 0006), and `CourseStore`, the one
place that reads and writes them and computes gradebooks.

- `courses`: a course, made by an instructor (`remat-judge courses create`, or the Courses page)
  or by the first LTI launch from an LMS context (platform, deployment, context id: LTI 1.3 Core
  5.4.1 makes a context id unique within its deployment);
- `assignments`: a problem in a course with an opening time, a deadline, a late rule and a grade
  rule (`server.courses.rules.Policy`). An LTI launch of a resource link makes its course's
  assignment for the link's problem when there is none (open, no deadline, best);
- `enrollments`: who is in a course and as what (`CourseRole`: staff or student): every LTI
  launch from the context enrolls the user with the role its LTI roles map to; admins (and the
  staff of a course made by an admin) enroll accounts by email;
- `extensions`: one student's own deadline on one assignment;
- `course_roster`: an LMS course's members as the LMS last listed them (LTI Names and Role
  Provisioning Services 2.0, `server.lti.nrps`), whether or not they ever launched: the gradebook
  lists the students among them who never launched beside those who did (migration 0014).

Scores are never stored here: a gradebook cell is `rules.standing` of the student's submissions
as they are now, so regrades, new deadlines and extensions show at once.
"""

from __future__ import annotations

import csv
import enum
import hashlib
import io
import json
import re
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import (
    Boolean,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    delete,
    false,
    or_,
    select,
    update,
)
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, mapped_column, sessionmaker

from server.courses.rules import Attempt, GradeRule, LateRule, Policy, Standing, standing
from server.store.accounts import UserRecord
from server.store.db import Base, UTCDateTime, _enum, rowcount, utcnow
from server.store.submissions import SubmissionRecord

COURSE_KEY = re.compile(r"^[a-z0-9][a-z0-9_\-]{0,63}$")


class CourseRole(enum.StrEnum):
    """A user's role in one course (`server.authz`): `staff` (teachers, teaching assistants:
    they see and manage this course's students, gradebook and assignments) or `student`."""

    STAFF = "staff"
    STUDENT = "student"


class CourseError(ValueError):
    """A course, assignment or extension that cannot be made as asked; the message says why."""


class Course(Base):
    """A course. `key` names it in URLs and commands; LTI courses have (platform, deployment,
    context) and a key made from them.

    Attributes:
        solutions_after_deadline: the reference solution opens for the course's students once
            their deadline has passed. On for courses an admin makes; off for courses made by
            LMS launches, since whoever can make an LMS course (a Canvas sandbox) could otherwise
            read any problem's reference by setting a past deadline. Only an admin changes it.
        peer_insight: a student's verdict panel may say how many others in the course made the
            same policy mistake and later fixed it (`server.insight.peers_who_fixed`). Off by
            default; the course's staff turn it on.
    """

    __tablename__ = "courses"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    key: Mapped[str] = mapped_column(String(64), unique=True)
    title: Mapped[str] = mapped_column(String(255))
    platform_id: Mapped[int | None] = mapped_column(
        Integer, ForeignKey("lti_platforms.id", name="fk_courses_platform", ondelete="SET NULL"), nullable=True
    )
    deployment_id: Mapped[str | None] = mapped_column(String(255), nullable=True)
    context_id: Mapped[str | None] = mapped_column(String(255), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    solutions_after_deadline: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    peer_insight: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())

    __table_args__ = (UniqueConstraint("platform_id", "deployment_id", "context_id", name="uq_courses_context"),)

    @property
    def from_lms(self) -> bool:
        """Made by an LMS launch: its roster comes from the LMS."""
        return self.context_id is not None


class Assignment(Base):
    """A problem in a course, with its rules (`policy()`)."""

    __tablename__ = "assignments"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    course_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("courses.id", name="fk_assignments_course", ondelete="CASCADE")
    )
    problem: Mapped[str] = mapped_column(String(64))
    opens_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    due_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    late_rule: Mapped[LateRule] = mapped_column(_enum(LateRule, "assignment_late_rule"))
    penalty_per_day: Mapped[float] = mapped_column(Float, default=0.0)
    penalty_cap: Mapped[float] = mapped_column(Float, default=1.0)
    grace_minutes: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    grade_rule: Mapped[GradeRule] = mapped_column(_enum(GradeRule, "assignment_grade_rule"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (UniqueConstraint("course_id", "problem", name="uq_assignments_course_problem"),)

    def policy(self) -> Policy:
        return Policy(
            opens_at=self.opens_at,
            due_at=self.due_at,
            late_rule=LateRule(self.late_rule),
            penalty_per_day=self.penalty_per_day,
            penalty_cap=self.penalty_cap,
            grade_rule=GradeRule(self.grade_rule),
            grace_minutes=self.grace_minutes or 0,
        )


class Enrollment(Base):
    """A user in a course, as staff or student (`CourseRole`)."""

    __tablename__ = "enrollments"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    course_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("courses.id", name="fk_enrollments_course", ondelete="CASCADE")
    )
    user_id: Mapped[int] = mapped_column(Integer, ForeignKey("users.id", name="fk_enrollments_user"), index=True)
    role: Mapped[CourseRole] = mapped_column(_enum(CourseRole, "enrollment_role"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (UniqueConstraint("course_id", "user_id", name="uq_enrollments_course_user"),)


class Extension(Base):
    """One student's own deadline on one assignment."""

    __tablename__ = "extensions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    assignment_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("assignments.id", name="fk_extensions_assignment", ondelete="CASCADE")
    )
    user_id: Mapped[int] = mapped_column(Integer, ForeignKey("users.id", name="fk_extensions_user"))
    due_at: Mapped[datetime] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (UniqueConstraint("assignment_id", "user_id", name="uq_extensions_assignment_user"),)


class RosterMember(Base):
    """A member of an LMS course as the LMS last listed them (LTI NRPS 2.0, a member of its membership container),
    whether or not they ever launched. Replaced as a whole by each successful sync
    (`CourseStore.replace_roster`); a failed sync leaves it as it was.

    Attributes:
        member_id: the LMS's user id (NRPS `user_id`: the `sub` of that person's launches).
        user_id: the judge account of that LMS user once they launched (None before).
        name, email: as the LMS gives them (None when it does not).
        roles: the LMS roles, a JSON list of strings.
        staff: the roles make them staff of the course (Instructor and its sub-roles such as
            TeachingAssistant, ContentDeveloper, Administrator: `server.lti.launch.role_for`).
        active: the LMS's status is Active (Inactive: dropped or suspended in the LMS).
        synced_at: when the sync that listed them ran.
    """

    __tablename__ = "course_roster"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    course_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("courses.id", name="fk_course_roster_course", ondelete="CASCADE")
    )
    member_id: Mapped[str] = mapped_column(String(255))
    user_id: Mapped[int | None] = mapped_column(
        Integer, ForeignKey("users.id", name="fk_course_roster_user"), nullable=True
    )
    name: Mapped[str | None] = mapped_column(String(255), nullable=True)
    email: Mapped[str | None] = mapped_column(String(254), nullable=True)
    roles: Mapped[str] = mapped_column(Text)
    staff: Mapped[bool] = mapped_column(Boolean)
    active: Mapped[bool] = mapped_column(Boolean)
    synced_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (UniqueConstraint("course_id", "member_id", name="uq_course_roster_member"),)


@dataclass(frozen=True)
class Listed:
    """A member of an LMS course's roster as a sync found them (what `replace_roster` stores).

    Attributes:
        member_id: the LMS's user id; user_id: their judge account, when they launched already.
        name, email, roles, staff, active: see `RosterMember`.
    """

    member_id: str
    user_id: int | None
    name: str | None
    email: str | None
    roles: tuple[str, ...]
    staff: bool
    active: bool


NEVER_LAUNCHED = "never launched"
NO_SUBMISSION = "no submission"


@dataclass(frozen=True)
class Cell:
    """One gradebook cell: a student's standing on an assignment, and their extension if any."""

    standing: Standing
    extension_due_at: datetime | None


@dataclass(frozen=True)
class Gradebook:
    """Students x assignments of one course.

    Attributes:
        course: the course.
        assignments: its assignments, by problem slug.
        students: enrolled students (id, display name, email), by name.
        cells: (user id, assignment id) -> `Cell`.
        unlaunched: the active students of the LMS roster (`course_roster`, after a sync) who
            are not enrolled: they never launched the course's activities. By name.
        roster_synced_at: when the roster was last synced (None: never).
        submitted: (user id, assignment id) of each student who submitted anything to the
            assignment's problem (graded or not, counted or not).
    """

    course: Course
    assignments: list[Assignment]
    students: list[UserRecord]
    cells: dict[tuple[int, int], Cell]
    unlaunched: list[RosterMember] = field(default_factory=list)
    roster_synced_at: datetime | None = None
    submitted: frozenset[tuple[int, int]] = frozenset()

    def solved(self, user_id: int) -> int:
        return sum(1 for a in self.assignments if self.cells[(user_id, a.id)].standing.solved_at is not None)

    def status(self, user_id: int) -> str:
        """`NO_SUBMISSION` for an enrolled student who submitted nothing to any assignment, else ""."""
        return "" if any((user_id, a.id) in self.submitted for a in self.assignments) else NO_SUBMISSION

    def csv(self) -> str:
        """The gradebook as CSV (RFC 4180, a header row): one row per student and assignment with
        email, name, problem, score (0-1, empty without a counted attempt), attempts, solved_at
        (ISO 8601 UTC), late (yes/no), extension_due_at, status ("no submission" on a row of a
        student who submitted nothing to that assignment; "never launched" for a roster student
        who never launched, `unlaunched`). A course without assignments has one row per student
        with an empty problem. Cells starting with = + - @ are prefixed with ' so a spreadsheet
        never runs them as formulas (OWASP "CSV injection")."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\r\n")
        writer.writerow(
            ["email", "name", "problem", "score", "attempts", "solved_at", "late", "extension_due_at", "status"]
        )
        problems = [a.problem for a in self.assignments] or [""]
        for student in self.students:
            if not self.assignments:
                writer.writerow(
                    [_cell_text(v) for v in (student.contact_email or student.email, student.display_name)]
                    + ["", "", 0, "", "no", "", NO_SUBMISSION]
                )
            for assignment in self.assignments:
                cell = self.cells[(student.id, assignment.id)]
                s = cell.standing
                writer.writerow(
                    [
                        _cell_text(v)
                        for v in (
                            student.contact_email or student.email,
                            student.display_name,
                            assignment.problem,
                            "" if s.score is None else f"{s.score:.4f}",
                            s.attempts,
                            s.solved_at.isoformat() if s.solved_at else "",
                            "yes" if s.late else "no",
                            cell.extension_due_at.isoformat() if cell.extension_due_at else "",
                            "" if (student.id, assignment.id) in self.submitted else NO_SUBMISSION,
                        )
                    ]
                )
        for member in self.unlaunched:
            for problem in problems:
                writer.writerow(
                    [_cell_text(v) for v in (member.email or "", member.name or member.member_id, problem)]
                    + ["", 0, "", "no", "", NEVER_LAUNCHED]
                )
        return out.getvalue()


def _cell_text(value: object) -> str:
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def context_key(platform_id: int, deployment_id: str, context_id: str) -> str:
    """The key of an LMS context's course: `lti-` and 16 hex digits of SHA-256 of the three ids
    (the same for every process, so two first launches at once make one course)."""
    material = "\0".join((str(platform_id), deployment_id, context_id)).encode("utf-8")
    return "lti-" + hashlib.sha256(material).hexdigest()[:16]


class CourseStore:
    """Reads and writes courses, assignments, enrollments and extensions. Thread-safe: one
    session per call; every write is its own transaction."""

    def __init__(self, engine: Engine):
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    # -- courses ----------------------------------------------------------------------------------

    def create(self, key: str, title: str) -> Course:
        """A course made by an admin (the reference solution opens after deadlines).

        Raises:
            CourseError: a bad key (lower-case letters, digits, - and _, 1-64) or one in use.
        """
        if not COURSE_KEY.match(key):
            raise CourseError(
                "a course key is 1-64 lower-case letters, digits, - or _, starting with a letter or digit"
            )
        title = title.strip()[:255] or key
        try:
            with self._sessions.begin() as session:
                course = Course(key=key, title=title, solutions_after_deadline=True, created_at=utcnow())
                session.add(course)
        except IntegrityError:
            raise CourseError(f"there is a course {key!r} already") from None
        return course

    def for_context(self, *, platform_id: int, deployment_id: str, context_id: str, title: str | None) -> Course:
        """The course of an LMS context, made at its first launch (key `context_key`); its
        title follows the platform's."""
        key = (
            Course.platform_id == platform_id,
            Course.deployment_id == deployment_id,
            Course.context_id == context_id,
        )
        for _ in range(3):
            with self._sessions.begin() as session:
                course = session.execute(select(Course).where(*key)).scalar_one_or_none()
                if course is not None:
                    if title and course.title != title[:255]:
                        course.title = title[:255]
                    return course
            try:
                with self._sessions.begin() as session:
                    course = Course(
                        key=context_key(platform_id, deployment_id, context_id),
                        title=(title or context_id)[:255],
                        platform_id=platform_id,
                        deployment_id=deployment_id,
                        context_id=context_id,
                        solutions_after_deadline=False,
                        created_at=utcnow(),
                    )
                    session.add(course)
                return course
            except IntegrityError:  # a concurrent first launch made it
                continue
        raise RuntimeError("could not store the course")

    def join_context(
        self,
        *,
        platform_id: int,
        deployment_id: str,
        context_id: str,
        title: str | None,
        user_id: int,
        member_id: str,
        role: CourseRole,
    ) -> Course:
        """What every LMS launch from a context does to its course (a resource link launch and a
        deep linking launch alike): makes the course at the context's first launch
        (`for_context`), enrolls `user_id` with the launch's `role` (or changes their role), and
        ties the roster's entry of `member_id` (the launch's `sub`, which NRPS calls `user_id`)
        to the account, so a synced student who launches is no longer "never launched".

        Raises:
            RuntimeError: the rows could not be stored (concurrent writers kept winning).
        """
        course = self.for_context(
            platform_id=platform_id, deployment_id=deployment_id, context_id=context_id, title=title
        )
        self.enroll(course.id, user_id, role)
        with self._sessions.begin() as session:
            session.execute(
                update(RosterMember)
                .where(RosterMember.course_id == course.id, RosterMember.member_id == member_id)
                .values(user_id=user_id)
                .execution_options(synchronize_session=False)
            )
        return course

    def replace_roster(self, course_id: int, members: list[Listed]) -> None:
        """Replaces the course's roster with `members` (a sync's whole, successful answer) in one
        transaction: a reader sees the old roster or the new one, never a part."""
        now = utcnow()
        with self._sessions.begin() as session:
            session.execute(delete(RosterMember).where(RosterMember.course_id == course_id))
            for m in {m.member_id: m for m in members}.values():
                session.add(
                    RosterMember(
                        course_id=course_id,
                        member_id=m.member_id,
                        user_id=m.user_id,
                        name=m.name[:255] if m.name else None,
                        email=m.email[:254] if m.email else None,
                        roles=json.dumps(list(m.roles)),
                        staff=m.staff,
                        active=m.active,
                        synced_at=now,
                    )
                )

    def roster(self, course_id: int) -> list[RosterMember]:
        """The course's LMS roster as last synced (empty before the first sync), by name."""
        with self._sessions() as session:
            return list(
                session.execute(
                    select(RosterMember)
                    .where(RosterMember.course_id == course_id)
                    .order_by(RosterMember.name, RosterMember.member_id)
                ).scalars()
            )

    def get(self, key: str) -> Course | None:
        with self._sessions() as session:
            return session.execute(select(Course).where(Course.key == key)).scalar_one_or_none()

    def all(self) -> list[Course]:
        with self._sessions() as session:
            return list(session.execute(select(Course).order_by(Course.title, Course.id)).scalars())

    def staffed_by(self, user_id: int) -> list[Course]:
        """The courses `user_id` is staff of."""
        with self._sessions() as session:
            return list(
                session.execute(
                    select(Course)
                    .join(Enrollment, Enrollment.course_id == Course.id)
                    .where(Enrollment.user_id == user_id, Enrollment.role == CourseRole.STAFF)
                    .order_by(Course.title, Course.id)
                ).scalars()
            )

    def peer_insight_courses(self, user_id: int, problem: str) -> list[int]:
        """Ids of the courses where `user_id` is a student, `problem` an assignment, and the
        staff turned peer insight on."""
        with self._sessions() as session:
            return list(
                session.execute(
                    select(Course.id)
                    .join(Enrollment, Enrollment.course_id == Course.id)
                    .join(Assignment, Assignment.course_id == Course.id)
                    .where(
                        Enrollment.user_id == user_id,
                        Enrollment.role == CourseRole.STUDENT,
                        Course.peer_insight.is_(True),
                        Assignment.problem == problem,
                    )
                ).scalars()
            )

    def set_peer_insight(self, course_id: int, value: bool) -> None:
        """Turns the "others made the same mistake and fixed it" line on or off for a course."""
        with self._sessions.begin() as session:
            session.execute(
                update(Course)
                .where(Course.id == course_id)
                .values(peer_insight=value)
                .execution_options(synchronize_session=False)
            )

    def set_solutions_after_deadline(self, course_id: int, value: bool) -> None:
        with self._sessions.begin() as session:
            session.execute(
                update(Course)
                .where(Course.id == course_id)
                .values(solutions_after_deadline=value)
                .execution_options(synchronize_session=False)
            )

    def course_of_link(self, *, platform_id: int, deployment_id: str, context_id: str | None) -> Course | None:
        if context_id is None:
            return None
        with self._sessions() as session:
            return session.execute(
                select(Course).where(
                    Course.platform_id == platform_id,
                    Course.deployment_id == deployment_id,
                    Course.context_id == context_id,
                )
            ).scalar_one_or_none()

    # -- enrollments ------------------------------------------------------------------------------

    def enroll(self, course_id: int, user_id: int, role: CourseRole) -> None:
        """Enrolls a user (or changes their role in the course)."""
        self._upsert(Enrollment, dict(course_id=course_id, user_id=user_id), role=role)

    def _upsert(self, table: type[Base], key: dict[str, object], **values: object) -> None:
        """Updates the row of `table` with `key` to `values`, or inserts it (a concurrent insert
        of the same key turns into the update)."""
        conditions = [getattr(table, name) == value for name, value in key.items()]
        for _ in range(2):
            with self._sessions.begin() as session:
                if rowcount(
                    session.execute(
                        update(table).where(*conditions).values(**values).execution_options(synchronize_session=False)
                    )
                ):
                    return
            try:
                with self._sessions.begin() as session:
                    session.add(table(**key, **values, created_at=utcnow()))
                return
            except IntegrityError:
                continue
        raise RuntimeError(f"could not store the {table.__tablename__} row")

    def members(self, course_id: int, role: CourseRole | None = None) -> list[UserRecord]:
        query = (
            select(UserRecord)
            .join(Enrollment, Enrollment.user_id == UserRecord.id)
            .where(Enrollment.course_id == course_id)
            .order_by(UserRecord.display_name, UserRecord.id)
        )
        if role is not None:
            query = query.where(Enrollment.role == role)
        with self._sessions() as session:
            return list(session.execute(query).scalars())

    def member_by_email(self, course_id: int, email: str) -> UserRecord | None:
        """The course's member whose sign-in email or LMS contact email is `email` (case
        ignored); None when nobody or more than one member matches."""
        email = email.strip().lower()
        query = (
            select(UserRecord)
            .join(Enrollment, Enrollment.user_id == UserRecord.id)
            .where(Enrollment.course_id == course_id, or_(UserRecord.email == email, UserRecord.contact_email == email))
        )
        with self._sessions() as session:
            found = list(session.execute(query.limit(2)).scalars())
        return found[0] if len(found) == 1 else None

    # -- assignments ------------------------------------------------------------------------------

    def assignments(self, course_id: int) -> list[Assignment]:
        with self._sessions() as session:
            return list(
                session.execute(
                    select(Assignment).where(Assignment.course_id == course_id).order_by(Assignment.problem)
                ).scalars()
            )

    def assignment(self, course_id: int, problem: str) -> Assignment | None:
        with self._sessions() as session:
            return session.execute(
                select(Assignment).where(Assignment.course_id == course_id, Assignment.problem == problem)
            ).scalar_one_or_none()

    def ensure_assignment(self, course_id: int, problem: str) -> Assignment:
        """The course's assignment of `problem`, made with the default rules (open now and
        always, no deadline, best) when there is none (an LTI launch of a new resource link)."""
        for _ in range(2):
            found = self.assignment(course_id, problem)
            if found is not None:
                return found
            try:
                with self._sessions.begin() as session:
                    now = utcnow()
                    made = Assignment(
                        course_id=course_id,
                        problem=problem,
                        late_rule=LateRule.PENALTY,
                        penalty_per_day=0.0,
                        penalty_cap=1.0,
                        grade_rule=GradeRule.BEST,
                        grace_minutes=0,
                        created_at=now,
                        updated_at=now,
                    )
                    session.add(made)
                return made
            except IntegrityError:
                continue
        raise RuntimeError("could not store the assignment")

    def set_assignment(self, course_id: int, problem: str, policy: Policy) -> Assignment:
        """Makes or changes the course's assignment of `problem` with `policy` (validated by
        `Policy` itself: penalties in [0, 1], the deadline not before the opening)."""
        self.ensure_assignment(course_id, problem)
        with self._sessions.begin() as session:
            assignment = session.execute(
                select(Assignment).where(Assignment.course_id == course_id, Assignment.problem == problem)
            ).scalar_one()
            assignment.opens_at, assignment.due_at = policy.opens_at, policy.due_at
            assignment.late_rule, assignment.grade_rule = policy.late_rule, policy.grade_rule
            assignment.penalty_per_day, assignment.penalty_cap = policy.penalty_per_day, policy.penalty_cap
            assignment.grace_minutes = policy.grace_minutes
            assignment.updated_at = utcnow()
        return assignment

    # -- extensions -------------------------------------------------------------------------------

    def extend(self, assignment_id: int, user_id: int, due_at: datetime) -> None:
        """Gives one student their own deadline (replacing an earlier extension)."""
        self._upsert(Extension, dict(assignment_id=assignment_id, user_id=user_id), due_at=due_at)

    def extension(self, assignment_id: int, user_id: int) -> datetime | None:
        with self._sessions() as session:
            return session.execute(
                select(Extension.due_at).where(Extension.assignment_id == assignment_id, Extension.user_id == user_id)
            ).scalar_one_or_none()

    def due_dates_for(self, user_id: int, problem: str) -> list[tuple[Course, Assignment, datetime | None]]:
        """The assignments of `problem` in the courses `user_id` is a student of, each with the
        student's extension (or None): what the problem page tells them."""
        with self._sessions() as session:
            rows = session.execute(
                select(Course, Assignment, Extension.due_at)
                .join(Assignment, Assignment.course_id == Course.id)
                .join(Enrollment, (Enrollment.course_id == Course.id) & (Enrollment.user_id == user_id))
                .outerjoin(Extension, (Extension.assignment_id == Assignment.id) & (Extension.user_id == user_id))
                .where(Assignment.problem == problem, Enrollment.role == CourseRole.STUDENT)
                .order_by(Course.title)
            ).all()
        return [(course, assignment, extension) for course, assignment, extension in rows]

    # -- standings --------------------------------------------------------------------------------

    def _attempts(self, user_ids: list[int], problems: list[str]) -> dict[tuple[int, str], list[Attempt]]:
        found: dict[tuple[int, str], list[Attempt]] = {}
        if not user_ids or not problems:
            return found
        with self._sessions() as session:
            rows = session.execute(
                select(
                    SubmissionRecord.id,
                    SubmissionRecord.user_id,
                    SubmissionRecord.problem,
                    SubmissionRecord.created_at,
                    SubmissionRecord.verdict,
                    SubmissionRecord.score,
                ).where(SubmissionRecord.user_id.in_(user_ids), SubmissionRecord.problem.in_(problems))
            ).all()
        for sid, uid, problem, created_at, verdict, score in rows:
            assert uid is not None  # selected by user_id
            found.setdefault((uid, problem), []).append(Attempt(sid, created_at, verdict, score))
        return found

    def standing_of(self, user_id: int, problem: str, assignment: Assignment | None) -> Standing:
        """A user's standing on an assignment (`assignment` None: the default rules, for a
        resource link outside any course)."""
        attempts = self._attempts([user_id], [problem]).get((user_id, problem), [])
        if assignment is None:
            return standing(attempts, Policy())
        return standing(attempts, assignment.policy(), extension_due_at=self.extension(assignment.id, user_id))

    def gradebook(self, course: Course) -> Gradebook:
        """Students x assignments of `course`, computed from the stored verdicts now."""
        assignments = self.assignments(course.id)
        students = self.members(course.id, CourseRole.STUDENT)
        ids = [s.id for s in students]
        attempts = self._attempts(ids, [a.problem for a in assignments])
        with self._sessions() as session:
            extensions = {
                (e.user_id, e.assignment_id): e.due_at
                for e in session.execute(
                    select(Extension).where(Extension.assignment_id.in_([a.id for a in assignments]))
                ).scalars()
            }
        cells = {}
        for student in students:
            for assignment in assignments:
                extension = extensions.get((student.id, assignment.id))
                cells[(student.id, assignment.id)] = Cell(
                    standing(
                        attempts.get((student.id, assignment.problem), []),
                        assignment.policy(),
                        extension_due_at=extension,
                    ),
                    extension,
                )
        roster = self.roster(course.id)
        enrolled = {m.id for m in self.members(course.id)}
        unlaunched = [
            m for m in roster if m.active and not m.staff and (m.user_id is None or m.user_id not in enrolled)
        ]
        return Gradebook(
            course=course,
            assignments=assignments,
            students=students,
            cells=cells,
            unlaunched=sorted(unlaunched, key=lambda m: ((m.name or "").lower(), m.member_id)),
            roster_synced_at=max((m.synced_at for m in roster), default=None),
            submitted=frozenset(
                (student.id, assignment.id)
                for student in students
                for assignment in assignments
                if attempts.get((student.id, assignment.problem))
            ),
        )
