"""Faults of the database that are not the request's (nor the submission's): recognised in one
place, answered 503 with Retry-After on every route (`server.app`'s exception handler), retried
by the grading loops, and logged once when an outage starts and once when it ends.

What counts (`is_database_fault`): SQLAlchemy's OperationalError and InterfaceError (the server
went away, refused the connection, restarted: "terminating connection due to administrator
command"; SQLite's "database is locked"), a pool time-out, any DBAPI error that invalidated its
connection, and the drivers' own connection errors. Not: integrity or data errors, which are
bugs or the request's fault.
"""

from __future__ import annotations

import logging
import threading
import time

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.pool import NullPool

RETRY_AFTER_S = 5
MESSAGE = "the judge's database is unavailable right now; nothing was changed, try again in a few seconds"
PAGE = (
    '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Try again in a moment · remat-judge'
    "</title></head><body><h1>Try again in a moment</h1><p>The judge cannot reach its database right now; "
    "nothing was changed. Reload this page in a few seconds.</p></body></html>"
)


def _fault_types() -> tuple[type[Exception], ...]:
    types: list[type[Exception]] = [OperationalError, InterfaceError, PoolTimeout, DBAPIError]
    try:
        # the PostgreSQL driver only where PostgreSQL is used: SQLite deployments never load it
        import psycopg

        types += [psycopg.OperationalError, psycopg.InterfaceError]
    except ImportError:  # pragma: no cover - psycopg is a dependency
        pass
    return tuple(types)


FAULT_TYPES = _fault_types()  # the exception classes `is_database_fault` looks into (the app's handlers)


def is_database_fault(exc: BaseException) -> bool:
    """Whether `exc` is the database being unreachable or restarting (see the module)."""
    if isinstance(exc, (OperationalError, InterfaceError, PoolTimeout)):
        return True
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    try:
        # the PostgreSQL driver only where PostgreSQL is used: SQLite deployments never load it
        import psycopg
    except ImportError:  # pragma: no cover - psycopg is a dependency
        return False
    return isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))


class Outage:
    """One dependency's outage as the log tells it: a warning when the first failure comes, then
    silence (failures counted), a reminder each `remind_s` while it lasts, and one line when a
    success ends it, with how long it lasted and how many failures it caused. Thread-safe.

    Args:
        what: the dependency ("database", "queue").
        logger: where to log.
        remind_s: seconds between "still unavailable" lines.
    """

    def __init__(self, what: str, logger: logging.Logger, *, remind_s: float = 60.0):
        self.what, self.logger, self.remind_s = what, logger, remind_s
        self._lock = threading.Lock()
        self._since: float | None = None
        self._failures = 0
        self._reminded = 0.0

    @property
    def ongoing(self) -> bool:
        return self._since is not None

    def failed(self, exc: BaseException, where: str = "") -> None:
        """Counts a failure; logs the first of an outage, and a reminder every `remind_s`."""
        now = time.monotonic()
        with self._lock:
            self._failures += 1
            if self._since is None:
                self._since, self._reminded = now, now
                first = True
            elif now - self._reminded >= self.remind_s:
                self._reminded = now
                first = False
            else:
                return
            failures, since = self._failures, self._since
        reason = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}"
        if first:
            self.logger.warning(
                "%s unavailable%s (%s); retrying, and saying so once it is back",
                self.what,
                f" ({where})" if where else "",
                reason,
            )
        else:
            self.logger.warning(
                "%s still unavailable after %.0f s (%d failures so far)", self.what, now - since, failures
            )

    def recovered(self) -> None:
        """Ends the outage, if one is going on, with one line. Cheap when there is none."""
        if self._since is None:
            return
        with self._lock:
            if self._since is None:
                return
            took_s, failures = time.monotonic() - self._since, self._failures
            self._since, self._failures = None, 0
        self.logger.warning(
            "%s available again after %.1f s (%d failure%s)", self.what, took_s, failures, "" if failures == 1 else "s"
        )


_log = logging.getLogger("remat_judge.database")
DATABASE = Outage("database", _log)  # this process's view of the database


def _where(url: str) -> str:
    """host:port/name of a database URL, without its user or password."""
    try:
        parsed = make_url(url)
    except Exception:  # noqa: BLE001 - only for a log line
        return "the database"
    if parsed.drivername.startswith("sqlite"):
        return parsed.database or "SQLite"
    return f"{parsed.host or 'localhost'}:{parsed.port or 5432}/{parsed.database or ''}"


def wait_for_database(url: str, *, max_delay_s: float = 10.0, stop: threading.Event | None = None) -> float:
    """Blocks until the database at `url` answers `SELECT 1` (a server or worker starting while
    PostgreSQL is down or restarting waits instead of exiting with a traceback). Tries again
    after 0.5 s, doubling up to `max_delay_s`; logs once when it starts waiting and once when the
    database answers. SQLite files answer at once.

    Returns:
        Seconds waited.

    Raises:
        What connecting raises that is not a database fault (a wrong driver, a bad URL), and
        InterruptedError when `stop` is set while waiting.
    """
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    connect_args = {"connect_timeout": 5} if url.startswith("postgresql") else {}
    engine = create_engine(url, poolclass=NullPool, connect_args=connect_args)
    started, delay_s, tries = time.monotonic(), 0.5, 0
    try:
        while True:
            tries += 1
            try:
                with engine.connect() as connection:
                    connection.execute(text("SELECT 1"))
            except Exception as exc:
                if not is_database_fault(exc):
                    raise
                if tries == 1:
                    _log.warning(
                        "waiting for the database at %s (%s: %s); trying again every %g s at most",
                        _where(url),
                        type(exc).__name__,
                        str(exc).strip().splitlines()[0][:200] if str(exc).strip() else "",
                        max_delay_s,
                    )
                if stop is not None and stop.wait(delay_s):
                    raise InterruptedError("stopped while waiting for the database") from None
                if stop is None:
                    time.sleep(delay_s)
                delay_s = min(max_delay_s, delay_s * 2)
                continue
            waited = time.monotonic() - started
            if tries > 1:
                _log.warning("the database at %s answers, after %.1f s (%d tries)", _where(url), waited, tries)
            return waited
    finally:
        engine.dispose()
