"""What instructors do to courses and problems, shared by the CLI (`remat-judge courses`,
`remat-judge problems regrade`) and the instructor pages, so both doors behave alike:

- change an assignment's rules or give an extension, then make the LMS passback of the students
  concerned pending (the sender recomputes each standing and sends only what changed);
- start a regrade of a problem (its package must load: a broken new version is refused before
  any verdict is touched).
"""

from __future__ import annotations

from datetime import UTC, datetime

from graders.problems.problem import ProblemRepository
from graders.problems.spec import ProblemError
from server.store.accounts import UserStore
from server.store.course_store import CourseStore
from server.store.courses import Assignment, Course, CourseError, CourseRole, Policy
from server.store.lms_grades import LmsGrades
from server.store.regrades import Regrade, RegradeStore


def parse_time(text: str | None, what: str) -> datetime | None:
    """An ISO 8601 time ("2026-12-01T23:59", "2026-12-01 23:59:00+01:00"); without an offset it is
    UTC. Empty or None: None.

    Raises:
        CourseError: not a time.
    """
    if text is None or not text.strip():
        return None
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise CourseError(
            f"{what}: {text!r} is not a time (ISO 8601, e.g. 2026-12-01T23:59, UTC unless an offset is given)"
        ) from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def change_assignment(
    courses: CourseStore, course: Course, problem: str, policy: Policy, problems: ProblemRepository, lms: LmsGrades
) -> Assignment:
    """Makes or changes `course`'s assignment of `problem`, then re-sends changed LMS grades.

    Raises:
        CourseError: the judge has no such problem.
    """
    try:
        problems.get(problem)
    except (KeyError, ProblemError):
        raise CourseError(f"the judge has no problem {problem!r}") from None
    assignment = courses.set_assignment(course.id, problem, policy)
    lms.standings_changed(course, problem)
    return assignment


def extend(
    courses: CourseStore, course: Course, problem: str, email: str, due_at: datetime, lms: LmsGrades
) -> Assignment:
    """Gives the student with `email` their own deadline on `course`'s assignment of `problem`,
    then re-sends their LMS grade if it changed.

    Raises:
        CourseError: no such assignment or account, or the account is not in the course.
    """
    assignment = courses.assignment(course.id, problem)
    if assignment is None:
        raise CourseError(f"the course {course.key!r} has no assignment {problem!r}")
    user = courses.member_by_email(course.id, email)  # the sign-in email, or the LMS's for LTI accounts
    if user is None:
        raise CourseError(f"nobody with the email {email!r} is in the course {course.key!r}")
    courses.extend(assignment.id, user.id, due_at)
    lms.standings_changed(course, problem, user_id=user.id)
    return assignment


def enroll(courses: CourseStore, users: UserStore, course: Course, email: str, role: str) -> None:
    """Enrolls the account with `email` as `role` (`CourseRole`: staff or student).

    Raises:
        CourseError: no such account, or an unknown role.
    """
    try:
        as_role = CourseRole(role)
    except ValueError:
        raise CourseError(f"a course role is staff or student, not {role!r}") from None
    user = users.by_email(email)
    if user is None:
        raise CourseError(f"no account with the email {email!r} (students sign up, or launch from the LMS)")
    courses.enroll(course.id, user.id, as_role)


def start_regrade(regrades: RegradeStore, problems: ProblemRepository, slug: str, requested_by: str) -> Regrade:
    """Re-queues every finished submission of `slug` (`RegradeStore.start`) once its package loads.

    Raises:
        CourseError: no such problem, or its package does not load (nothing is re-queued).
    """
    try:
        problem = problems.get(slug)
    except KeyError:
        raise CourseError(f"the judge has no problem {slug!r}") from None
    except ProblemError as exc:
        raise CourseError(f"the problem {slug!r} does not load, so nothing was re-queued: {exc}") from None
    return regrades.start(slug, problem_version=problem.version, requested_by=requested_by)
