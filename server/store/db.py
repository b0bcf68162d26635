"""Persistence's base: the engine, timestamps and the rules every table of the judge follows
(SQLAlchemy 2). The tables themselves are in the modules of `server.store`, one per aggregate.

SQLite by default (WAL journal, so the API reads while a worker writes); PostgreSQL (psycopg 3)
for scale-out. The schema is made and changed by Alembic migrations only (`server/store/migrations/`,
applied by `server.store.migrate.upgrade`). Every write is its own committed transaction.

The database is the source of truth for grading: a submission is stored (status "queued") before
its job is enqueued; a worker claims it with one conditional UPDATE (`claim`), holds a lease it
renews while grading, and stores the verdict only while it still holds the claim (`finish`). A
job delivered twice is graded once; a claim whose lease ran out (its worker died) can be taken
over; after `max_attempts` claims the submission ends "failed" with an INTERNAL_ERROR verdict
(`server.store.submissions.LeaseStore`).
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from sqlalchemy import (
    DateTime,
    Enum,
    TypeDecorator,
    create_engine,
    event,
)
from sqlalchemy.engine import CursorResult, Engine, Result
from sqlalchemy.orm import DeclarativeBase

from server.store.faults import DATABASE


class Base(DeclarativeBase):
    """The declarative base of every table of the judge (`Base.metadata`: the schema the
    migrations must match)."""


def utcnow() -> datetime:
    """Now, timezone-aware UTC: the only kind of time the tables store (`UTCDateTime`)."""
    return datetime.now(UTC)


def rowcount(result: Result[Any]) -> int:
    """The rows an UPDATE or DELETE matched. `Session.execute` is typed to return a plain `Result`;
    for DML it is a `CursorResult`, which has the count (SQLAlchemy 2 docs, "Getting Affected Row
    Count from UPDATE, DELETE")."""
    return cast("CursorResult[Any]", result).rowcount


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored as naive UTC and read back timezone-aware (SQLite keeps no zone)."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: object) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime: use utcnow()")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: object) -> datetime | None:
        return None if value is None else value.replace(tzinfo=UTC)


def enum_column(kind: type[enum.Enum], name: str) -> Enum:
    """A string column restricted to `kind`'s values by a CHECK constraint: the same DDL on SQLite
    and PostgreSQL (no native PostgreSQL enum type to migrate)."""
    return Enum(
        kind,
        name=name,
        native_enum=False,
        create_constraint=True,
        length=16,
        validate_strings=True,
        values_callable=lambda members: [m.value for m in members],
    )


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


def make_engine(url: str) -> Engine:
    """An engine for `url` (no schema change: see `server.store.migrate`). For SQLite, creates the folder
    and sets WAL and a busy timeout; `postgresql://` URLs use psycopg 3 (connections checked before
    use, 5 s to connect). Each new connection ends an outage this process logged
    (`server.store.faults.DATABASE`)."""
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False})
        event.listen(engine, "connect", _sqlite_pragmas)
    else:
        if url.startswith("postgresql://"):
            url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
        # a host that does not answer fails a connection in 5 s instead of hanging a request
        engine = create_engine(
            url, pool_pre_ping=True, pool_size=10, max_overflow=20, connect_args={"connect_timeout": 5}
        )
    event.listen(engine, "connect", _database_back)
    return engine


def _database_back(*_: object) -> None:
    """A new connection was made: an outage the process was in is over (logged once)."""
    DATABASE.recovered()


def aware(value: datetime | None) -> datetime | None:
    """A timestamp from an aggregate (MIN/MAX bypass the column type on SQLite: naive UTC, maybe
    a string) as timezone-aware UTC."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
