"""Logging set-up: plain text, or one JSON object per line (python-json-logger) with the id of
the submission being handled, for log pipelines (`REMAT_JUDGE_LOG_FORMAT=json`)."""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
import time
from collections.abc import Iterator

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


class RepeatFilter(logging.Filter):
    """Lets a message through once per `window_s` for each (logger, level, message template):
    libraries that log every retry of an outage (Dramatiq's consumers log a connection error every
    few seconds each, its retries one line per message) say it once a window instead, and the
    next line that passes says how many were held back. Records with an exception always pass."""

    def __init__(self, window_s: float = 60.0, prefixes: tuple[str, ...] = ("dramatiq",)):
        super().__init__()
        self.window_s, self.prefixes = window_s, prefixes
        self._seen: dict[tuple[str, int, str], tuple[float, int]] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info or not record.name.startswith(self.prefixes):
            return True
        key = (record.name, record.levelno, str(record.msg))
        now = time.monotonic()
        with self._lock:
            last, held = self._seen.get(key, (float("-inf"), 0))
            if now - last < self.window_s:
                self._seen[key] = (last, held + 1)
                return False
            self._seen[key] = (now, 0)
            if len(self._seen) > 1000:  # templates are few; bound the table anyway
                self._seen.clear()
        if held:
            record.msg = f"{record.msg} ({held} more like this in the last {self.window_s:g} s)"
        return True


def configure(log_format: str = "text", level: int = logging.INFO) -> None:
    """Sets the root logger's one handler (stderr) to `log_format`: "text" or "json".

    JSON fields: time (ISO 8601), level, logger, message, submission_id (null outside a
    submission), process, and exc_info when an exception is logged.
    """
    handler = logging.StreamHandler()
    handler.addFilter(_SubmissionFilter())
    handler.addFilter(RepeatFilter())
    if log_format == "json":
        # the JSON formatter only when JSON logs are asked for
        from pythonjsonlogger.json import JsonFormatter

        handler.setFormatter(
            JsonFormatter(
                "%(asctime)s %(levelname)s %(name)s %(message)s %(submission_id)s %(process)d",
                rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            )
        )
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
