"""Class leaderboards of open (budget) problems: each student's best submission of a problem, ranked
by score, with the point it makes on the memory/recompute plane (docs/ARCHITECTURE.md, "Budget
problems"). A course's board lists that course's students only; the admin's board everyone with an
account. Never a source: only the verdict's numbers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, select, update
from sqlalchemy.orm import sessionmaker

from server.store.accounts import UserRecord
from server.store.courses import Course, CourseRole, Enrollment
from server.store.submissions import SubmissionRecord, SubmissionStatus

MAX_REPORT_CHARS = 2_000_000  # a stored verdict larger than this is not read for its point


@dataclass(frozen=True)
class BoardEntry:
    """One student's best submission of a problem.

    Attributes:
        user_id, display_name: the account.
        submission_id: the best submission (the highest score; the earliest among equals).
        score: its score in [0, 1]; verdict: its verdict's name.
        memory_bytes: what its policy keeps (bytes of residuals) or, on a budget of the backward
            pass's peak (`peak`), that peak (bytes); recompute_flops: what its backward pass
            recomputes (FLOPs); both from its verdict's residual report (None when it has none).
        submitted_at: when it was stored (UTC).
    """

    user_id: int
    display_name: str
    submission_id: str
    score: float
    verdict: str
    memory_bytes: int | None
    recompute_flops: int | None
    submitted_at: datetime
    peak: bool = False


def ranked(entries: list[BoardEntry]) -> list[tuple[int, BoardEntry]]:
    """(rank, entry) of a board, best first: equal scores share a rank (1, 1, 3)."""
    out = []
    rank, last = 0, None
    for i, e in enumerate(entries, start=1):
        if e.score != last:
            rank, last = i, e.score
        out.append((rank, e))
    return out


def _point(result_json: str | None) -> tuple[int | None, int | None, bool]:
    """(residual bytes, or the backward pass's peak on a budget of the peak; recompute FLOPs;
    whether it is the peak) of a stored verdict, or Nones when it has no report."""
    if not result_json or len(result_json) > MAX_REPORT_CHARS:
        return None, None, False
    try:
        residuals = json.loads(result_json).get("residuals") or {}
    except (ValueError, AttributeError):
        return None, None, False
    peak = residuals.get("budget_of") == "peak"
    nbytes = residuals.get("submitted_bwd_peak_bytes" if peak else "submitted_bytes")
    flops = residuals.get("submitted_recompute_flops")
    return (
        int(nbytes) if isinstance(nbytes, int) else None,
        int(flops) if isinstance(flops, int) else None,
        peak,
    )


class BoardStore:
    """Reads boards and keeps each course's board setting."""

    def __init__(self, engine: Engine):
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def set_board_names(self, course_id: int, value: bool) -> None:
        """Whether the course's board shows its students each other's display names."""
        with self._sessions.begin() as session:
            session.execute(
                update(Course)
                .where(Course.id == course_id)
                .values(board_names=value)
                .execution_options(synchronize_session=False)
            )

    def board(self, problem: str, course_id: int | None = None) -> list[BoardEntry]:
        """Each student's best graded submission of `problem`, best first (score, then earliest):
        of the course's students when `course_id` is given, else of every account. Reads the
        columns it ranks by for every submission, and the stored verdict of the best ones only."""
        s = SubmissionRecord
        query = (
            select(s.id, s.user_id, s.score, s.verdict, s.created_at, UserRecord.display_name)
            .join(UserRecord, UserRecord.id == s.user_id)
            .where(s.problem == problem, s.status == SubmissionStatus.DONE, s.score.is_not(None))
            .order_by(s.score.desc(), s.created_at, s.id)
        )
        if course_id is not None:
            students = select(Enrollment.user_id).where(
                Enrollment.course_id == course_id, Enrollment.role == CourseRole.STUDENT
            )
            query = query.where(s.user_id.in_(students))
        best: dict[int, tuple[str, float, str, datetime, str]] = {}
        with self._sessions() as session:
            for sid, user_id, score, verdict, created_at, name in session.execute(query):
                if user_id is not None and user_id not in best:
                    best[user_id] = (sid, float(score or 0.0), verdict or "", created_at, name)
            ids = [b[0] for b in best.values()]
            reports = {sid: text for sid, text in session.execute(select(s.id, s.result_json).where(s.id.in_(ids)))}
        out = []
        for user_id, (sid, score, verdict, created_at, name) in best.items():
            nbytes, flops, peak = _point(reports.get(sid))
            out.append(BoardEntry(user_id, name, sid, score, verdict, nbytes, flops, created_at, peak))
        return out

    def frontier(self, submission_id: str) -> tuple[list[dict[str, Any]], int | None]:
        """A graded submission's budget-problem frontier and budget (`ResidualReport.frontier`,
        `budget_bytes`): what the board draws the class's points against; ([], None) without."""
        with self._sessions() as session:
            text = session.execute(
                select(SubmissionRecord.result_json).where(SubmissionRecord.id == submission_id)
            ).scalar_one_or_none()
        if not text or len(text) > MAX_REPORT_CHARS:
            return [], None
        try:
            residuals = json.loads(text).get("residuals") or {}
        except (ValueError, AttributeError):
            return [], None
        frontier = residuals.get("frontier")
        budget = residuals.get("budget_bytes")
        return (frontier if isinstance(frontier, list) else []), (budget if isinstance(budget, int) else None)
