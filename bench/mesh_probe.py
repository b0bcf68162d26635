"""What an FSDP layer saves, moves and holds per device on a mesh of simulated CPU devices: the
measurements the mesh problems are judged on.

Two styles of the same layers (`tanh(x @ w)` per layer, `x` and every `w` split by rows over the
`fsdp` axis, each layer under `jax.checkpoint` with the weight gathered inside it), under
`dots_saveable` and `everything_saveable`:

- `shard_map`: `jax.shard_map` over the mesh, `w = all_gather(w_shard, "fsdp", tiled=True)`;
- `jit`: `jax.jit` on NamedSharding inputs over Auto axes, the weight gathered by
  `with_sharding_constraint(w, P())` (the partitioner inserts the collectives).

Each variant's VJP is exported as `jailside.export.export_case` does (fwd returns the primal
outputs and the VJP closure's leaves, bwd takes the residuals and the cotangent), with the inputs'
avals carrying their shardings (`jailside.mesh.place`); bwd's residual avals carry the shardings
the compiled fwd gives its outputs (export_case's carry none). Both are serialized, deserialized,
compiled and run on placed inputs. Printed per variant:

- per residual: global shape, per-device shape (`r.sharding.shard_shape(r.shape)`), memory
  kind, bytes per device, and the residuals' total per device;
- per program: the non-StableHLO operations of the exported module (sdy.*, func.*, ...) and the
  sdy attributes; the collectives of the compiled per-device HLO (`compiled.as_text()`) with the
  bytes of their operands and results per device and an estimate of the bytes each device
  receives (all-gather: result x (g-1)/g, reduce-scatter and all-to-all: operand x (g-1)/g,
  all-reduce: 2 x operand x (g-1)/g as a ring does, collective-permute: operand; g the replica
  group's size); `compiled.memory_analysis()` in bytes per device;
- the largest difference of the gradients from single-device `jax.vjp` of the same layers.

Usage:
    XLA_FLAGS=--xla_force_host_platform_device_count=4 .venv/bin/python bench/mesh_probe.py
        [--batch 32] [--width 64] [--layers 2]
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from common import REPO  # noqa: F401  (puts the repository on the import path)
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jailside.mesh import make_mesh, place

DEVICES = 4
FLAG = f"--xla_force_host_platform_device_count={DEVICES}"
POLICIES = {
    "dots_saveable": jax.checkpoint_policies.dots_saveable,
    "everything_saveable": jax.checkpoint_policies.everything_saveable,
}
DTYPE_BYTES = {
    "pred": 1,
    "s8": 1,
    "u8": 1,
    "bf16": 2,
    "f16": 2,
    "s16": 2,
    "f32": 4,
    "s32": 4,
    "u32": 4,
    "f64": 8,
    "s64": 8,
    "u64": 8,
}
COLLECTIVE_RE = re.compile(
    r"^\s*(?:ROOT\s+)?%[\w.\-]+\s*=\s*(\([^=]*?\)|\S+)\s+"
    r"(all-gather|reduce-scatter|all-reduce|all-to-all|collective-permute|collective-broadcast)(?:-start)?\(([^)]*)\)(.*)$"
)
DEFINITION_RE = re.compile(r"^\s*(?:ROOT\s+)?%([\w.\-]+)\s*=\s*(\([^=]*?\)|\S+)\s")
MODULE_OP_RE = re.compile(r'^\s*(?:%[^=]+=\s*)?"?([a-z_]+(?:\.[a-z_]+)+)"?[\s(<{@]')


def layers(style: str, policy: Any, mesh: jax.sharding.Mesh) -> Callable[[Any, list[Any]], Any]:
    """The FSDP layers `f(x, ws)` in `style` ("shard_map" or "jit"), each layer checkpointed."""

    def sharded_layer(x: Any, w_shard: Any) -> Any:
        return jnp.tanh(x @ jax.lax.all_gather(w_shard, "fsdp", tiled=True))

    def constrained_layer(x: Any, w: Any) -> Any:
        return jnp.tanh(x @ jax.lax.with_sharding_constraint(w, NamedSharding(mesh, P())))

    layer = jax.checkpoint(sharded_layer if style == "shard_map" else constrained_layer, policy=policy)

    def body(x: Any, ws: list[Any]) -> Any:
        for w in ws:
            x = layer(x, w)
        return x

    if style == "jit":
        return body
    return jax.shard_map(body, mesh=mesh, in_specs=(P("fsdp"), P("fsdp")), out_specs=P("fsdp"))


def export_vjp(f: Callable[..., Any], avals: list[Any]) -> tuple[Any, Callable[[list[Any]], Any], int]:
    """fwd exported as export_case does, and a function exporting bwd at the given residual and
    cotangent avals (with shardings); (fwd Exported, bwd exporter, number of primal outputs)."""
    captured: dict[str, Any] = {}

    def fwd(x: Any, *ws: Any) -> list[Any]:
        out, vjp_fn = jax.vjp(f, x, list(ws))
        captured["vjp_tree"] = jax.tree_util.tree_structure(vjp_fn)
        captured["out_tree"] = jax.tree_util.tree_structure(out)
        return [*jax.tree_util.tree_leaves(out), *jax.tree_util.tree_leaves(vjp_fn)]

    fwd_exp = jax.export.export(jax.jit(fwd), platforms=["cpu"])(*avals)
    n_out = captured["out_tree"].num_leaves
    n_res = len(fwd_exp.out_avals) - n_out

    def bwd(*leaves: Any) -> list[Any]:
        vjp_fn = jax.tree_util.tree_unflatten(captured["vjp_tree"], leaves[:n_res])
        return list(
            jax.tree_util.tree_leaves(vjp_fn(jax.tree_util.tree_unflatten(captured["out_tree"], leaves[n_res:])))
        )

    def export_bwd(bwd_avals: list[Any]) -> Any:
        return jax.export.export(jax.jit(bwd), platforms=["cpu"])(*bwd_avals)

    return fwd_exp, export_bwd, n_out


def type_bytes(hlo_type: str) -> int:
    """Bytes of an HLO type, e.g. `f32[16,64]{1,0}` or a tuple of them."""
    return sum(
        DTYPE_BYTES.get(dtype, 4) * math.prod(int(d) for d in dims.split(",") if d)
        for dtype, dims in re.findall(r"\b([a-z]+\d*)\[([\d,]*)\]", hlo_type)
    )


def group_size(attributes: str, default: int) -> int:
    """The size of a collective's first replica group (`{{0,1,2,3}}` or iota `[1,4]<=[4]`)."""
    listed = re.search(r"replica_groups=\{\{([\d,]*)\}", attributes)
    if listed:
        return len(listed.group(1).split(","))
    iota = re.search(r"replica_groups=\[(\d+),(\d+)\]<=", attributes)
    return int(iota.group(2)) if iota else default


