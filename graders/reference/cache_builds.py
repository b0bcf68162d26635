"""One build of a cache entry at a time, and the record of every build.

A version's expectations are built in a verifier child (`graders.reference.build`): the child of
a submission or of a child started ahead, a reference check (validation, and so every publish),
the server's warm-up at start (`server.grading.warm_expectations`). Two of them that need the same
missing entry at once would each build it (the rename keeps one). So a builder holds an exclusive
lock on `<entry>.lock` (`flock`, released by the kernel when its holder dies) while it checks,
builds and writes the entry; one that finds the lock held waits, then reads what the other wrote.

Every build appends one line to `<cache root>/builds.jsonl` (`BUILDS_FILE`): when, the entry, the
seconds it took, its outcome and the builder's pid. An operator reads there when each version was
built; tests count the builds there (a version is built once).
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from graders.reference.expectation import Expectations
from graders.reference.expectation_files import is_current, load_expectations, save_expectations
from graders.reference.failures import CACHED_FAILURES, ReferenceCheckError, record_failure, recorded_failure

log = logging.getLogger(__name__)
BUILDS_FILE = "builds.jsonl"  # at the cache's root: one JSON object per build


def lock_path(directory: Path) -> Path:
    """The build lock of the cache entry at `directory`: beside it (never removed, so every
    builder locks the same file)."""
    return directory.with_name(directory.name + ".lock")


@contextlib.contextmanager
def exclusive(directory: Path) -> Iterator[None]:
    """Holds the build lock of the entry at `directory`, waiting while another process (or
    thread) holds it. A lock that cannot be made (a read-only cache) is not taken, said at WARNING:
    builders then may build the same entry at once, as they would without the lock."""
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock_path(directory), os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        log.warning("cannot lock the expectations entry %s (building without the lock): %s", directory, exc)
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def needs_build(directory: Path) -> bool:
    """Whether the entry at `directory` is missing for this install (`is_current`: from its
    `meta.json` alone) and no failure of its reference is recorded beside it (such a version is
    not built again)."""
    return not is_current(directory) and recorded_failure(directory) is None


def note_build(directory: Path, seconds: float, outcome: str) -> None:
    """Appends the record of one build of the entry at `directory` to its cache's `BUILDS_FILE`
    (one write in append mode; a journal that cannot be written is said at WARNING, nothing else).

    Args:
        directory: the entry (`<cache root>/<slug>/<version>-<seed id>`).
        seconds: wall seconds the build took.
        outcome: "built", "failed: <self-check>" or "error: <exception type>".
    """
    record = {
        "at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "slug": directory.parent.name,
        "entry": directory.name,
        "seconds": round(seconds, 3),
        "outcome": outcome,
        "pid": os.getpid(),
    }
    try:
        directory.parent.parent.mkdir(parents=True, exist_ok=True)
        with open(directory.parent.parent / BUILDS_FILE, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
    except OSError as exc:
        log.warning("cannot record the build of %s: %s", directory, exc)


def recorded_builds(cache_root: Path) -> list[dict[str, Any]]:
    """Every build recorded under `cache_root` (`note_build`), oldest first; [] when none (a
    malformed line is left out)."""
    try:
        lines = (cache_root / BUILDS_FILE).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict):
                found.append(record)
    return found


def cached_or_built(directory: Path, build: Callable[[], Expectations]) -> Expectations:
    """The expectations cached at `directory`; when missing, built by `build()` and stored, under
    the entry's lock (a builder of the same entry in another process finishes first, and its
    result is read instead).

    Raises:
        ReferenceCheckError: the reference failed a self-check, now or when this version was built
            before (`recorded_failure`: not built again).
        Whatever `build` raises otherwise.
    """
    found = load_expectations(directory)
    if found is not None:
        return found
    with exclusive(directory):
        found = load_expectations(directory)  # built meanwhile by the lock's previous holder
        if found is not None:
            return found
        failed = recorded_failure(directory)
        if failed is not None:
            raise failed
        shutil.rmtree(directory, ignore_errors=True)  # stale (another format or JAX version) or unreadable
        return _build_and_keep(directory, build)


def _build_and_keep(directory: Path, build: Callable[[], Expectations]) -> Expectations:
    """Runs `build`, records the build, and stores its result at `directory` (a failure the
    package alone explains is recorded beside it instead).

    Raises:
        ReferenceCheckError: the reference failed a self-check. Whatever `build` raises otherwise.
    """
    started = time.monotonic()
    try:
        built = build()
    except ReferenceCheckError as failure:
        note_build(directory, time.monotonic() - started, f"failed: {failure.check}")
        if all(check in CACHED_FAILURES for check, _ in failure.failures):
            record_failure(directory, failure)
        raise
    except Exception as exc:
        note_build(directory, time.monotonic() - started, f"error: {type(exc).__name__}")
        raise
    note_build(directory, time.monotonic() - started, "built")
    try:
        save_expectations(built, directory)
    except OSError as exc:  # a cache we cannot write costs time, not correctness
        log.warning("cannot cache the expectations of %s in %s: %s", built.slug, directory, exc)
    return built
