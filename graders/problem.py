"""The problem package: `problems/<slug>/problem.toml` and its files, loaded and validated strictly.

A package holds `problem.toml` (this module's `ProblemSpec`), `statement.md`, `starter.py`,
`reference.py` (never served, never mounted into a jail), optional `hints.md`, and `wrong/*.py`,
known-wrong submissions whose first line is `# expect: VERDICT`.

The models of `problem.toml` are in `graders.problem_spec`; this module loads packages, draws
hidden inputs and cotangents, and serves published versions (`ProblemRepository`).
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import tomllib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import (
    BaseModel,
    ValidationError,
)

from graders.artifact_limits import is_differentiable, np_dtype
from graders.problem_spec import (
    SLUG_RE,
    ArrayArg,
    ArraySpec,
    CaseSpec,
    ListArg,
    ProblemError,
    ProblemSpec,
    RandomBitsGenerator,
    TreeArg,
    TreeNode,
    UniformGenerator,
    _array_specs,
)
from graders.publication import content_version, published_version, snapshot_dir, take_snapshot

log = logging.getLogger(__name__)


def _concrete(spec: ArraySpec, dims: dict[str, int]) -> list[int]:
    return [d if isinstance(d, int) else dims[d] for d in spec.shape]


def case_arg_specs(spec: ProblemSpec, case: CaseSpec) -> list[dict[str, Any]]:
    """The argument avals of one case in the form the jail's runner takes (see jailside/export.py).

    Only shapes, dtypes and static values: this is all a jail ever learns about a case.
    """
    out: list[dict[str, Any]] = []
    for a in spec.args:
        if isinstance(a, ArrayArg):
            out.append({"kind": "array", "name": a.name, "shape": _concrete(a, case.dims), "dtype": a.dtype})
        elif isinstance(a, ListArg):
            out.append(
                {
                    "kind": "list",
                    "name": a.name,
                    "items": [
                        {
                            "kind": "array",
                            "name": f"{a.name}[{i}]",
                            "shape": _concrete(item, case.dims),
                            "dtype": item.dtype,
                        }
                        for i, item in enumerate(a.items)
                    ],
                }
            )
        elif isinstance(a, TreeArg):
            out.append(_tree_arg_spec(a.tree, a.name, case.dims))
        else:
            out.append({"kind": "static", "name": a.name, "value": case.static[a.name]})
    return out


def _tree_arg_spec(node: TreeNode, path: str, dims: dict[str, int]) -> dict[str, Any]:
    """A parsed tree as the jail's nested ArgSpec (`dict` and `list` nodes, `array` leaves).
    Recursive over a tree `parse_tree` bounded to MAX_TREE_DEPTH levels."""
    if isinstance(node, dict):
        return {
            "kind": "dict",
            "name": path,
            "items": {k: _tree_arg_spec(node[k], f"{path}[{k!r}]", dims) for k in sorted(node)},
        }
    if isinstance(node, list):
        return {
            "kind": "list",
            "name": path,
            "items": [_tree_arg_spec(n, f"{path}[{i}]", dims) for i, n in enumerate(node)],
        }
    return {"kind": "array", "name": path, "shape": _concrete(node, dims), "dtype": node.dtype}


def leaf_names(spec: ProblemSpec) -> list[str]:
    """Names of the array leaves in the order fwd takes them, e.g. ['params[0]', 'params[1]', 'x']."""
    names: list[str] = []
    for a in spec.args:
        if isinstance(a, ArrayArg):
            names.append(a.name)
        elif isinstance(a, ListArg):
            names.extend(f"{a.name}[{i}]" for i in range(len(a.items)))
        elif isinstance(a, TreeArg):
            names.extend(path for path, _ in a.leaves())
    return names


def hidden_inputs(spec: ProblemSpec, case: CaseSpec, *, seed: bytes, version: str, index: int) -> list[np.ndarray]:
    """Draws the `index`-th hidden input of `case`: one array per leaf, in fwd's order.

    Deterministic in (seed, slug, version, case name, index); unknowable without the deployment's
    secret seed.
    """
    rng = _rng(seed, spec.slug, version, case.name, "input", index)
    out = []
    for item in _array_specs(spec.args):
        shape = _concrete(item, case.dims)
        g = item.generator
        if isinstance(g, RandomBitsGenerator):
            values = rng.integers(0, 1 << 32, size=shape, dtype=np.uint32).view(np_dtype(item.dtype))
        elif isinstance(g, UniformGenerator):
            values = rng.uniform(g.low, g.high, size=shape)
        else:
            values = rng.normal(g.mean, g.scale, size=shape)
        out.append(np.asarray(values, dtype=np_dtype(item.dtype)))
    return out


def random_cotangents(
    avals: list[tuple[tuple[int, ...], str]], *, seed: bytes, slug: str, version: str, case: str, index: int
) -> list[np.ndarray]:
    """Standard-normal cotangents, one per primal output aval (shape, dtype); zeros for an integer
    aval (finite-difference directions are drawn here too, and an integer leaf is not moved)."""
    rng = _rng(seed, slug, version, case, "cotangent", index)
    return [
        np.asarray(rng.standard_normal(size=shape), dtype=np_dtype(dtype))
        if is_differentiable(dtype)
        else np.zeros(shape, np_dtype(dtype))
        for shape, dtype in avals
    ]


def _rng(seed: bytes, *parts: object) -> np.random.Generator:
    digest = hashlib.sha256(seed + b"\0" + "\0".join(str(p) for p in parts).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:16], "little"))


class Problem:
    """A loaded, validated problem package.

    Attributes:
        spec: the parsed problem.toml.
        root: the package folder: the working folder an author edits, or a published snapshot
            (`graders.publication`).
        version: a content hash (12 hex digits) of the files students get and grading uses
            (`graders.publication.content_version`): any edit of them is a new version, and
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
        out, problems = _expected_verdicts(self.root, self.slug, "right")
        if problems:
            raise ProblemError("\n".join(problems))
        return out

    def wrong_submissions(self) -> list[tuple[Path, str]]:
        """(path, expected verdict) of every `wrong/*.py`, from its `# expect: VERDICT` first line.

        Raises:
            ProblemError: a wrong submission without a valid expect line.
        """
        out, problems = _expected_verdicts(self.root, self.slug, "wrong")
        if problems:
            raise ProblemError("\n".join(problems))
        return out


