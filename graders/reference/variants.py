"""The reference's comparison points: the same function with no checkpoint and under one plain
`jax.checkpoint` (everything recomputed), exported and read like the reference itself. They place
a verdict on the panel's planes; no verdict depends on them.

On a mesh their residual bytes are per device, like every residual figure of a mesh problem: each
residual's piece on one device (`sharding.shard_shape` of the forward program's output shardings),
and their backward programs are compiled for the mesh so the bytes each device receives through
their collectives can be set beside the reference's (docs/ARCHITECTURE.md, "Problems on a mesh").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from graders.untrusted.parse import deserialize
from graders.untrusted.reader import inspect_module
from graders.untrusted.result import ModuleInfo
from graders.verifier.collectives import communication
from graders.verifier.placement import mesh_of
from graders.verifier.xla_memory import held_bytes, xla_memory
from jailside.export import export_case


@dataclass(frozen=True)
class Variant:
    """One comparison point.

    Attributes:
        residual_bytes: what its residuals take: on one device their bytes; on a mesh the bytes of
            the pieces one device keeps.
        bwd_info: its backward program as the artifact reader sees it (FLOPs, recompute, peak).
        bwd_received_bytes: on a mesh, the bytes one device receives through the collectives of
            its compiled backward program (`graders.verifier.collectives`); None on one device.
        bwd_device_bytes: on a mesh, what one device holds while that program runs, by XLA's
            count (`graders.verifier.xla_memory.held_bytes`); None on one device.
    """

    residual_bytes: int
    bwd_info: ModuleInfo
    bwd_received_bytes: int | None = None
    bwd_device_bytes: int | None = None


def _per_device(fwd: Any, bwd: Any, n_out: int, mesh: dict[str, Any]) -> tuple[int, int, int | None]:
    """(residual bytes per device, bytes one device receives in the compiled backward program,
    what one device holds while it runs)."""
    # JAX only in the child that builds expectations: the server imports this package
    import jax

    m = mesh_of(mesh)
    shardings = fwd.out_shardings_jax(m)
    nbytes = sum(
        math.prod(s.shard_shape(tuple(a.shape))) * a.dtype.itemsize
        for a, s in zip(fwd.out_avals[n_out:], shardings[n_out:], strict=True)
    )
    args = [
        jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s)
        for a, s in zip(bwd.in_avals, bwd.in_shardings_jax(m), strict=True)
    ]
    compiled = jax.jit(bwd.call).lower(*args).compile()
    received = communication(compiled.as_text() or "", math.prod(mesh["axes"].values())).received_bytes
    return nbytes, received, held_bytes(xla_memory(compiled))


def variant_facts(fn: Callable[..., Any], specs: list[dict[str, Any]], mesh: dict[str, Any] | None) -> Variant | None:
    """The `Variant` of `fn` (a variant of the reference) on the case `specs`, or None when it
    fails to export, be read or (on a mesh) compile."""
    axes = None if mesh is None else dict(mesh["axes"])
    try:
        fwd_blob, bwd_blob, n_out = export_case(fn, specs, mesh)
        fwd, bwd = deserialize(fwd_blob), deserialize(bwd_blob)
        forward = inspect_module(fwd, mesh_axes=axes).op_signatures
        bwd_info = inspect_module(bwd, cotangents=n_out, forward_ops=forward, mesh_axes=axes)
        if mesh is None:
            return Variant(sum(a.size * a.dtype.itemsize for a in fwd.out_avals[n_out:]), bwd_info)
        nbytes, received, held = _per_device(fwd, bwd, n_out, mesh)
        return Variant(nbytes, bwd_info, received, held)
    except Exception:  # noqa: BLE001 - a comparison point only: the verdict never depends on it
        return None


def everything_recomputed(fn: Callable[..., Any], specs: list[dict[str, Any]]) -> Callable[..., Any]:
    """`fn` under one plain `jax.checkpoint`: saves the inputs and recomputes everything."""
    # JAX only in the child that builds expectations: the server imports this package
    import jax

    static = tuple(i for i, s in enumerate(specs) if s["kind"] == "static")
    return jax.checkpoint(fn, static_argnums=static)
