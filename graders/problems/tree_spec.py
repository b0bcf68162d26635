"""`remat-judge problems tree-spec SLUG`, run by the CLI as `python -m graders.problems.tree_spec FOLDER
[--name NAME] [--case CASE]` in its own process: it imports the author's reference.py and JAX,
which the CLI's process never does (the server imports no JAX). Prints the `[[args]]` table on
stdout; exits 1 with `ErrorName: message` on stderr when the reference cannot give one.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import tomllib
from pathlib import Path

from graders.problems.scaffold_frameworks import tree_spec_toml
from graders.reference.build import import_file


def reference_tree_spec(folder: Path, *, name: str = "params", case: str | None = None) -> str:
    """The `[[args]]` table of the parameters `init(**dims)` in `folder/reference.py` makes at a
    case's dimensions: shapes from `jax.eval_shape` (nothing is computed or allocated).

    Runs the author's reference in this process, as `problems validate` runs it in a verifier
    child: for an author's own package on their machine, never for an upload.

    Args:
        folder: the problem package; only problem.toml's `[[cases]]` are read, so a package whose
            tree is still missing works.
        name: the argument's name; case: the case whose dims are used (default: the first whose
            dimensions are all distinct, so each size names one dimension).

    Raises:
        ValueError: no such case, no `init` in reference.py, or parameters that are not a dict of
            dicts and arrays.
        ReferenceSolutionError: reference.py cannot be imported. Whatever running reference.py or
            calling `init` raises.
    """
    # JAX only in the tree-spec process: the CLI that starts it never imports JAX
    import jax

    cases = tomllib.loads((folder / "problem.toml").read_text(encoding="utf-8")).get("cases", [])
    dims_by_case = {c.get("name"): dict(c.get("dims", {})) for c in cases if isinstance(c, dict)}
    if case is not None and case not in dims_by_case:
        raise ValueError(f"no case {case!r} in problem.toml (cases: {', '.join(map(str, dims_by_case))})")
    if case is None:
        distinct = [n for n, d in dims_by_case.items() if len(set(d.values())) == len(d)]
        case = (distinct or list(dims_by_case) or [None])[0]
    dims = dims_by_case.get(case, {})
    module = import_file(folder / "reference.py", "reference_for_tree_spec")
    init = getattr(module, "init", None)
    if not callable(init):
        raise ValueError("reference.py defines no init(...): write init(**dims) returning the parameter pytree")
    accepted = inspect.signature(init).parameters
    kwargs = {k: v for k, v in dims.items() if k in accepted}
    shapes = jax.eval_shape(lambda: init(**kwargs))
    tree = jax.tree_util.tree_map(lambda a: (tuple(int(d) for d in a.shape), str(a.dtype)), shapes)
    return tree_spec_toml(name, tree, dims)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m graders.problems.tree_spec")
    parser.add_argument("folder", type=Path)
    parser.add_argument("--name", default="params")
    parser.add_argument("--case", default=None)
    args = parser.parse_args(argv)
    try:
        text = reference_tree_spec(args.folder, name=args.name, case=args.case)
    except Exception as exc:  # noqa: BLE001 - the author's own code: say what it raised, in one line
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
