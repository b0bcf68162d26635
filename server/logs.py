"""Logging set-up: plain text, or one JSON object per line (python-json-logger) with the id of
the submission being handled, for log pipelines (`REMAT_JUDGE_LOG_FORMAT=json`)."""

from __future__ import annotations

import contextlib
import contextvars
import logging
from typing import Iterator

_SUBMISSION: contextvars.ContextVar[str | None] = contextvars.ContextVar("remat_submission_id", default=None)


@contextlib.contextmanager
def submission_context(submission_id: str) -> Iterator[None]:
    """Log records made inside carry `submission_id` (this thread or task only)."""
    token = _SUBMISSION.set(submission_id)
    try:
        yield
    finally:
        _SUBMISSION.reset(token)


class _SubmissionFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "submission_id"):
            record.submission_id = _SUBMISSION.get()
        return True


def configure(log_format: str = "text", level: int = logging.INFO) -> None:
    """Sets the root logger's one handler (stderr) to `log_format`: "text" or "json".

    JSON fields: time (ISO 8601), level, logger, message, submission_id (null outside a
    submission), process, and exc_info when an exception is logged.
    """
    handler = logging.StreamHandler()
    handler.addFilter(_SubmissionFilter())
    if log_format == "json":
        from pythonjsonlogger.json import JsonFormatter

        handler.setFormatter(JsonFormatter(
            "%(asctime)s %(levelname)s %(name)s %(message)s %(submission_id)s %(process)d",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"}))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
