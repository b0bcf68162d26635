"""What a problem package's folder must and may hold, read strictly: the required files, its
`problem.toml` parsed into a `ProblemSpec` with every error on a line of its own (an unknown key
with "did you mean"), the `# expect: VERDICT` line of every `right/` and `wrong/` submission, and
the files the judge would never read where a package file was meant.

Every message names a file within the package, never a path of the server. `graders.problems.problem`
loads packages with these.
"""

from __future__ import annotations

import difflib
import re
import tomllib
import typing
from pathlib import Path

from pydantic import BaseModel, ValidationError

from graders.problems.spec import ProblemError, ProblemSpec
from graders.verdict import Verdict

REQUIRED_FILES = ("problem.toml", "statement.md", "starter.py", "reference.py")
PACKAGE_FILES = (*REQUIRED_FILES, "hints.md")  # the files a package's top level may hold
SUBMISSION_FOLDERS = ("right", "wrong")
IGNORED_NAMES = {"__pycache__", ".pytest_cache", ".git"}  # never part of a package, never an error


def expected_verdicts(root: Path, slug: str, folder: str) -> tuple[list[tuple[Path, str]], list[str]]:
    """(path, verdict) of every `folder/*.py` (`right` or `wrong`) from its `# expect: VERDICT`
    first line, and one error line per file whose first line is not a valid expect line (with "did
    you mean" for a misspelt verdict). In `right/` the line may be left out (ACCEPTED) and must say
    ACCEPTED when present."""
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
    found = difflib.get_close_matches(word, choices, n=1, cutoff=cutoff)
    return found[0] if found else None


def _model_at(loc: tuple[object, ...]) -> type[BaseModel] | None:
    """The pydantic model of problem.toml at `loc` (field names and list indices), or None."""
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


def missing_files(root: Path, slug: str) -> list[str]:
    """One line per file of `REQUIRED_FILES` the package `slug` at `root` lacks."""
    return [f"{slug}: missing {f}" for f in REQUIRED_FILES if not (root / f).is_file()]


def load_spec(root: Path, slug: str) -> ProblemSpec:
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


def extra_files(root: Path, slug: str) -> list[str]:
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
