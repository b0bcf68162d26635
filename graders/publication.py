"""Whether students see a problem: the `.published` marker in its package folder, and the TODOs
that keep a package from being published.

A package is published when its folder holds `.published`, whose one line is the version
(`Problem.version`) that `remat-judge problems publish` validated. Students, API clients and LTI
deep linking see published problems only; instructors see and grade every problem.

A package changed after it was published (its version is no longer the marker's) stays
published, so a course problem never vanishes from students mid-course, but `problems list`
flags it until it is published again (validated again).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

MARKER = ".published"
# the files students read (and the spec and reference they are judged by): a TODO left in any of
# them means the package is not finished
TODO_FILES = ("problem.toml", "statement.md", "starter.py", "reference.py", "hints.md")
TODO_RE = re.compile(r"\bTODO\b")


@dataclass(frozen=True)
class Publication:
    """The published state of one package.

    Attributes:
        published_version: the version recorded by the last `publish`, or None when unpublished.
        version: the package's version now.
    """

    published_version: str | None
    version: str

    @property
    def published(self) -> bool:
        return self.published_version is not None

    @property
    def changed(self) -> bool:
        """Published, but the package changed since (not validated in this version)."""
        return self.published_version is not None and self.published_version != self.version


def published_version(root: Path) -> str | None:
    """The version the marker of the package at `root` records, or None when it is unpublished."""
    try:
        text = (root / MARKER).read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return None
    return text.strip() or "unknown"


def publication(root: Path, version: str) -> Publication:
    """The published state of the package at `root` whose current version is `version`."""
    return Publication(published_version=published_version(root), version=version)


def mark_published(root: Path, version: str) -> None:
    """Writes the marker of the package at `root`, recording `version` (atomically: a reader sees
    the old marker or the new one)."""
    temporary = root / f"{MARKER}.{os.getpid()}.tmp"
    temporary.write_text(version + "\n", encoding="utf-8")
    temporary.replace(root / MARKER)


def mark_unpublished(root: Path) -> bool:
    """Removes the marker of the package at `root`; False when it was not published."""
    try:
        (root / MARKER).unlink()
    except FileNotFoundError:
        return False
    return True


def todos(root: Path) -> list[str]:
    """Every line with a `TODO` in the package's statement, starter, reference, problem.toml and
    hints, as `file:line: text` (the scaffold of `problems new` leaves them until each is written)."""
    found = []
    for name in TODO_FILES:
        path = root / name
        if not path.is_file():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
            if TODO_RE.search(line):
                found.append(f"{name}:{number}: {line.strip()[:120]}")
    return found
