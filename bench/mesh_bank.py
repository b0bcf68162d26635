"""A mesh problem's files judged with JAX's own tools, in one process, without the judge: the
independent opinion the judge's verdicts on mesh problems are checked against (and the in-process
floor of a mesh verification: trace, compile and run on the same simulated devices).

For each case of a problem with a `[mesh]` (first hidden input, a fixed seed): the reference's and
every `right/` and `wrong/` file's function is traced with the mesh set (`jax.set_mesh`) on inputs
placed with the problem's partition (`jailside.mesh.place`), as the jail does; its values and
`jax.vjp` gradients are compared with the reference's; the forward program of the VJP is compiled
on the placed inputs and each residual (a leaf of the VJP closure) is listed with its global
shape, the piece each device holds (`sharding.shard_shape`), its memory kind and how many devices
hold the same piece (replication). A file's residual signature per device is the sorted list of
(dtype, per-device shape, memory kind); printed: `same` or `differs` against the reference's, and
the per-device residual bytes.

Usage:
    XLA_FLAGS=--xla_force_host_platform_device_count=8 .venv/bin/python bench/mesh_bank.py SLUG [FILE ...]
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np
from common import PROBLEMS

from graders.problems.hidden_inputs import case_arg_specs, hidden_inputs, leaf_names
from graders.problems.problem import load_problem
from jailside.export import bind_static, dynamic_avals
from jailside.mesh import make_mesh, place

SEED = b"mesh-bank"


def load(path: Path, entry: str) -> Any:
    """The entry point defined by the file at `path`, imported as a module of its own (registered in
    `sys.modules`, as the jail does: a Flax linen module's dataclass fields need it)."""
    name = f"mesh_bank_{path.parent.name}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return getattr(module, entry)


def residual_rows(
    fn: Any, leaves: list[Any], tree: Any
) -> list[tuple[str, tuple[int, ...], tuple[int, ...], str, int]]:
    """(dtype, global shape, per-device shape, memory kind, replication) per residual of fn's VJP."""
    captured: dict[str, int] = {}

    def fwd(*xs: Any) -> list[Any]:
        out, vjp_fn = jax.vjp(fn, *jax.tree_util.tree_unflatten(tree, xs))
        captured["n_out"] = len(jax.tree_util.tree_leaves(out))
        return [*jax.tree_util.tree_leaves(out), *jax.tree_util.tree_leaves(vjp_fn)]

    outs = jax.jit(fwd)(*leaves)
    rows = []
    for r in outs[captured["n_out"] :]:
        piece = r.sharding.shard_shape(r.shape)
        pieces = len(
            {tuple((s.start, s.stop) for s in idx) for idx in r.sharding.devices_indices_map(r.shape).values()}
        )
        rows.append(
            (
                str(r.dtype),
                tuple(r.shape),
                tuple(piece),
                str(r.sharding.memory_kind),
                len(r.sharding.device_set) // pieces,
            )
        )
    return rows


def judge(
    path: Path, problem: Any, mesh: Any, case: Any, inputs: list[np.ndarray], ref: dict[str, Any] | None
) -> dict[str, Any]:
    """Values, gradients and residuals of one file on one case (see the module docstring)."""
    names = leaf_names(problem.spec)
    fn = load(path, problem.spec.entry_point)
    placed = list(place(dict(zip(names, inputs, strict=True)), problem.spec.mesh.plain()["partition"], mesh).values())
    # rebuild the argument pytrees from the leaves in the order the problem passes them
    specs = case_arg_specs(problem.spec, case)
    g = bind_static(fn, specs)
    skeleton = dynamic_avals(specs)
    tree = jax.tree_util.tree_structure(skeleton)
    args = jax.tree_util.tree_unflatten(tree, placed)
    with jax.set_mesh(mesh):
        out, vjp_fn = jax.vjp(g, *args)
        ct = jax.tree_util.tree_map(lambda o: np.cos(np.asarray(o)).astype(o.dtype), out)
        grads = jax.tree_util.tree_leaves(vjp_fn(ct))
        rows = residual_rows(g, placed, tree)
    result = {
        "out": [np.asarray(o) for o in jax.tree_util.tree_leaves(out)],
        "grads": [np.asarray(x) for x in grads],
        "rows": rows,
    }
    if ref is not None:
        worst = 0.0
        for a, b in zip(result["out"] + result["grads"], ref["out"] + ref["grads"], strict=True):
            scale = max(1.0, float(np.max(np.abs(b)))) if b.size else 1.0
            worst = max(worst, float(np.max(np.abs(a.astype(np.float64) - b))) / scale if a.size else 0.0)
        result["worst"] = worst
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("slug")
    parser.add_argument("files", nargs="*", help="files to judge (default: the problem's right/ and wrong/)")
    args = parser.parse_args()
    root = Path(args.slug) if "/" in args.slug else PROBLEMS / args.slug
    problem = load_problem(root)
    if problem.spec.mesh is None:
        print(f"{args.slug} has no [mesh]", file=sys.stderr)
        return 2
    mesh = make_mesh(problem.spec.mesh.plain())
    files = [Path(f) for f in args.files] or [
        *sorted((root / "right").glob("*.py")),
        *sorted((root / "wrong").glob("*.py")),
    ]
    devices = mesh.size
    for case in problem.spec.cases:
        inputs = hidden_inputs(problem.spec, case, seed=SEED, version="bank", index=0)
        t = time.monotonic()
        ref = judge(root / "reference.py", problem, mesh, case, inputs, None)
        ms = (time.monotonic() - t) * 1000
        ref_sig = sorted((r[0], r[2], r[3]) for r in ref["rows"])
        ref_bytes = sum(math.prod(r[2]) * np.dtype(r[0]).itemsize for r in ref["rows"])
        print(f"\n== case {case.name} {dict(case.dims)} on {devices} devices {dict(mesh.shape)}: reference {ms:.0f} ms")
        for dtype, shape, piece, kind, rep in ref["rows"]:
            print(
                f"   ref residual {dtype}{list(shape)} per device {list(piece)} {kind}"
                + (f" replicated x{rep}" if rep > 1 else "")
            )
        print(f"   reference: {len(ref['rows'])} residuals, {ref_bytes:,d} bytes per device")
        for path in files:
            got = judge(path, problem, mesh, case, inputs, ref)
            sig = sorted((r[0], r[2], r[3]) for r in got["rows"])
            nbytes = sum(math.prod(r[2]) * np.dtype(r[0]).itemsize for r in got["rows"])
            reps = sum(r[4] > 1 and math.prod(r[2]) > 1 for r in got["rows"])
            print(
                f"   {path.parent.name}/{path.name}: values/gradients max rel diff {got['worst']:.1e}; residuals "
                f"{'same' if sig == ref_sig else 'differs'}: {len(got['rows'])}, {nbytes:,d} B/device"
                + (f", {reps} replicated" if reps else "")
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
