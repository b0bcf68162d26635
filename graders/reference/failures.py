"""What a reference that fails is: `ReferenceSolutionError`, `ReferenceCheckError` (one of
`SELF_CHECKS` failed), and the record of a failed self-check kept beside a version's cache entry
(`<entry>.failed.json`), so a version whose reference fails is not rebuilt for every submission.

The self-checks themselves are in `graders.reference.self_checks`; the build that runs them is
`graders.reference.build`.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from graders.atomic_files import replace_atomically

log = logging.getLogger(__name__)


class ReferenceSolutionError(Exception):
    """The reference solution could not be exported or run: a fault of the problem (INTERNAL_ERROR)."""


SELF_CHECKS = ("finite_difference", "deterministic", "time_limit", "memory_limit", "runtime_error")


class ReferenceCheckError(ReferenceSolutionError):
    """The reference failed self-checks: a fault of the problem's author.

    Attributes:
        failures: (check, message) per failed self-check, `check` one of `SELF_CHECKS` and
            `message` what went wrong, for the author (naming the `[limits]` key to raise where one
            applies). The determinism and finite-difference checks both run before this is raised.
        check, message: the first failure's.
    """

    def __init__(self, check: str, message: str, *, more: list[tuple[str, str]] | None = None):
        self.failures = [(check, message), *(more or [])]
        assert all(c in SELF_CHECKS for c, _ in self.failures), self.failures
        super().__init__("\n".join(f"reference.py: {c}: {m}" for c, m in self.failures))
        self.check, self.message = check, message


def failure_path(directory: Path) -> Path:
    """Where a version's failed self-check is kept: beside its cache entry."""
    return directory.with_name(directory.name + ".failed.json")


# self-checks whose failure depends on the package alone (not on how busy the machine is): cached
CACHED_FAILURES = ("finite_difference", "deterministic", "memory_limit", "runtime_error")


def recorded_failure(directory: Path) -> ReferenceCheckError | None:
    """The self-check failure recorded for the entry at `directory`, or None."""
    try:
        data = json.loads(failure_path(directory).read_text(encoding="utf-8"))
        failures = [(str(f["check"]), str(f["message"])) for f in data["failures"]]
        return ReferenceCheckError(*failures[0], more=failures[1:])
    except (OSError, ValueError, KeyError, TypeError, AssertionError):
        return None


def record_failure(directory: Path, failure: ReferenceCheckError) -> None:
    """Keeps `failure` beside the entry at `directory` (`replace_atomically`; a cache we cannot
    write costs time, not correctness: a failed write is logged, not raised, and leaves no
    temporary file)."""
    path = failure_path(directory)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps({"failures": [{"check": c, "message": m} for c, m in failure.failures]})
        replace_atomically(path, data.encode("utf-8"))
    except OSError as exc:
        log.warning("cannot record the reference failure of %s: %s", directory, exc)
