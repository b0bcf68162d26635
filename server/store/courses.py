"""The courses tables: courses, assignments, enrollments and extensions (migration 0006) and LMS
rosters (migration 0014).

- `courses`: a course, made by an instructor (`remat-judge courses create`, or the Courses page)
  or by the first LTI launch from an LMS context (platform, deployment, context id: LTI 1.3 Core
  5.4.1 makes a context id unique within its deployment);
- `assignments`: a problem in a course with an opening time, a deadline, a late rule and a grade
  rule (`Policy`). An LTI launch of a resource link makes its course's
  assignment for the link's problem when there is none (open, no deadline, best);
- `enrollments`: who is in a course and as what (`CourseRole`: staff or student): every LTI
  launch from the context enrolls the user with the role its LTI roles map to; admins (and the
  staff of a course made by an admin) enroll accounts by email;
- `extensions`: one student's own deadline on one assignment;
- `course_roster`: an LMS course's members as the LMS last listed them (LTI Names and Role
  Provisioning Services 2.0, `server.lti.nrps`), whether or not they ever launched: the gradebook
  lists the students among them who never launched beside those who did (migration 0014).

Also the values an assignment's rules are made of (`Policy`, `GradeRule`, `LateRule`, `Attempt`),
which `server.courses.rules` judges. Scores are never stored: a gradebook cell
(`server.courses.gradebook`) is `rules.standing` of the student's submissions as they are now, so
regrades, new deadlines and extensions show at once. `CourseStore` (`server.store.course_store`)
reads and writes these tables.
"""

from __future__ import annotations

import enum
import hashlib
import math
import re
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Boolean, Float, ForeignKey, Integer, String, Text, UniqueConstraint, false
from sqlalchemy.orm import Mapped, mapped_column

from server.store.db import Base, UTCDateTime, enum_column, utcnow

COURSE_KEY = re.compile(r"^[a-z0-9][a-z0-9_\-]{0,63}$")

MAX_GRACE_MINUTES = 24 * 60  # a day: past it, an extension says what is meant


class CourseRole(enum.StrEnum):
    """A user's role in one course (`server.authz`): `staff` (teachers, teaching assistants:
    they see and manage this course's students, gradebook and assignments) or `student`."""

    STAFF = "staff"
    STUDENT = "student"


class CourseError(ValueError):
    """A course, assignment or extension that cannot be made as asked; the message says why."""


class GradeRule(enum.StrEnum):
    """Which counted attempt gives the grade."""

    BEST = "best"
    LAST = "last"


class LateRule(enum.StrEnum):
    """What a late attempt earns: none (no credit) or a penalty per started day up to a cap."""

    NONE = "none"
    PENALTY = "penalty"


@dataclass(frozen=True)
class Policy:
    """An assignment's rules.

    Attributes:
        opens_at: attempts submitted before it do not count (None: open from the start).
        due_at: the deadline (None: no deadline, nothing is late).
        late_rule: see `LateRule`.
        penalty_per_day: fraction of the score lost per started day late, in [0, 1].
        penalty_cap: the most that can be lost, in [0, 1].
        grade_rule: see `GradeRule`.
        grace_minutes: minutes after the deadline (the student's extension too) still on time,
            0 to `MAX_GRACE_MINUTES`.
    """

    opens_at: datetime | None = None
    due_at: datetime | None = None
    late_rule: LateRule = LateRule.PENALTY
    penalty_per_day: float = 0.0
    penalty_cap: float = 1.0
    grade_rule: GradeRule = GradeRule.BEST
    grace_minutes: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.grace_minutes <= MAX_GRACE_MINUTES:
            raise ValueError(f"the grace period is 0 to {MAX_GRACE_MINUTES} minutes, got {self.grace_minutes!r}")
        for name in ("penalty_per_day", "penalty_cap"):
            value = getattr(self, name)
            if not (0.0 <= value <= 1.0) or math.isnan(value):
                raise ValueError(f"{name} must be between 0 and 1, got {value!r}")
        if self.opens_at is not None and self.due_at is not None and self.due_at < self.opens_at:
            raise ValueError("the deadline is before the opening time")


@dataclass(frozen=True)
class Attempt:
    """One submission as the rules see it.

    Attributes:
        submission_id: its id.
        submitted_at: when it was stored (UTC, timezone-aware).
        verdict: the verdict's name, or None while it is queued or running.
        score: the verdict's score in [0, 1] (1.0 for ACCEPTED), or None while ungraded.
    """

    submission_id: str
    submitted_at: datetime
    verdict: str | None
    score: float | None


class Course(Base):
    """A course. `key` names it in URLs and commands; LTI courses have (platform, deployment,
    context) and a key made from them.

    Attributes:
        solutions_after_deadline: the reference solution opens for the course's students once
            their deadline has passed. On for courses an admin makes; off for courses made by
            LMS launches, since whoever can make an LMS course (a Canvas sandbox) could otherwise
            read any problem's reference by setting a past deadline. Only an admin changes it.
        peer_insight: a student's verdict panel may say how many others in the course made the
            same policy mistake and later fixed it (`server.problems.clusters.peers_who_fixed`). Off by
            default; the course's staff turn it on.
        board_names: a budget problem's class board (`server.store.boards`) shows students each
            other's display names; off (anonymous: a student sees only their own row named) by
            default; the course's staff decide.
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
    board_names: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())

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
    late_rule: Mapped[LateRule] = mapped_column(enum_column(LateRule, "assignment_late_rule"))
    penalty_per_day: Mapped[float] = mapped_column(Float, default=0.0)
    penalty_cap: Mapped[float] = mapped_column(Float, default=1.0)
    grace_minutes: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    grade_rule: Mapped[GradeRule] = mapped_column(enum_column(GradeRule, "assignment_grade_rule"))
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
    role: Mapped[CourseRole] = mapped_column(enum_column(CourseRole, "enrollment_role"))
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


def context_key(platform_id: int, deployment_id: str, context_id: str) -> str:
    """The key of an LMS context's course: `lti-` and 16 hex digits of SHA-256 of the three ids
    (the same for every process, so two first launches at once make one course)."""
    material = "\0".join((str(platform_id), deployment_id, context_id)).encode("utf-8")
    return "lti-" + hashlib.sha256(material).hexdigest()[:16]
