"""What students see of a problem: the `.published` marker, the immutable published versions, and
the TODOs that keep a package from being published.

A package is published when its folder holds `.published`, whose one line is the version
(`Problem.version`, a content hash of the files students get and grading uses: `VERSIONED_FILES`)
that `remat-judge problems publish` validated. Publishing also copies those files into a snapshot,
`<problems>/.versions/<slug>/<version>/`, written once and never changed. Students, API clients,
LTI and grading get that snapshot (`graders.problems.problem.ProblemRepository.get`) until the next
`problems publish` validates and publishes another version: the working folder can be edited
freely meanwhile (`problems list` flags it as changed since publish). Admins see and grade
unpublished problems (their working folder).

`.versions/` is not kept by git: in a fresh clone the snapshot of each shipped problem is made
from its folder, which is the published version (`ProblemRepository.serving`); a published
problem whose snapshot is gone and whose folder changed is served to nobody until it is published
again.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from graders.atomic_files import replace_atomically

MARKER = ".published"
VERSIONS = ".versions"  # <problems>/.versions/<slug>/<version>/: the published snapshots
# the files a version is made of: what students read, what a submission is judged by
VERSIONED_FILES = ("problem.toml", "reference.py", "statement.md", "starter.py", "hints.md")
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
    """Writes the marker of the package at `root`, recording `version` (`replace_atomically`: a
    reader sees the old marker or the new one).

    Raises:
        OSError: the marker cannot be written (the old one stays; no temporary file is left).
    """
    replace_atomically(root / MARKER, (version + "\n").encode("utf-8"))


def mark_unpublished(root: Path) -> bool:
    """Removes the marker of the package at `root`; False when it was not published."""
    try:
        (root / MARKER).unlink()
    except FileNotFoundError:
        return False
    return True


def content_version(root: Path) -> str:
    """The version of the package at `root`: 12 hex digits of SHA-256 over each of its
    `VERSIONED_FILES` that exists (name and bytes). Any edit a student could see, or that changes
    grading, makes a new version."""
    digest = hashlib.sha256(b"remat-judge package\0")
    for name in VERSIONED_FILES:
        path = root / name
        if path.is_file():
            content = path.read_bytes()
            digest.update(f"{name}\0{len(content)}\0".encode() + content)
    return digest.hexdigest()[:12]


def snapshot_dir(problems_root: Path, slug: str, version: str) -> Path:
    """Where the published snapshot of `slug` at `version` lives."""
    return problems_root / VERSIONS / slug / version


def take_snapshot(package_root: Path, problems_root: Path, version: str) -> Path:
    """Copies the `VERSIONED_FILES` of the package at `package_root` into its snapshot for
    `version`, once: an existing snapshot is kept as it is (it is immutable). Written into a
    temporary folder and renamed, so a reader sees all of it or nothing.

    Raises:
        ValueError: the package's files are not of `version` (edited since it was validated).
        OSError: the snapshot cannot be written.
    """
    slug = package_root.name
    target = snapshot_dir(problems_root, slug, version)
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=target.parent))
    try:
        for name in VERSIONED_FILES:
            if (package_root / name).is_file():
                shutil.copy2(package_root / name, temporary / name)
        if content_version(temporary) != version:
            raise ValueError(f"{package_root} is no longer version {version}: validate and publish it again")
        os.chmod(temporary, 0o755)
        try:
            temporary.rename(target)
        except OSError:
            shutil.rmtree(temporary, ignore_errors=True)
            if not target.is_dir():  # not another process that made it first (the same files)
                raise
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return target


class TodosLeft(ValueError):
    """A package with a TODO left is not published: `lines` lists each (`todos`)."""

    def __init__(self, lines: list[str]):
        super().__init__(f"{len(lines)} TODO{'s' if len(lines) > 1 else ''} left")
        self.lines = lines


class VersionChanged(ValueError):
    """The package is no longer the version that was validated: `validated`, `now`."""

    def __init__(self, validated: str, now: str):
        super().__init__(f"the package is version {now} now, not the version {validated} that was validated")
        self.validated, self.now = validated, now


def publish(root: Path, problems_root: Path, version: str) -> None:
    """Publishes the package at `root` as `version`, which the caller validated: the one way a
    package is published (`problems publish`, an upload with publish, the upload page's Publish
    button). Refuses while a TODO is left or when the package's files are no longer `version`;
    copies the version into its immutable snapshot, then writes the marker (a reader that sees the
    marker finds the snapshot). Every caller validated `version` first, which built its
    expectations into the judge's cache under the key grading reads (`graders.pipeline.check_reference`
    with the deployment's `judge_config()`): a server on the same data directory and seed does not
    build them again.

    Raises:
        TodosLeft: a TODO is left (`todos`).
        VersionChanged: the files were changed since they were validated.
        OSError: the snapshot or the marker cannot be written.
    """
    left = todos(root)
    if left:
        raise TodosLeft(left)
    now = content_version(root)
    if now != version:
        raise VersionChanged(version, now)
    take_snapshot(root, problems_root, version)
    mark_published(root, version)


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
