"""Exporting a function's VJP as two `jax.export` artifacts: shared by the jail (submissions) and
the trusted side (reference solutions), so both are exported the same way, here and only here.

JAX and the standard library only (this module runs inside the jail).

ArgSpec (one per positional argument of the entry point):
`{"kind": "array", "name": str, "shape": [int, ...], "dtype": str}`,
`{"kind": "list", "name": str, "items": [ArgSpec, ...]}`,
`{"kind": "dict", "name": str, "items": {str: ArgSpec, ...}}` (a pytree argument's nodes) or
`{"kind": "static", "name": str, "value": bool | int | float | str}`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, cast

from jailside.mesh import make_mesh, place
from jailside.paths import local_paths

if TYPE_CHECKING:
    from jax._src import core


def _abstract_arg(spec: dict[str, Any]) -> Any:
    """Turns a dynamic ArgSpec into the pytree of `jax.ShapeDtypeStruct` that `jax.export` traces."""
    # JAX only inside the jail's child (and the reference's): the runner's protocol stays light
    import jax
    import jax.numpy as jnp

    if spec["kind"] == "array":
        return jax.ShapeDtypeStruct(tuple(spec["shape"]), jnp.dtype(spec["dtype"]))
    if spec["kind"] == "list":
        return [_abstract_arg(item) for item in spec["items"]]
    if spec["kind"] == "dict":
        return {key: _abstract_arg(item) for key, item in spec["items"].items()}
    raise ValueError(f"argument {spec.get('name')!r}: unknown kind {spec['kind']!r}")


def dynamic_avals(specs: list[dict[str, Any]]) -> list[Any]:
    """The avals `jax.export` traces, one pytree of `jax.ShapeDtypeStruct` per dynamic ArgSpec
    (static arguments left out), in order."""
    return [_abstract_arg(s) for s in specs if s["kind"] != "static"]


def _key_impl(x: Any) -> Any:
    """The PRNG implementation of a typed key array, or None for any other value."""
    # JAX only inside the jail's child (and the reference's): the runner's protocol stays light
    import jax

    dtype = getattr(x, "dtype", None)
    if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return jax.random.key_impl(x)
    return None


def _key_data(x: Any) -> Any:
    """A typed key array's data (uint32); any other value as it is."""
    # JAX only inside the jail's child (and the reference's): the runner's protocol stays light
    import jax

    return x if _key_impl(x) is None else jax.random.key_data(x)


def bind_static(fn: Callable[..., Any], specs: list[dict[str, Any]]) -> Callable[..., Any]:
    """Returns `g(*dynamic_args)` that calls `fn` with the static arguments of `specs` filled in."""

    def with_static(*dynamic: Any) -> Any:
        it = iter(dynamic)
        args = [spec["value"] if spec["kind"] == "static" else next(it) for spec in specs]
        return fn(*args)

    return with_static


def _backward(captured: dict[str, Any], n_res: int) -> Callable[..., list[Any]]:
    """The bwd program of `export_case`: its first `n_res` leaves are the residuals (key data
    wrapped back into the key each was, `captured["key_impls"]`), the rest the cotangent of the
    output; the VJP rebuilt from `captured` (the trees the fwd program recorded)."""
    # JAX only inside the jail's child (and the reference's): the runner's protocol stays light
    import jax

    def bwd(*leaves: Any) -> list[Any]:
        residuals = [
            r if impl is None else jax.random.wrap_key_data(r, impl=impl)
            for r, impl in zip(leaves[:n_res], captured["key_impls"], strict=True)
        ]
        vjp_fn = jax.tree_util.tree_unflatten(captured["vjp_tree"], residuals)
        cotangent = jax.tree_util.tree_unflatten(captured["out_tree"], leaves[n_res:])
        # an integer input's cotangent is float0 (no gradient): left out, so bwd returns one
        # gradient per float input leaf, in order
        return [g for g in jax.tree_util.tree_leaves(vjp_fn(cotangent)) if g.dtype != jax.dtypes.float0]

    return bwd


