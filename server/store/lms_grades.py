"""What a course asks of the LMS side of its grades, without knowing LTI: `server.courses.admin`
calls it, `server.store.lti_passback.LtiCourseGrades` implements it, and the container
(`server.services.Services.lms_grades`) holds it, so it lives below all three (LTI may use
`server.courses`; the reverse import is forbidden by a contract in pyproject.toml).

The composition root (`server.runtime`) gives the app `LtiCourseGrades`; the CLI makes its own; a
judge without LTI, or a test, gets `NoLms`.
"""

from __future__ import annotations

from typing import Protocol

from server.store.courses import Course


class LmsGrades(Protocol):
    """The LMS passback of a course's grades."""

    def standings_changed(self, course: Course, problem: str, user_id: int | None = None) -> int:
        """The rules of `course`'s assignment of `problem` changed (deadline, late rule, grade
        rule, or an extension of `user_id`): its students' LMS grades become pending, so the
        sender recomputes each standing and sends what changed. Returns how many became pending."""
        ...

    def undelivered(self, course: Course) -> dict[tuple[int, str], tuple[str, str]]:
        """The course's grades that did not reach the LMS: {(user id, problem): (status, reason)}."""
        ...


class NoLms:
    """A course without an LMS: nothing to send, nothing undelivered."""

    def standings_changed(self, course: Course, problem: str, user_id: int | None = None) -> int:
        return 0

    def undelivered(self, course: Course) -> dict[tuple[int, str], tuple[str, str]]:
        return {}
