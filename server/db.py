"""Persistence: the submissions table and the one place that reads and writes it (SQLAlchemy 2).

SQLite by default (WAL journal, so the API reads while a worker writes); any SQLAlchemy URL works
(PostgreSQL for scale-out). Every write is its own committed transaction: a crash loses at most
the submission being graded, which is graded again after a restart.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import DateTime, Float, Integer, String, Text, TypeDecorator, create_engine, event, func, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker


class Base(DeclarativeBase):
    pass


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored as naive UTC and read back timezone-aware (SQLite keeps no zone)."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: object) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime: use utcnow()")
        return value.astimezone(timezone.utc).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: object) -> datetime | None:
        return None if value is None else value.replace(tzinfo=timezone.utc)


class SubmissionRecord(Base):
    """One stored submission. `result_json` is the verdict JSON once graded (status "done")."""

    __tablename__ = "submissions"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    problem: Mapped[str] = mapped_column(String(64), index=True)
    problem_version: Mapped[str | None] = mapped_column(String(32), nullable=True)
    source: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), index=True)  # queued | running | done
    verdict: Mapped[str | None] = mapped_column(String(32), nullable=True)
    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    result_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


def _sqlite_pragmas(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


def make_engine(url: str) -> Engine:
    """An engine for `url`; for SQLite, creates the folder and sets WAL and a busy timeout."""
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False})
        event.listen(engine, "connect", _sqlite_pragmas)
    else:
        engine = create_engine(url, pool_pre_ping=True)
    Base.metadata.create_all(engine)
    return engine


class SubmissionStore:
    """All reads and writes of submissions. Thread-safe: one session per call."""

    def __init__(self, engine: Engine):
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def create(self, *, problem: str, source: str) -> SubmissionRecord:
        """Stores a new submission with status "queued"."""
        record = SubmissionRecord(id=uuid.uuid4().hex, problem=problem, source=source, status="queued",
                                  attempts=0, created_at=utcnow())
        with self._sessions.begin() as session:
            session.add(record)
        return record

    def get(self, submission_id: str) -> SubmissionRecord | None:
        with self._sessions() as session:
            return session.get(SubmissionRecord, submission_id)

    def mark_running(self, submission_id: str) -> SubmissionRecord | None:
        """Sets status "running" and counts an attempt; None when the id is unknown or done."""
        with self._sessions.begin() as session:
            record = session.get(SubmissionRecord, submission_id)
            if record is None or record.status == "done":
                return None
            record.status, record.started_at, record.attempts = "running", utcnow(), record.attempts + 1
            return record

    def finish(self, submission_id: str, *, verdict: str, score: float, problem_version: str | None,
               result_json: str) -> None:
        """Stores the verdict and sets status "done"."""
        with self._sessions.begin() as session:
            session.execute(update(SubmissionRecord).where(SubmissionRecord.id == submission_id).values(
                status="done", verdict=verdict, score=score, problem_version=problem_version,
                result_json=result_json, finished_at=utcnow()))

    def unfinished(self) -> list[str]:
        """Ids of submissions queued or running (e.g. when the server stopped), oldest first;
        running ones are set back to queued."""
        with self._sessions.begin() as session:
            session.execute(update(SubmissionRecord).where(SubmissionRecord.status == "running")
                            .values(status="queued"))
            rows = session.execute(select(SubmissionRecord.id).where(SubmissionRecord.status == "queued")
                                   .order_by(SubmissionRecord.created_at)).scalars()
            return list(rows)

    def count_by_status(self) -> dict[str, int]:
        with self._sessions() as session:
            rows = session.execute(select(SubmissionRecord.status, func.count()).group_by(SubmissionRecord.status))
            return {status: count for status, count in rows}
