"""`CourseStore`, the one place that reads and writes courses, enrollments, LMS rosters,
assignments and extensions (the tables of `server.store.courses`), and reads the attempts
gradebooks are computed from (`server.courses.gradebook`).
"""

from __future__ import annotations

import json
from datetime import datetime

from sqlalchemy import delete, or_, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import sessionmaker

from server.store.accounts import UserRecord
from server.store.courses import (
    COURSE_KEY,
    Assignment,
    Attempt,
    Course,
    CourseError,
    CourseRole,
    Enrollment,
    Extension,
    GradeRule,
    LateRule,
    Listed,
    Policy,
    RosterMember,
    context_key,
)
from server.store.db import Base, rowcount, utcnow
from server.store.submissions import SubmissionRecord


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

    # -- what gradebooks read ---------------------------------------------------------------------

    def attempts(self, user_ids: list[int], problems: list[str]) -> dict[tuple[int, str], list[Attempt]]:
        """The submissions of `user_ids` on `problems` as the rules see them, by (user id, problem)."""
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

    def extensions_of(self, assignment_ids: list[int]) -> dict[tuple[int, int], datetime]:
        """The extensions on `assignment_ids`: (user id, assignment id) -> the student's deadline."""
        if not assignment_ids:
            return {}
        with self._sessions() as session:
            return {
                (e.user_id, e.assignment_id): e.due_at
                for e in session.execute(select(Extension).where(Extension.assignment_id.in_(assignment_ids))).scalars()
            }
