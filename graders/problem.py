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
import tomllib
from functools import cached_property
from pathlib import Path
from typing import Any
import numpy as np
from pydantic import (
    BaseModel,
    ValidationError,
)
from graders.artifact_limits import np_dtype
from graders.publication import content_version, published_version, snapshot_dir, take_snapshot
from graders.problem_spec import (
    _array_specs,
    ArrayArg,
    ArraySpec,
    CaseSpec,
    ListArg,
    ProblemError,
    ProblemSpec,
    SLUG_RE,
    UniformGenerator,
)


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
        else:
            out.append({"kind": "static", "name": a.name, "value": case.static[a.name]})
    return out


def leaf_names(spec: ProblemSpec) -> list[str]:
    """Names of the array leaves in the order fwd takes them, e.g. ['params[0]', 'params[1]', 'x']."""
    names: list[str] = []
    for a in spec.args:
        if isinstance(a, ArrayArg):
            names.append(a.name)
        elif isinstance(a, ListArg):
            names.extend(f"{a.name}[{i}]" for i in range(len(a.items)))
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
        if isinstance(g, UniformGenerator):
            values = rng.uniform(g.low, g.high, size=shape)
        else:
            values = rng.normal(g.mean, g.scale, size=shape)
        out.append(np.asarray(values, dtype=np_dtype(item.dtype)))
    return out


def random_cotangents(
    avals: list[tuple[tuple[int, ...], str]], *, seed: bytes, slug: str, version: str, case: str, index: int
) -> list[np.ndarray]:
    """Standard-normal cotangents, one per primal output aval (shape, dtype)."""
    rng = _rng(seed, slug, version, case, "cotangent", index)
    return [np.asarray(rng.standard_normal(size=shape), dtype=np_dtype(dtype)) for shape, dtype in avals]


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
        out = self._expected_verdicts("right", required=False)
        wrong = [
            f"{self.slug}/{path.relative_to(self.root)}: a right/ submission must expect ACCEPTED, not {verdict}"
            for path, verdict in out
            if verdict != "ACCEPTED"
        ]
        if wrong:
            raise ProblemError("\n".join(wrong))
        return out

    def wrong_submissions(self) -> list[tuple[Path, str]]:
        """(path, expected verdict) of every `wrong/*.py`, from its `# expect: VERDICT` first line.

        Raises:
            ProblemError: a wrong submission without a valid expect line.
        """
        return self._expected_verdicts("wrong", required=True)

    def _expected_verdicts(self, folder: str, *, required: bool) -> list[tuple[Path, str]]:
        """(path, verdict) of every `folder/*.py` from its `# expect: VERDICT` first line.

        Raises:
            ProblemError: every file whose first line is not a valid expect line (one line each,
                with "did you mean" for a misspelt verdict), at once.
        """
        from graders.verdict import Verdict

        out, problems = [], []
        for path in sorted((self.root / folder).glob("*.py")):
            first = path.read_text(encoding="utf-8", errors="replace").splitlines()[:1]
            m = re.match(r"#\s*expect:\s*([A-Za-z_]+)\s*$", first[0]) if first else None
            if m is None and not required:
                out.append((path, "ACCEPTED"))
                continue
            if m is not None and m.group(1) in Verdict.__members__:
                out.append((path, m.group(1)))
                continue
            name = f"{self.slug}/{path.relative_to(self.root)}"
            guess = did_you_mean(m.group(1).upper() if m else (first[0] if first else ""), list(Verdict.__members__))
            problems.append(
                f"{name}: the first line must be `# expect: VERDICT` with a verdict from "
                f"{', '.join(Verdict.__members__)}"
                + (f" (did you mean {guess}?)" if guess else "")
                + (f"; it is {first[0][:80]!r}" if first else "; the file is empty")
            )
        if problems:
            raise ProblemError("\n".join(problems))
        return out


def did_you_mean(word: str, choices: list[str]) -> str | None:
    """The choice closest to `word` (difflib, a ratio of at least 0.6), or None."""
    import difflib

    found = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
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