def collectives(hlo: str, devices: int) -> dict[str, list[int]]:
    """Per collective kind in compiled HLO: [count, operand bytes, result bytes, received bytes
    (the estimate of the module docstring)], per device."""
    defined = {m.group(1): m.group(2) for line in hlo.splitlines() if (m := DEFINITION_RE.match(line))}
    found: dict[str, list[int]] = {}
    for line in hlo.splitlines():
        m = COLLECTIVE_RE.match(line)
        if not m:
            continue
        result_type, kind, operands, attributes = m.groups()
        operand_bytes = sum(
            type_bytes(defined.get(o.strip().lstrip("%"), "")) for o in operands.split(",") if o.strip()
        )
        result_bytes = type_bytes(result_type)
        share = (group_size(attributes, devices) - 1) / group_size(attributes, devices)
        received = {
            "all-gather": result_bytes * share,
            "all-reduce": 2 * operand_bytes * share,
            "collective-permute": operand_bytes,
        }.get(kind, operand_bytes * share)
        row = found.setdefault(kind, [0, 0, 0, 0])
        for i, value in enumerate((1, operand_bytes, result_bytes, round(received))):
            row[i] += value
    return found


def module_ops(text: str) -> tuple[Counter[str], Counter[str]]:
    """(operations that are not StableHLO's, sdy attributes) of an exported module's text."""
    ops: Counter[str] = Counter()
    for line in text.splitlines():
        m = MODULE_OP_RE.match(line)
        if m and not m.group(1).startswith("stablehlo."):
            ops[m.group(1)] += 1
    return ops, Counter(re.findall(r"\b(sdy\.[a-z_]+) =", text))


def report_program(name: str, exported: Any, compiled: Any, devices: int) -> None:
    """Prints a program's module operations, compiled collectives and memory figures."""
    ops, attrs = module_ops(exported.mlir_module())
    print(f"  {name}: nr_devices={exported.nr_devices}")
    print(f"    module ops (not stablehlo): {dict(sorted(ops.items()))}")
    print(f"    module sdy attributes: {dict(sorted(attrs.items()))}")
    shown = (
        sum(s is not None for s in exported.in_shardings_hlo),
        sum(s is not None for s in exported.out_shardings_hlo),
    )
    print(
        f"    Exported shardings given: {shown[0]}/{len(exported.in_avals)} in, "
        f"{shown[1]}/{len(exported.out_avals)} out"
    )
    found = collectives(compiled.as_text(), devices)
    if not found:
        print("    collectives (compiled HLO): none")
    for kind, (count, operand, result, received) in sorted(found.items()):
        print(
            f"    collective {kind:18s} x{count:<3d} operands {operand:>8,d} B  results {result:>8,d} B  "
            f"received ~{received:>8,d} B per device"
        )
    mem = compiled.memory_analysis()
    fields = ("argument", "output", "temp", "alias", "generated_code")
    figures = "  ".join(f"{f}={getattr(mem, f'{f}_size_in_bytes'):,d}" for f in fields)
    host = sum(getattr(mem, f"host_{f}_size_in_bytes") for f in fields)
    print(f"    memory_analysis (bytes per device): {figures}  host_*={host:,d}")


