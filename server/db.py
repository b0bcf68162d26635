"""Persistence: the submissions table and the one place that reads and writes it (SQLAlchemy 2).

SQLite by default (WAL journal, so the API reads while a worker writes); any SQLAlchemy URL works
(PostgreSQL for scale-out). Every write is its own committed transaction: a crash loses at most
the submission being graded, which is graded again after a restart.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import (DateTime, Float, ForeignKey, Integer, String, Text, TypeDecorator, create_engine, event, func,
                        inspect, select, update)
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker


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


class UserRecord(Base):
    """An account of the web judge. `password_hash` is an argon2 hash (pwdlib); role is
    "student" or "instructor"."""

    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    email: Mapped[str] = mapped_column(String(254), unique=True, index=True)
    display_name: Mapped[str] = mapped_column(String(80))
    password_hash: Mapped[str] = mapped_column(String(255))
    role: Mapped[str] = mapped_column(String(16), default="student")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class SubmissionRecord(Base):
    """One stored submission. `result_json` is the verdict JSON once graded (status "done");
    `user_id` is set for submissions made through the web pages, None for API submissions."""

    __tablename__ = "submissions"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    user_id: Mapped[int | None] = mapped_column(Integer, ForeignKey("users.id"), nullable=True, index=True)
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
    _add_missing_columns(engine)
    return engine


def _add_missing_columns(engine: Engine) -> None:
    """Adds columns that newer versions of the tables have to a database made by an older one
    (additive only: nothing stored is dropped or rewritten)."""
    inspector = inspect(engine)
    with engine.begin() as connection:
        for table in Base.metadata.sorted_tables:
            present = {c["name"] for c in inspector.get_columns(table.name)}
            for column in table.columns:
                if column.name not in present:
                    kind = column.type.compile(dialect=engine.dialect)
                    connection.exec_driver_sql(f'ALTER TABLE {table.name} ADD COLUMN "{column.name}" {kind}')


class SubmissionStore:
    """All reads and writes of submissions. Thread-safe: one session per call."""

    def __init__(self, engine: Engine):
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def create(self, *, problem: str, source: str, user_id: int | None = None) -> SubmissionRecord:
        """Stores a new submission with status "queued"."""
        record = SubmissionRecord(id=uuid.uuid4().hex, problem=problem, source=source, status="queued",
                                  attempts=0, created_at=utcnow(), user_id=user_id)
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

    def for_user(self, user_id: int, *, problem: str | None = None, limit: int = 100) -> list[SubmissionRecord]:
        """A user's submissions, newest first."""
        query = select(SubmissionRecord).where(SubmissionRecord.user_id == user_id)
        if problem is not None:
            query = query.where(SubmissionRecord.problem == problem)
        with self._sessions() as session:
            return list(session.execute(query.order_by(SubmissionRecord.created_at.desc()).limit(limit)).scalars())

    def solved(self, user_id: int) -> set[str]:
        """Slugs of the problems the user has an ACCEPTED submission for."""
        with self._sessions() as session:
            rows = session.execute(select(SubmissionRecord.problem).where(
                SubmissionRecord.user_id == user_id, SubmissionRecord.verdict == "ACCEPTED").distinct())
            return set(rows.scalars())

    def recent(self, *, problem: str | None = None, limit: int = 200) -> list[tuple[SubmissionRecord, str | None]]:
        """The newest submissions of everyone (with the author's email, None for API ones)."""
        query = select(SubmissionRecord, UserRecord.email).outerjoin(UserRecord, SubmissionRecord.user_id == UserRecord.id)
        if problem is not None:
            query = query.where(SubmissionRecord.problem == problem)
        with self._sessions() as session:
            return [(r, email) for r, email in session.execute(
                query.order_by(SubmissionRecord.created_at.desc()).limit(limit)).all()]

    def verdict_counts(self) -> dict[str, dict[str, int]]:
        """Per problem slug, how many submissions got each verdict (status "done" only)."""
        with self._sessions() as session:
            rows = session.execute(select(SubmissionRecord.problem, SubmissionRecord.verdict, func.count())
                                   .where(SubmissionRecord.status == "done")
                                   .group_by(SubmissionRecord.problem, SubmissionRecord.verdict))
            out: dict[str, dict[str, int]] = {}
            for slug, verdict, count in rows:
                out.setdefault(slug, {})[verdict] = count
            return out


class UserStore:
    """Reads and writes accounts. Emails are stored lower-cased."""

    def __init__(self, engine: Engine):
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def create(self, *, email: str, display_name: str, password_hash: str, role: str = "student") -> UserRecord:
        """Stores a new account.

        Raises:
            ValueError: the email is taken.
        """
        from sqlalchemy.exc import IntegrityError

        record = UserRecord(email=email.lower(), display_name=display_name, password_hash=password_hash, role=role,
                            created_at=utcnow())
        try:
            with self._sessions.begin() as session:
                session.add(record)
        except IntegrityError:
            raise ValueError(f"an account for {email} exists already") from None
        return record

    def by_email(self, email: str) -> UserRecord | None:
        with self._sessions() as session:
            return session.execute(select(UserRecord).where(UserRecord.email == email.lower())).scalar_one_or_none()

    def get(self, user_id: int) -> UserRecord | None:
        with self._sessions() as session:
            return session.get(UserRecord, user_id)

    def set_role(self, email: str, role: str) -> bool:
        """Sets an account's role; False when there is no such account."""
        with self._sessions.begin() as session:
            result = session.execute(update(UserRecord).where(UserRecord.email == email.lower()).values(role=role))
            return result.rowcount > 0

    def all(self) -> list[UserRecord]:
        with self._sessions() as session:
            return list(session.execute(select(UserRecord).order_by(UserRecord.created_at)).scalars())

    def update_password_hash(self, user_id: int, password_hash: str) -> None:
        with self._sessions.begin() as session:
            session.execute(update(UserRecord).where(UserRecord.id == user_id).values(password_hash=password_hash))