_UNION_TAGS = {"array", "list", "static", "normal", "uniform"}  # tags pydantic puts in locs of tagged unions


def load_problem(root: Path, *, slug: str | None = None) -> Problem:
    """Loads and validates the package at `root`.

    Args:
        root: the package folder.
        slug: the slug its problem.toml must name (default: the folder's name; a published
            snapshot's folder is named by its version).

    Raises:
        ProblemError: a missing file, bad TOML or a bad field; the message names file and field.
    """
    toml_path = root / "problem.toml"
    expected = slug or root.name
    name = f"{expected}/problem.toml"  # messages name files within the package: never a server path
    missing = [f for f in ("problem.toml", "statement.md", "starter.py", "reference.py") if not (root / f).is_file()]
    if missing:
        raise ProblemError("\n".join(f"{expected}: missing {f}" for f in missing))
    raw = toml_path.read_bytes()
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ProblemError(f"{name}: not valid TOML: {exc}") from None
    try:
        spec = ProblemSpec.model_validate(data)
    except ValidationError as exc:
        raise ProblemError(_format_validation_error(name, exc)) from None
    if spec.slug != expected:
        raise ProblemError(f"{name}: slug: {spec.slug!r} must equal the folder name {expected!r}")
    return Problem(spec, root, content_version(root))


class ProblemRepository:
    """The problems folder: every `<slug>/problem.toml` under it (the working folders authors
    edit), and the published snapshots under `.versions/` (`graders.publication`); reloaded when
    files change.

    `get` answers what students, API clients, LTI and grading use: the published version of a
    published problem, else (an unpublished problem: admins only) its working folder.
    `working` answers what an author edits, validates and publishes.
    """

    def __init__(self, root: Path):
        self.root = root

    def slugs(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / "problem.toml").is_file())

    def working(self, slug: str) -> Problem:
        """The working folder of `slug`, as it is now (what `problems validate` and `publish` take).

        Raises:
            KeyError: no such problem.
            ProblemError: the package is invalid.
        """
        if not re.match(SLUG_RE, slug) or not (self.root / slug / "problem.toml").is_file():
            raise KeyError(slug)
        return load_problem(self.root / slug)

    def get(self, slug: str) -> Problem:
        """The problem as students get it: the published snapshot of its marker's version when it
        is published (taken from the working folder the first time, when that folder still is that
        version: packages published before snapshots existed), else its working folder.

        Raises:
            KeyError: no such problem.
            ProblemError: the package is invalid.
        """
        if not re.match(SLUG_RE, slug) or not (self.root / slug / "problem.toml").is_file():
            raise KeyError(slug)
        version = published_version(self.root / slug)
        if version is None:
            return load_problem(self.root / slug)
        snapshot = snapshot_dir(self.root, slug, version)
        if snapshot.is_dir():
            return load_problem(snapshot, slug=slug)
        working = load_problem(self.root / slug)
        if working.version == version:
            try:
                return load_problem(take_snapshot(working.root, self.root, version), slug=slug)
            except (OSError, ValueError) as exc:  # a read-only folder: the working folder is that version
                log.warning("cannot snapshot %s %s: %s", slug, version, exc)
                return working
        log.warning(
            "%s is published as %s, whose snapshot is gone, and its folder is now %s: serving the folder "
            "until `remat-judge problems publish %s`",
            slug,
            version,
            working.version,
            slug,
        )
        return working

    def changed_since_publish(self, slug: str) -> bool:
        """Whether `slug` is published and its working folder is another version than students get."""
        version = published_version(self.root / slug)
        if version is None:
            return False
        try:
            return self.working(slug).version != version
        except (KeyError, ProblemError):
            return True

    def is_published(self, slug: str) -> bool:
        """Whether students see `slug`: its folder holds the `.published` marker (`graders.publication`)."""
        return bool(re.match(SLUG_RE, slug)) and published_version(self.root / slug) is not None

    def all(self, *, published_only: bool = False) -> list[Problem]:
        """Every valid problem (invalid ones are skipped; `problems validate` reports them).

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
            except ProblemError:
                continue
        return out