def export_case(
    fn: Callable[..., Any], specs: list[dict[str, Any]], mesh: dict[str, Any] | None = None
) -> tuple[bytes, bytes, int]:
    """Exports the VJP of `fn` at the argument avals `specs` as two serialized StableHLO artifacts.

    `fwd(*input_leaves) -> [*primal_output_leaves, *residuals]`: the primal outputs followed by
    every residual the VJP saves (the leaves of the `jax.vjp` closure ARE the residuals, measured
    with JAX 0.10.2: they equal what `jax.ad_checkpoint.print_saved_residuals` lists).
    `bwd(*residuals, *cotangent_leaves) -> [*gradient_leaves]`, one per float input leaf (an
    integer leaf, such as an RNG key's data, has no gradient): may use nothing but the residuals,
    so correct gradients from it prove that the saved residuals suffice. Both programs take and
    return flat lists, one array per pytree leaf, in `jax.tree_util.tree_leaves` order.

    On a mesh (`mesh`, a MeshDict) the input avals carry their partition's shardings, `fn` is
    traced with the mesh set (`jax.set_mesh`), and fwd's outputs are pinned to the shardings its
    compile gives them (`_pinned_fwd`: XLA's partitioner decides a `jit`-style residual's layout
    there, measured with jax 0.10.2), so bwd is exported on residual avals with those shardings.

    Args:
        fn: the function to differentiate; its output is a pytree of float arrays.
        specs: one ArgSpec per positional argument (see the module docstring).
        mesh: the problem's mesh and partition, or None for one device (the default).

    Returns:
        (fwd artifact bytes, bwd artifact bytes, number of primal output leaves).

    Raises:
        Whatever tracing or exporting `fn` raises (TypeError, jax errors, MemoryError, ...).
    """
    # JAX only inside the jail's child (and the reference's): the runner's protocol stays light
    import jax
    from jax import export

    g = bind_static(fn, specs)
    dynamic = dynamic_avals(specs)
    in_tree = jax.tree_util.tree_structure(dynamic)
    captured: dict[str, Any] = {}

    # Both programs take and return flat lists of arrays, whatever the argument pytrees (a list of
    # weights, say), so the verifier can call them with one array per leaf.
    # A typed PRNG key saved or returned crosses as its key data (uint32), never as a `key<impl>`
    # aval the artifact reader does not take; bwd wraps the data back into the same kind of key.
    def fwd(*leaves: Any) -> list[Any]:
        out, vjp_fn = jax.vjp(g, *jax.tree_util.tree_unflatten(in_tree, leaves))
        captured["vjp_tree"] = jax.tree_util.tree_structure(vjp_fn)
        captured["out_tree"] = jax.tree_util.tree_structure(out)
        residuals = jax.tree_util.tree_leaves(vjp_fn)
        captured["key_impls"] = [_key_impl(r) for r in residuals]
        return [*map(_key_data, jax.tree_util.tree_leaves(out)), *map(_key_data, residuals)]

    placed_mesh, leaves = _placed(jax.tree_util.tree_leaves(dynamic), specs, mesh)
    with _on(placed_mesh):
        fwd_exp, specs_out = _export_fwd(fwd, leaves, pinned=placed_mesh is not None)
    n_out = captured["out_tree"].num_leaves
    n_res = len(fwd_exp.out_avals) - n_out
    with _on(placed_mesh):
        bwd = jax.jit(_backward(captured, n_res))
        bwd_exp = export.export(bwd, platforms=["cpu"])(*specs_out[n_out:], *specs_out[:n_out])
    return bytes(fwd_exp.serialize()), bytes(bwd_exp.serialize()), n_out


def _on(mesh: Any) -> Any:
    """`jax.set_mesh(mesh)`, or a context that does nothing when there is no mesh."""
    # JAX only inside the jail's child (and the reference's): the runner's protocol stays light
    import jax

    return nullcontext() if mesh is None else jax.set_mesh(mesh)


