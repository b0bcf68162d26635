"""Outages in the logs: `server.store.faults.Outage` says an outage once when it starts, reminds while
it lasts, and says once when it ends; `server.platform.logs.RepeatFilter` holds back a library's repeated
lines within a window and says how many it held."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy.exc import IntegrityError, OperationalError

from server.platform.logs import RepeatFilter
from server.store.faults import Outage, is_database_fault


def test_an_outage_is_said_when_it_starts_and_when_it_ends(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("test.outage")
    caplog.set_level(logging.WARNING, logger="test.outage")
    outage = Outage("database", logger, remind_s=3600)
    outage.recovered()  # no outage: nothing said
    error = OperationalError("SELECT 1", {}, Exception("connection refused"))
    for _ in range(50):
        outage.failed(error, where="POST /api/v1/submissions")
    assert outage.ongoing
    outage.recovered()
    outage.recovered()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0].startswith("database unavailable (POST /api/v1/submissions) (OperationalError")
    assert lines[1].startswith("database available again after") and "(50 failures)" in lines[1]


def test_database_faults_are_told_from_bugs() -> None:
    assert is_database_fault(OperationalError("SELECT 1", {}, Exception("server closed the connection")))
    assert not is_database_fault(IntegrityError("INSERT", {}, Exception("duplicate key")))
    assert not is_database_fault(ValueError("a bug"))


def test_repeated_library_lines_are_held_back_and_counted() -> None:
    held = RepeatFilter(window_s=3600)

    def record(name: str, msg: str, *args: object) -> logging.LogRecord:
        return logging.LogRecord(name, logging.CRITICAL, __file__, 1, msg, args, None)

    template = "Consumer encountered a connection error: %s"
    passed = [held.filter(record("dramatiq.consumer", template, f"Error 111 #{i}")) for i in range(20)]
    assert passed == [True] + [False] * 19
    assert held.filter(record("server.grading.grader", template, "ours")) is True  # only the named libraries
    held.window_s = 0
    last = record("dramatiq.consumer", template, "again")
    assert held.filter(last) and "(19 more like this" in last.getMessage()
