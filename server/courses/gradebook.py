"""Gradebooks: students x assignments of a course, each cell the student's standing
(`server.courses.rules.standing`) computed from the stored verdicts now, so regrades, new
deadlines and extensions show at once; and the CSV instructors download."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from datetime import datetime

from server.courses.rules import Standing, standing
from server.store.accounts import UserRecord
from server.store.course_store import CourseStore
from server.store.courses import Assignment, Course, CourseRole, Policy, RosterMember

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


def standing_of(courses: CourseStore, user_id: int, problem: str, assignment: Assignment | None) -> Standing:
    """A user's standing on an assignment (`assignment` None: the default rules, for a
    resource link outside any course)."""
    attempts = courses.attempts([user_id], [problem]).get((user_id, problem), [])
    if assignment is None:
        return standing(attempts, Policy())
    return standing(attempts, assignment.policy(), extension_due_at=courses.extension(assignment.id, user_id))


def gradebook(courses: CourseStore, course: Course) -> Gradebook:
    """Students x assignments of `course`, computed from the stored verdicts now."""
    assignments = courses.assignments(course.id)
    students = courses.members(course.id, CourseRole.STUDENT)
    ids = [s.id for s in students]
    attempts = courses.attempts(ids, [a.problem for a in assignments])
    extensions = courses.extensions_of([a.id for a in assignments])
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
    roster = courses.roster(course.id)
    enrolled = {m.id for m in courses.members(course.id)}
    unlaunched = [m for m in roster if m.active and not m.staff and (m.user_id is None or m.user_id not in enrolled)]
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
