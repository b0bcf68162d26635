"""Problem packages as archives: packing a folder, unpacking an upload safely, installing it
(installed is not published: `graders.problems.publication` decides what students see).

An uploaded archive is untrusted bytes until validated: it is unpacked with strict rules (regular
files and folders only, no links, no absolute or `..` paths, caps on size and count) into a
staging folder beside the problems folder, validated through the real sandbox, and only then
renamed into place. The version it replaces is kept in `<data>/problem-history/`.
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import tarfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from graders.problems.problem import Problem, check_package
from graders.problems.publication import MARKER, mark_published, mark_unpublished, publish, published_version
from graders.problems.spec import SLUG_RE

MAX_ARCHIVE_BYTES = 4 * 1024 * 1024  # compressed upload
MAX_ARCHIVE_FILES = 200
MAX_UNPACKED_BYTES = 8 * 1024 * 1024
ALLOWED_SUFFIXES = {".toml", ".md", ".py", ".txt", ".json"}
SKIPPED_PARTS = {"__pycache__", ".pytest_cache", ".git"}


class PackageError(Exception):
    """An archive that is not a well-formed problem package (HTTP 400 / CLI usage error)."""


def pack(folder: Path) -> bytes:
    """A gzipped tar of the package at `folder`, with paths relative to it (no caches, no links,
    no `.published` marker: the judge that installs it decides that)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(folder.rglob("*")):
            rel = path.relative_to(folder)
            if set(rel.parts) & SKIPPED_PARTS or path.is_symlink() or not path.is_file() or rel.parts == (MARKER,):
                continue
            tar.add(path, arcname=str(rel), recursive=False)
    return buffer.getvalue()


def _member_path(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise PackageError(f"archive member {name!r} has an unsafe path")
    if path.parts[0] in (".", "") and len(path.parts) > 1:
        path = PurePosixPath(*path.parts[1:])
    return path


def _read_members(data: bytes) -> dict[PurePosixPath, bytes]:
    """The regular files of a package archive by their safe paths, read in memory with
    `unpack`'s rules (see there; the raises are its `PackageError`s about the members)."""
    try:
        tar = tarfile.open(fileobj=io.BytesIO(data), mode="r:*")
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise PackageError(f"not a tar archive: {exc}") from None
    files: dict[PurePosixPath, bytes] = {}
    total = 0
    with tar:
        try:
            members = tar.getmembers()
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise PackageError(f"corrupt archive: {exc}") from None
        if len(members) > MAX_ARCHIVE_FILES:
            raise PackageError(f"the archive has {len(members)} members; at most {MAX_ARCHIVE_FILES}")
        for member in members:
            path = _member_path(member.name)
            if member.isdir():
                continue
            if not member.isfile():
                raise PackageError(f"archive member {member.name!r} is not a regular file (links are refused)")
            if set(path.parts) & SKIPPED_PARTS:
                continue
            if path.suffix not in ALLOWED_SUFFIXES:
                raise PackageError(f"archive member {member.name!r}: only {sorted(ALLOWED_SUFFIXES)} files")
            total += member.size
            if total > MAX_UNPACKED_BYTES:
                raise PackageError(f"the package is larger than {MAX_UNPACKED_BYTES:,} bytes unpacked")
            if path in files:
                raise PackageError(f"archive member {member.name!r} appears twice")
            extracted = tar.extractfile(member)
            if extracted is None:
                raise PackageError(f"cannot read {member.name!r}")
            files[path] = extracted.read(MAX_UNPACKED_BYTES + 1)
    return files


def unpack(data: bytes, staging_root: Path) -> Path:
    """Unpacks a package archive into a fresh `staging_root/<id>/<slug>/` and returns that folder.

    The slug is read from the archive's problem.toml; the archive may hold the files at its top
    or inside one folder.

    Raises:
        PackageError: not a tar archive, unsafe members (links, devices, absolute or `..` paths,
            odd file types), a member twice or a path that is both a file and a folder, too many
            files or bytes, or no problem.toml with a valid slug. Nothing is left in
            `staging_root` then.
    """
    files = _read_members(data)
    tops = {p.parts[0] for p in files if len(p.parts) > 1}
    if PurePosixPath("problem.toml") not in files and len(tops) == 1:  # files inside one folder
        top = tops.pop()
        files = {PurePosixPath(*p.parts[1:]): b for p, b in files.items() if p.parts[0] == top and len(p.parts) > 1}
    toml = files.get(PurePosixPath("problem.toml"))
    if toml is None:
        raise PackageError("the archive has no problem.toml")
    match = re.search(rb'^\s*slug\s*=\s*"([^"]*)"', toml, re.MULTILINE)
    if match is None or not re.match(SLUG_RE, match.group(1).decode("ascii", "replace")):
        raise PackageError("problem.toml has no valid slug")
    slug = match.group(1).decode("ascii")
    folders = {parent for rel in files for parent in rel.parents if parent != PurePosixPath(".")}
    for rel in files:  # every check before anything is written: a refusal leaves nothing behind
        if len(rel.parts) > 3:
            raise PackageError(f"{rel}: folders nest too deep")
        if rel in folders:
            raise PackageError(f"{rel} is both a file and a folder in the archive")
    target = staging_root / uuid.uuid4().hex / slug
    target.mkdir(parents=True)
    try:
        for rel, content in files.items():
            out = target.joinpath(*rel.parts)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(content)
    except OSError as exc:
        shutil.rmtree(target.parent, ignore_errors=True)
        raise PackageError(f"the package cannot be unpacked: {exc.strerror or exc}") from None
    return target


def install(staged: Path, problems_dir: Path, history_dir: Path, *, publish_version: str | None = None) -> Path:
    """Moves a validated package into `problems_dir/<slug>`, keeping the previous one in history.

    `staged` must be on the same filesystem as `problems_dir` (`staged_package` makes it under
    its `.staging`, and removes what is left there). Returns the installed folder.

    Args:
        staged: the validated package folder.
        problems_dir: the problems folder.
        history_dir: where the package it replaces goes.
        publish_version: publish it, recording this version (the caller validated it and found no
            TODO: `graders.problems.publication`). None: a new problem arrives unpublished, and a
            replaced one keeps its published state and marker (students keep it mid-course;
            `problems list` flags the change until it is published again).
    """
    slug = staged.name
    target = problems_dir / slug
    mark_unpublished(staged)  # a marker is never taken from the archive
    if publish_version is not None:
        publish(staged, problems_dir, publish_version)  # as `problems publish` does: the snapshot, then the marker
    elif (previous := published_version(target)) is not None:
        mark_published(staged, previous)
    if target.exists():
        history_dir.mkdir(parents=True, exist_ok=True)
        shutil.move(str(target), str(history_dir / f"{slug}-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"))
    staged.rename(target)
    return target


@contextlib.contextmanager
def staged_package(data: bytes, problems_dir: Path) -> Iterator[Problem]:
    """Unpacks a package archive into the staging folder and loads it strictly (`check_package`);
    the staging copy is removed on exit (a package published meanwhile has been moved out of it
    already).

    Raises:
        PackageError: the archive is unsafe or malformed.
        ProblemError: every static error of the package, at once.
    """
    staged = unpack(data, staging_root(problems_dir))
    try:
        yield check_package(staged)
    finally:
        shutil.rmtree(staged.parent, ignore_errors=True)


def staging_root(problems_dir: Path) -> Path:
    """Where uploads are unpacked: inside the problems folder (same filesystem, so publishing is a
    rename), in a folder no slug can name."""
    return problems_dir / ".staging"
