"""The problem package: `problems/<slug>/problem.toml` and its files, loaded and validated strictly.

A package holds `problem.toml` (this module's `ProblemSpec`), `statement.md`, `starter.py`,
`reference.py` (never served, never mounted into a jail), optional `hints.md`, and `wrong/*.py`,
known-wrong submissions whose first line is `# expect: VERDICT`.

The models of `problem.toml` are in `graders.problems.spec`, what a package's folder must and may
hold in `graders.problems.package_files`, and a case's arguments and hidden inputs in
`graders.problems.hidden_inputs`; this module loads packages and serves published versions
(`ProblemRepository`).
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from graders.problems.package_files import SUBMISSION_FOLDERS, expected_verdicts, extra_files, load_spec, missing_files
from graders.problems.publication import content_version, published_version, snapshot_dir, take_snapshot
from graders.problems.spec import SLUG_RE, ProblemError, ProblemSpec

log = logging.getLogger(__name__)


class Problem:
    """A loaded, validated problem package.

    Attributes:
        spec: the parsed problem.toml.
        root: the package folder: the working folder an author edits, or a published snapshot
            (`graders.problems.publication`).
        version: a content hash (12 hex digits) of the files students get and grading uses
            (`graders.problems.publication.content_version`): any edit of them is a new version, and
            cached expectations are per version.
    """

    def __init__(self, spec: ProblemSpec, root: Path, version: str):
        self.spec, self.root, self.version = spec, root, version

    @property
    def slug(self) -> str:
        return self.spec.slug

    @property
    def reference_path(self) -> Path:
        return self.root / "reference.py"

    def read_text(self, name: str) -> str | None:
        """Text of a package file (statement.md, starter.py, hints.md), or None when absent."""
        path = self.root / name
        return path.read_text(encoding="utf-8") if path.is_file() else None

    @cached_property
    def statement(self) -> str:
        return self.read_text("statement.md") or ""

    @cached_property
    def starter(self) -> str:
        return self.read_text("starter.py") or ""

    def right_submissions(self) -> list[tuple[Path, str]]:
        """(path, "ACCEPTED") of every `right/*.py`: correct solutions in other styles than the
        reference's, which must be ACCEPTED; a first line `# expect: VERDICT`, when present, must
        say ACCEPTED.

        Raises:
            ProblemError: a right/ file that expects another verdict.
        """
        out, problems = expected_verdicts(self.root, self.slug, "right")
        if problems:
            raise ProblemError("\n".join(problems))
        return out

    def wrong_submissions(self) -> list[tuple[Path, str]]:
        """(path, expected verdict) of every `wrong/*.py`, from its `# expect: VERDICT` first line.

        Raises:
            ProblemError: a wrong submission without a valid expect line.
        """
        out, problems = expected_verdicts(self.root, self.slug, "wrong")
        if problems:
            raise ProblemError("\n".join(problems))
        return out


def load_problem(root: Path, *, slug: str | None = None) -> Problem:
    """Loads and validates the package at `root` (what grading and serving need: its files and
    problem.toml; `check_package` also checks `right/` and `wrong/` and reports every error).

    Args:
        root: the package folder.
        slug: the slug its problem.toml must name (default: the folder's name; a published
            snapshot's folder is named by its version).

    Raises:
        ProblemError: a missing file, bad TOML or a bad field; the message names file and field.
    """
    expected = slug or root.name
    missing = missing_files(root, expected)
    if missing:
        raise ProblemError("\n".join(missing))
    return Problem(load_spec(root, expected), root, content_version(root))


def check_package(root: Path, *, slug: str | None = None) -> Problem:
    """Loads the package at `root` strictly, reporting every static error at once: missing files,
    every problem.toml error, every bad `# expect:` line in `right/` and `wrong/`, and files the
    judge would never read where a package file was meant (`refrence.py`, `statment.md`, a
    `tests/` folder, a folder inside `wrong/`). What `problems validate`, `problems publish` and uploads check before
    anything runs (running the reference needs all of this right).

    Args:
        root: the package folder.
        slug: the slug its problem.toml must name (default: the folder's name).

    Raises:
        ProblemError: one line per error, each naming a file within the package (never a path of
            the server).
    """
    expected = slug or root.name
    errors = missing_files(root, expected)
    spec: ProblemSpec | None = None
    if (root / "problem.toml").is_file():
        try:
            spec = load_spec(root, expected)
        except ProblemError as exc:
            errors.append(str(exc))
    for folder in SUBMISSION_FOLDERS:
        errors += expected_verdicts(root, expected, folder)[1]
    errors += extra_files(root, expected)
    if errors or spec is None:
        raise ProblemError("\n".join(errors))
    return Problem(spec, root, content_version(root))


class ProblemUnavailable(ProblemError):
    """A published problem nobody can be given (`Serving.refusal`): its published snapshot is gone
    and its working folder is another version, so neither is what was published."""


@dataclass(frozen=True)
class Serving:
    """Which version of a problem students get, or none and why (`ProblemRepository.serving`):
    what `ProblemRepository.get` serves and what `problems list` says come from this one answer.

    Attributes:
        slug: the problem.
        published_version: the version its `.published` marker records; None when unpublished.
        working_version: the version of its working folder now (`content_version`).
        root: the folder `get` loads: a published problem's snapshot (or its working folder,
            when that is the published version and no snapshot can be written there), an
            unpublished problem's working folder (admins only); None when it is refused.
        refusal: why a published problem is given to nobody ("" when it is served).
    """

    slug: str
    published_version: str | None
    working_version: str
    root: Path | None
    refusal: str = ""

    @property
    def published(self) -> bool:
        return self.published_version is not None

    @property
    def changed(self) -> bool:
        """Published, and the working folder is another version (edited since `publish`)."""
        return self.published_version is not None and self.published_version != self.working_version

    @property
    def students_get(self) -> str | None:
        """The version students get, or None (unpublished, or refused)."""
        return self.published_version if self.root is not None else None

    def describe(self) -> str:
        """One sentence on what students get (for `problems list` and admins)."""
        if self.refusal:
            return self.refusal
        if self.published_version is None:
            return f"{self.slug} is unpublished: admins only (its working folder)"
        if self.changed:
            return (
                f"{self.slug} changed since it was published: students still get the published version "
                f"{self.published_version}; `remat-judge problems publish {self.slug}` validates and publishes this one"
            )
        return f"{self.slug}: students get the published version {self.published_version}"


class ProblemRepository:
    """The problems folder: every `<slug>/problem.toml` under it (the working folders authors
    edit), and the published snapshots under `.versions/` (`graders.problems.publication`); reloaded when
    files change.

    `serving` says which version students get (or none, and why); `get` serves it to students,
    API clients, LTI and grading: the published snapshot of a published problem, else (an
    unpublished problem: admins only) its working folder. `working` answers what an author edits,
    validates and publishes. Made, it takes the snapshot each published problem lacks while its
    folder still is the published version (`make_missing_snapshots`: a fresh clone's, whose
    `.versions/` git does not keep).
    """

    def __init__(self, root: Path):
        self.root = root
        self._lock = threading.Lock()
        self._said: set[tuple[str, str | None, str]] = set()
        self.make_missing_snapshots()

    def slugs(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / "problem.toml").is_file())

    def _folder(self, slug: str) -> Path:
        """The working folder of `slug`.

        Raises:
            KeyError: no such problem (or not a slug).
        """
        if not re.match(SLUG_RE, slug) or not (self.root / slug / "problem.toml").is_file():
            raise KeyError(slug)
        return self.root / slug

    def working(self, slug: str) -> Problem:
        """The working folder of `slug`, as it is now (what `problems list` shows).

        Raises:
            KeyError: no such problem.
            ProblemError: the package is invalid.
        """
        return load_problem(self._folder(slug))

    def checked(self, slug: str) -> Problem:
        """The working folder of `slug` checked strictly, every static error at once
        (`check_package`: what `problems validate` and `publish` take).

        Raises:
            KeyError: no such problem.
            ProblemError: every error of the package, one line each.
        """
        return check_package(self._folder(slug))

    def serving(self, slug: str) -> Serving:
        """Which version of `slug` students get, or none and why. A published problem gets its
        published snapshot; when that is missing (a fresh clone: git keeps no `.versions/`) it is
        made from the working folder if, and only if, the folder is still the published version
        (atomically: two processes at once make one). When the folder has changed too, the
        problem is refused (said once at ERROR: run `remat-judge problems publish SLUG`), never
        served from the folder.

        Raises:
            KeyError: no such problem.
        """
        folder = self._folder(slug)
        version = published_version(folder)
        working = content_version(folder)
        if version is None:
            return Serving(slug, None, working, folder)
        snapshot = snapshot_dir(self.root, slug, version)
        if snapshot.is_dir():
            return Serving(slug, version, working, snapshot)
        if working == version:
            try:
                made = take_snapshot(folder, self.root, version)
            except ValueError:  # edited while it was copied: no longer the published version
                working = content_version(folder)
            except OSError as exc:  # a read-only problems folder: the folder is the published version
                self._say(
                    logging.WARNING,
                    (slug, version, "unwritable"),
                    "cannot write the snapshot of %s version %s (%s): serving its folder, which is that version",
                    slug,
                    version,
                    exc,
                )
                return Serving(slug, version, working, folder)
            else:
                self._say(logging.INFO, (slug, version, "made"), "made the snapshot of %s version %s", slug, version)
                return Serving(slug, version, working, made)
        refusal = (
            f"{slug} is published as version {version}, whose snapshot is gone, and its folder is now version "
            f"{working}: students, the API, LTI and grading get none of it until `remat-judge problems publish "
            f"{slug}` validates and publishes the folder"
        )
        self._say(logging.ERROR, (slug, version, working), "%s", refusal)
        return Serving(slug, version, working, None, refusal)

    def _say(self, level: int, key: tuple[str, str | None, str], message: str, *args: object) -> None:
        """Logs `message` once per `key` in this repository (not at every page view)."""
        with self._lock:
            if key in self._said:
                return
            self._said.add(key)
        log.log(level, message, *args)

    def make_missing_snapshots(self) -> list[Serving]:
        """`serving` for every published problem: makes each missing snapshot the folder still
        allows, and logs each problem refused. Returns their answers."""
        out = []
        for slug in self.slugs():
            if published_version(self.root / slug) is None:
                continue
            try:
                out.append(self.serving(slug))
            except (KeyError, OSError):  # removed meanwhile, or unreadable: `get` says so when asked
                continue
        return out

    def get(self, slug: str) -> Problem:
        """The problem as students get it (`serving`): the published snapshot of a published
        problem, else its working folder (unpublished: admins only).

        Raises:
            KeyError: no such problem.
            ProblemUnavailable: it is published but its snapshot is gone and its folder changed
                (`Serving.refusal` says so and what to run).
            ProblemError: the package is invalid.
        """
        serving = self.serving(slug)
        if serving.root is None:
            raise ProblemUnavailable(serving.refusal)
        if serving.published_version is None:
            return load_problem(serving.root)
        problem = load_problem(serving.root, slug=slug)
        if problem.version != serving.published_version:  # a folder served in place was edited meanwhile
            raise ProblemUnavailable(
                f"{slug} is published as version {serving.published_version}, and what is there is now version "
                f"{problem.version}: `remat-judge problems publish {slug}`"
            )
        return problem

    def changed_since_publish(self, slug: str) -> bool:
        """Whether `slug` is published and its working folder is another version than was published."""
        try:
            return self.serving(slug).changed
        except KeyError:
            return False

    def is_published(self, slug: str) -> bool:
        """Whether students see `slug`: its folder holds the `.published` marker (`graders.problems.publication`)."""
        return bool(re.match(SLUG_RE, slug)) and published_version(self.root / slug) is not None

    def all(self, *, published_only: bool = False) -> list[Problem]:
        """Every valid problem as `get` gives it (invalid and refused ones are skipped; `problems
        validate` and `problems list` report them).

        Args:
            published_only: only the published ones (what students, API clients and LTI deep
                linking see); instructors see all.
        """
        out = []
        for slug in self.slugs():
            if published_only and not self.is_published(slug):
                continue
            try:
                out.append(self.get(slug))
            except (KeyError, ProblemError):
                continue
        return out