def _export_fwd(fwd: Callable[..., Any], leaves: list[Any], *, pinned: bool) -> tuple[Any, list[Any]]:
    """(fwd exported at the avals `leaves`, its output avals). `pinned` (on a mesh): its outputs
    pinned to the shardings its compile gives them, which the output avals carry."""
    # JAX only inside the jail's child (and the reference's): the runner's protocol stays light
    import jax
    from jax import export

    if not pinned:
        fwd_exp = export.export(jax.jit(fwd), platforms=["cpu"])(*leaves)
        return fwd_exp, [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in fwd_exp.out_avals]
    shardings = jax.jit(fwd).lower(*leaves).compile().output_shardings
    fwd_exp = export.export(jax.jit(fwd, out_shardings=shardings), platforms=["cpu"])(*leaves)
    return fwd_exp, [
        jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s) for a, s in zip(fwd_exp.out_avals, shardings, strict=True)
    ]


def leaf_names(specs: list[dict[str, Any]]) -> list[str]:
    """The names of the array leaves of dynamic ArgSpecs, in `jax.tree_util.tree_leaves` order
    (an argument's name, `ws[0]` for a list item, `params['w']` for a tree leaf; a dict's keys
    sorted, as JAX flattens them)."""
    names: list[str] = []
    stack = [s for s in reversed(specs) if s["kind"] != "static"]
    while stack:
        spec = stack.pop()
        if spec["kind"] == "array":
            names.append(spec["name"])
        elif spec["kind"] == "list":
            stack.extend(reversed(spec["items"]))
        elif spec["kind"] == "dict":
            stack.extend(spec["items"][k] for k in sorted(spec["items"], reverse=True))
    return names


def _placed(leaves: list[Any], specs: list[dict[str, Any]], mesh: dict[str, Any] | None) -> tuple[Any, list[Any]]:
    """The mesh of a MeshDict and the input avals `leaves` carrying their partition's shardings
    ((None, `leaves`) without a mesh)."""
    if mesh is None:
        return None, leaves
    built = make_mesh(mesh)
    placed = place(dict(zip(leaf_names(specs), leaves, strict=True)), mesh.get("partition") or {}, built)
    return built, list(placed.values())


def residual_notes(
    fn: Callable[..., Any], specs: list[dict[str, Any]], mesh: dict[str, Any] | None = None
) -> list[dict[str, Any]] | None:
    """Describes each saved residual the way `print_saved_residuals` does ("output of sin from ...").

    Advisory only: for people reading a verdict. Uses `jax._src.ad_checkpoint.saved_residuals`,
    which JAX 0.10.2 no longer exports publicly. Returns `[{"shape", "dtype", "note"}, ...]` in
    the order the VJP stores residuals, or None when the description fails. A frame in a library
    is named relative to it (`flax/core/axes_scan.py:200:14`, `jailside.paths.local_paths`), never
    by its path on the host.
    """
    try:
        # JAX only inside the jail's child (and the reference's): the runner's protocol stays light
        import jax
        from jax._src import ad_checkpoint

        dynamic = dynamic_avals(specs)
        names = [s["name"] for s in specs if s["kind"] != "static"]
        # on the mesh, with the inputs placed, as `export_case` traces it
        built, placed = _placed(jax.tree_util.tree_leaves(dynamic), specs, mesh)
        dynamic = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(dynamic), placed)
        with _on(built):
            # JAX types the avals as AbstractValue; a residual's is a ShapedArray (else `.shape` raises below)
            found = cast(
                "list[tuple[core.ShapedArray, str]]", ad_checkpoint.saved_residuals(bind_static(fn, specs), *dynamic)
            )
        # our wrapper's parameter is `*dynamic`: give the arguments their problem's names back
        return [
            {
                "shape": [int(d) for d in aval.shape],
                "dtype": str(aval.dtype),
                "note": local_paths(re.sub(r"dynamic\[(\d+)\]", lambda m: names[int(m.group(1))], str(note))),
            }
            for aval, note in found
        ]
    except Exception:  # noqa: BLE001 - advisory: a failure here must not change the verdict
        return None
