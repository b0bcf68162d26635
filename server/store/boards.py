"""Class leaderboards of open (budget) problems: each student's best submission of a problem, ranked
by score and then by what its backward pass recomputes (less first: the grade is capped at 1, so two
policies within the budget that both reach the optimum's score are told apart by their measured
recomputation), with the point it makes on the memory/recompute plane (docs/ARCHITECTURE.md,
"Budget problems"). A course's board lists that course's students only; the admin's board everyone
with an account. Never a source: only the verdict's numbers."""

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
MAX_TIED_READ = 20  # of one student's submissions with their best score, the earliest read for their point


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
        peak: the budget counts the backward pass's peak.
        optimum_flops: the recomputation of the judge's optimum for the reported case (FLOPs;
            None without one). `beyond_optimum` is then whether this submission recomputes less:
            a program the optimum does not cover (it is over the schedules of the reference's
            program: an algebraic rewrite, a cheaper derivative, chunking), named on the board.
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
    optimum_flops: int | None = None

    @property
    def beyond_optimum(self) -> bool:
        return (
            self.recompute_flops is not None
            and self.optimum_flops is not None
            and (self.recompute_flops < self.optimum_flops)
        )

    def order(self) -> tuple[float, float, datetime, str]:
        """The board's order: higher score, then less recomputation (unknown last), then earlier."""
        flops = float(self.recompute_flops) if self.recompute_flops is not None else float("inf")
        return (-self.score, flops, self.submitted_at, self.submission_id)


def ranked(entries: list[BoardEntry]) -> list[tuple[int, BoardEntry]]:
    """(rank, entry) of a board, best first: equal scores with equal recomputation share a rank
    (1, 1, 3)."""
    out = []
    rank, last = 0, None
    for i, e in enumerate(entries, start=1):
        if (e.score, e.recompute_flops) != last:
            rank, last = i, (e.score, e.recompute_flops)
        out.append((rank, e))
    return out


@dataclass(frozen=True)
class _Point:
    nbytes: int | None = None
    flops: int | None = None
    peak: bool = False
    optimum_flops: int | None = None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _point(result_json: str | None) -> _Point:
    """What a stored verdict puts on the board: residual bytes (or the backward pass's peak on a
    budget of the peak), recompute FLOPs, the optimum's FLOPs; empty when it has no report."""
    if not result_json or len(result_json) > MAX_REPORT_CHARS:
        return _Point()
    try:
        residuals = json.loads(result_json).get("residuals") or {}
        optimum = residuals.get("optimum") or {}
        peak = residuals.get("budget_of") == "peak"
        return _Point(
            _int(residuals.get("submitted_bwd_peak_bytes" if peak else "submitted_bytes")),
            _int(residuals.get("submitted_recompute_flops")),
            peak,
            _int(optimum.get("flops")) if isinstance(optimum, dict) else None,
        )
    except (ValueError, AttributeError):
        return _Point()


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
        """Each student's best graded submission of `problem`, best first (`BoardEntry.order`): of
        the course's students when `course_id` is given, else of every account. Reads the columns
        it ranks by for every submission, and the stored verdicts of each student's submissions
        with their best score only (the earliest `MAX_TIED_READ`), for the least recomputation."""
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
        tied: dict[int, list[tuple[str, float, str, datetime, str]]] = {}
        with self._sessions() as session:
            for sid, user_id, score, verdict, created_at, name in session.execute(query):
                if user_id is None:
                    continue
                mine = tied.setdefault(user_id, [])
                if (not mine or float(score or 0.0) == mine[0][1]) and len(mine) < MAX_TIED_READ:
                    mine.append((sid, float(score or 0.0), verdict or "", created_at, name))
            ids = [t[0] for group in tied.values() for t in group]
            reports = {sid: text for sid, text in session.execute(select(s.id, s.result_json).where(s.id.in_(ids)))}
        out = []
        for user_id, group in tied.items():
            candidates = []
            for sid, score, verdict, created_at, name in group:
                p = _point(reports.get(sid))
                candidates.append(
                    BoardEntry(
                        user_id, name, sid, score, verdict, p.nbytes, p.flops, created_at, p.peak, p.optimum_flops
                    )
                )
            out.append(min(candidates, key=BoardEntry.order))
        return sorted(out, key=BoardEntry.order)

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