def _expected_verdicts(root: Path, slug: str, folder: str) -> tuple[list[tuple[Path, str]], list[str]]:
    """(path, verdict) of every `folder/*.py` (`right` or `wrong`) from its `# expect: VERDICT`
    first line, and one error line per file whose first line is not a valid expect line (with "did
    you mean" for a misspelt verdict). In `right/` the line may be left out (ACCEPTED) and must say
    ACCEPTED when present."""
    from graders.verdict import Verdict

    required = folder == "wrong"
    out, problems = [], []
    for path in sorted((root / folder).glob("*.py")):
        first = path.read_text(encoding="utf-8", errors="replace").splitlines()[:1]
        m = re.match(r"#\s*expect:\s*([A-Za-z_]+)\s*$", first[0]) if first else None
        name = f"{slug}/{path.relative_to(root)}"
        if m is None and not required:
            out.append((path, "ACCEPTED"))
            continue
        if m is not None and m.group(1) in Verdict.__members__:
            if not required and m.group(1) != "ACCEPTED":
                problems.append(f"{name}: a right/ submission must expect ACCEPTED, not {m.group(1)}")
                continue
            out.append((path, m.group(1)))
            continue
        guess = did_you_mean(m.group(1).upper() if m else (first[0] if first else ""), list(Verdict.__members__))
        problems.append(
            f"{name}: the first line must be `# expect: VERDICT` with a verdict from "
            f"{', '.join(Verdict.__members__)}"
            + (f" (did you mean {guess}?)" if guess else "")
            + (f"; it is {first[0][:80]!r}" if first else "; the file is empty")
        )
    return out, problems


def did_you_mean(word: str, choices: list[str], *, cutoff: float = 0.6) -> str | None:
    """The choice closest to `word` (difflib, a ratio of at least `cutoff`), or None."""
    import difflib

    found = difflib.get_close_matches(word, choices, n=1, cutoff=cutoff)
    return found[0] if found else None


def _model_at(loc: tuple[object, ...]) -> type[BaseModel] | None:
    """The pydantic model of problem.toml at `loc` (field names and list indices), or None."""
    import typing

    model: type[BaseModel] = ProblemSpec
    key_next = False  # the part after a table of tables (`tolerance.float32`) is a key, not a field
    for part in loc:
        if isinstance(part, int) or key_next:
            key_next = False
            continue
        field = model.model_fields.get(str(part))
        if field is None:
            return None
        found = None
        pending = [field.annotation]
        while pending:
            annotation = pending.pop()
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                found = annotation
                break
            pending.extend(a for a in typing.get_args(annotation) if a is not None)
        if found is None:
            return None
        model, key_next = found, typing.get_origin(field.annotation) is dict
    return model


def _format_validation_error(name: str, exc: ValidationError) -> str:
    """Every error of problem.toml, one line each (`name: field.path: message`), an unknown key
    with "did you mean" the closest known key of its table."""
    lines = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p in _UNION_TAGS))
        where = ".".join(str(p) for p in loc) or "(top level)"
        message = err["msg"]
        if err["type"] == "extra_forbidden" and loc:
            model = _model_at(loc[:-1])
            guess = did_you_mean(str(loc[-1]), list(model.model_fields)) if model is not None else None
            message = "unknown key" + (f" (did you mean {guess!r}?)" if guess else "")
        lines.append(f"{name}: {where}: {message}")
    return "\n".join(lines)


