"""What a test case's arguments are and the hidden values drawn for them: the argument avals a
jail learns (`case_arg_specs`, the jail runner's ArgSpec), the names of the array leaves in the
order the exported programs take them (`leaf_names`), and the hidden inputs and random cotangents
(`hidden_inputs`, `random_cotangents`), deterministic in the deployment's secret seed.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from graders.artifact_limits import is_differentiable, np_dtype
from graders.problems.generators import RandomBitsGenerator, UniformGenerator
from graders.problems.spec import (
    ArrayArg,
    ArraySpec,
    CaseSpec,
    ListArg,
    ProblemSpec,
    TreeArg,
    TreeNode,
    array_specs,
)


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
    for item in array_specs(spec.args):
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