def report_residuals(residuals: list[Any]) -> None:
    """Prints each residual's global and per-device shape, memory kind and bytes per device."""
    total = 0
    for i, r in enumerate(residuals):
        piece = r.sharding.shard_shape(r.shape)
        size = math.prod(piece) * r.dtype.itemsize
        total += size
        print(
            f"    residual {i}: {r.dtype} global {list(r.shape)} per device {list(piece)} "
            f"{r.sharding.memory_kind} {size:,d} B/device  spec {getattr(r.sharding, 'spec', '?')}"
        )
    print(f"    residuals: {len(residuals)}, {total:,d} bytes per device")


def run_variant(
    style: str, policy: str, mesh: jax.sharding.Mesh, inputs: dict[str, np.ndarray], partition: dict[str, Any]
) -> None:
    """Exports, compiles and runs one variant's fwd and bwd, printing what the docstring says."""
    print(f"\n== {style} / {policy}")
    f = layers(style, POLICIES[policy], mesh)
    avals = list(
        place({k: jax.ShapeDtypeStruct(v.shape, v.dtype) for k, v in inputs.items()}, partition, mesh).values()
    )
    placed = list(place(inputs, partition, mesh).values())
    fwd_exp, export_bwd, n_out = export_vjp(f, avals)
    fwd = jax.export.deserialize(fwd_exp.serialize())
    fwd_c = jax.jit(fwd.call).lower(*placed).compile()
    outs = fwd_c(*placed)
    residuals, primal = outs[n_out:], outs[:n_out]
    report_residuals(residuals)
    shardings = fwd_c.output_shardings
    bwd_avals = [
        jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s) for a, s in zip(fwd.out_avals, shardings, strict=True)
    ]
    bwd = jax.export.deserialize(export_bwd([*bwd_avals[n_out:], *bwd_avals[:n_out]]).serialize())
    cotangent = [jax.device_put(np.cos(np.asarray(p)), p.sharding) for p in primal]
    bwd_c = jax.jit(bwd.call).lower(*residuals, *cotangent).compile()
    grads = bwd_c(*residuals, *cotangent)
    report_program("fwd", fwd, fwd_c, mesh.size)
    report_program("bwd", bwd, bwd_c, mesh.size)
    plain = layers("jit", POLICIES[policy], jax.make_mesh((1,), ("fsdp",), devices=jax.devices()[:1]))
    x, *ws = (jnp.asarray(v) for v in inputs.values())
    _, vjp_fn = jax.vjp(lambda x, ws: plain(x, ws), x, ws)
    expected = jax.tree_util.tree_leaves(vjp_fn(*(jnp.asarray(np.asarray(c)) for c in cotangent)))
    worst = max(float(np.max(np.abs(np.asarray(g) - np.asarray(e)))) for g, e in zip(grads, expected, strict=True))
    print(f"  gradients: {len(grads)}, max |difference| from single-device jax.vjp = {worst:.2e}")


def main() -> int:
    """Runs every variant; returns the exit status (2 when the process has too few devices)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    args = parser.parse_args()
    if len(jax.devices()) < DEVICES:
        print(f"needs {DEVICES} devices, has {len(jax.devices())}: run with XLA_FLAGS={FLAG}", file=sys.stderr)
        return 2
    mesh = make_mesh({"axes": {"fsdp": DEVICES}})
    rng = np.random.default_rng(0)
    inputs = {"x": rng.standard_normal((args.batch, args.width), dtype=np.float32)}
    for i in range(args.layers):
        inputs[f"ws[{i}]"] = (rng.standard_normal((args.width, args.width)) / np.sqrt(args.width)).astype(np.float32)
    partition = {name: ["fsdp", None] for name in inputs}
    print(
        f"jax {jax.__version__}, {len(jax.devices())} devices, mesh {dict(mesh.shape)} {mesh.axis_types}, "
        f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}"
    )
    print(
        f"inputs: x f32{[args.batch, args.width]}, {args.layers} x w f32{[args.width, args.width]}, "
        "every one split by rows over fsdp"
    )
    for style in ("shard_map", "jit"):
        for policy in POLICIES:
            run_variant(style, policy, mesh, inputs, partition)
    return 0


if __name__ == "__main__":
    sys.exit(main())