_UNION_TAGS = {"array", "list", "tree", "static", "normal", "uniform"}  # tags pydantic puts in locs of tagged unions


REQUIRED_FILES = ("problem.toml", "statement.md", "starter.py", "reference.py")
PACKAGE_FILES = (*REQUIRED_FILES, "hints.md")  # the files a package's top level may hold
SUBMISSION_FOLDERS = ("right", "wrong")
IGNORED_NAMES = {"__pycache__", ".pytest_cache", ".git"}  # never part of a package, never an error


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
    missing = _missing_files(root, expected)
    if missing:
        raise ProblemError("\n".join(missing))
    return Problem(_load_spec(root, expected), root, content_version(root))


def check_package(root: Path, *, slug: str | None = None) -> Problem:
    """Loads the package at `root` strictly, reporting every static error at once: missing files,
    every problem.toml error, every bad `# expect:` line in `right/` and `wrong/`, and files the
    judge would never read where a package file was meant (`refrence.py`, `statment.md`, a
    `tests/` folder, a folder inside `wrong/`). What `problems validate`, `problems publish` and
    uploads check before anything runs (running the reference needs all of this right).

    Args:
        root: the package folder.
        slug: the slug its problem.toml must name (default: the folder's name).

    Raises:
        ProblemError: one line per error, each naming a file within the package (never a path of
            the server).
    """
    expected = slug or root.name
    errors = _missing_files(root, expected)
    spec: ProblemSpec | None = None
    if (root / "problem.toml").is_file():
        try:
            spec = _load_spec(root, expected)
        except ProblemError as exc:
            errors.append(str(exc))
    for folder in SUBMISSION_FOLDERS:
        errors += _expected_verdicts(root, expected, folder)[1]
    errors += _extra_files(root, expected)
    if errors or spec is None:
        raise ProblemError("\n".join(errors))
    return Problem(spec, root, content_version(root))


def _missing_files(root: Path, slug: str) -> list[str]:
    return [f"{slug}: missing {f}" for f in REQUIRED_FILES if not (root / f).is_file()]


def _load_spec(root: Path, slug: str) -> ProblemSpec:
    """The parsed problem.toml of the package `slug` at `root`.

    Raises:
        ProblemError: bad TOML, every bad field (one line each), or a slug that is not `slug`.
    """
    name = f"{slug}/problem.toml"  # messages name files within the package: never a server path
    try:
        data = tomllib.loads((root / "problem.toml").read_bytes().decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ProblemError(f"{name}: not valid TOML: {exc}") from None
    try:
        spec = ProblemSpec.model_validate(data)
    except ValidationError as exc:
        raise ProblemError(_format_validation_error(name, exc)) from None
    if spec.slug != slug:
        raise ProblemError(f"{name}: slug: {spec.slug!r} must equal the folder name {slug!r}")
    return spec


def _extra_files(root: Path, slug: str) -> list[str]:
    """One line per file or folder of the package that the judge never reads but that looks meant
    to be read: a top-level `.py` other than the reference and starter, a top-level file named
    like a package file (`statment.md`), a folder other than `right/` and `wrong/`, and a folder
    inside those (only their `*.py` files are graded). Notes (`README.md`, `wrong/notes.txt`)
    are fine."""
    errors = []
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        name = path.name
        if name in IGNORED_NAMES or name.startswith("."):
            continue
        if path.is_dir():
            if name in SUBMISSION_FOLDERS:
                errors += [
                    f"{slug}/{name}/{inner.name}/: not graded: {name}/ holds its .py files directly, no folders"
                    for inner in sorted(path.iterdir())
                    if inner.is_dir() and inner.name not in IGNORED_NAMES
                ]
                continue
            guess = did_you_mean(name, list(SUBMISSION_FOLDERS))
            errors.append(
                f"{slug}/{name}/: not part of a package: submissions to grade go in right/ (ACCEPTED) or "
                f"wrong/ (`# expect: VERDICT`)" + (f" (did you mean {guess}/?)" if guess else "")
            )
        elif name not in PACKAGE_FILES:
            guess = did_you_mean(name, list(PACKAGE_FILES), cutoff=0.8)
            if guess is not None:
                errors.append(f"{slug}/{name}: not a package file (did you mean {guess}?)")
            elif path.suffix == ".py":
                errors.append(
                    f"{slug}/{name}: never graded nor served: a package runs reference.py and serves "
                    f"starter.py; a submission to grade goes in right/ or wrong/"
                )
    return errors


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
    edit), and the published snapshots under `.versions/` (`graders.publication`); reloaded when
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
        """Whether students see `slug`: its folder holds the `.published` marker (`graders.publication`)."""
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
