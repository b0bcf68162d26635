"""`inspect_module`: every fact the verifier reads from one untrusted module, in one bounded pass."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from graders.artifact_limits import ReadLimits
from graders.untrusted.dependence import argument_dependence, selector_arguments
from graders.untrusted.digest import module_digest, program_digest
from graders.untrusted.flops import FlopCounter
from graders.untrusted.mesh_ops import MESH_DECLARATION
from graders.untrusted.ops import MEMORY_KINDS
from graders.untrusted.parse import ir_context, mlir_ir, parse_module
from graders.untrusted.provenance import provenance_of
from graders.untrusted.result import ArtifactError, ModuleInfo
from graders.untrusted.walker import ModuleWalker

MAX_RECOMPUTED_NAMED = 8  # recomputed operations named per program, the costliest first


def _result_memory_kinds(main: Any, n_results: int) -> list[str]:
    """Per result of `main`, its `mhlo.memory_kind` result attribute ("device" when unmarked).

    Raises:
        ArtifactError: a memory kind the judge does not know (a forged attribute).
    """
    ir = mlir_ir()
    kinds = ["device"] * n_results
    if "res_attrs" not in main.attributes:
        return kinds
    for i, attrs in enumerate(ir.ArrayAttr(main.attributes["res_attrs"])):
        if i >= n_results:
            break
        attrs = ir.DictAttr(attrs)
        if "mhlo.memory_kind" in attrs:
            kind = ir.StringAttr(attrs["mhlo.memory_kind"]).value
            if kind not in MEMORY_KINDS:
                raise ArtifactError(f"result {i} is left in memory of an unknown kind {kind[:40]!r}")
            kinds[i] = kind
    return kinds


def module_functions(module: Any, info: ModuleInfo, limits: ReadLimits, *, mesh: bool) -> dict[str, Any]:
    """The module's functions by name; any other top-level op is disallowed (`info.disallowed`),
    but for mesh declarations on a mesh. Raises ArtifactError past `limits.max_ops` functions."""
    ir = mlir_ir()
    functions: dict[str, Any] = {}
    for top in module.body.operations:
        if top.operation.name == MESH_DECLARATION and mesh:
            continue  # a symbol naming axes: nothing runs
        if top.operation.name != "func.func":
            info.disallowed.append(top.operation.name[:80])
            continue
        functions[ir.StringAttr(top.attributes["sym_name"]).value] = top
        if len(functions) > limits.max_ops:
            raise ArtifactError(f"the program has more than {limits.max_ops:,} functions")
    return functions


def _count_flops(info: ModuleInfo, counter: FlopCounter, cotangents: int) -> None:
    """Fills in `info`'s FLOP figures, its recomputed operations and its live op signatures."""
    cost, info.flops_exact, recomputed = counter.count_main(cotangents)
    info.flops, info.residual_flops = cost.high, cost.residual
    info.flops_low, info.residual_flops_low = cost.low, cost.residual_low
    info.recompute_flops, info.recompute_flops_low = cost.recompute, cost.recompute_low
    info.recomputed = {k: counter.labels[k] for k, _ in recomputed.most_common(MAX_RECOMPUTED_NAMED)}
    info.recomputed_signatures = dict(recomputed)
    info.op_signatures = frozenset(counter.signatures)


def _read_dependence(info: ModuleInfo, functions: dict[str, Any], order: list[str], *, backward: bool) -> None:
    """Fills in which outputs depend on the data (a forward program) or which arguments are only
    branched on (a backward program): what decides bookkeeping (`graders.untrusted.dependence`)."""
    if backward:
        info.selector_arguments = selector_arguments(functions, order)
    else:
        info.depends_on_arguments = argument_dependence(functions, order)


def inspect_module(
    exported: Any,
    *,
    allowed_custom_calls: frozenset[str] = frozenset(),
    limits: ReadLimits = ReadLimits(),
    cotangents: int = 0,
    forward_ops: frozenset[str] | None = None,
    mesh_axes: Mapping[str, int] | None = None,
) -> ModuleInfo:
    """Parses an Exported's StableHLO module from bytecode and inspects it without running it.

    Args:
        exported: a deserialized `jax.export.Exported`.
        allowed_custom_calls: custom_call targets permitted (a problem may allow some).
        limits: caps on ops, region nesting and call depth, enforced during the walk.
        cotangents: how many of `main`'s last arguments are cotangents (a backward program's:
            `ModuleInfo.residual_flops` counts the ops that depend on none of them).
        forward_ops: the forward program's `ModuleInfo.op_signatures`, when this is its backward
            program: the ops that repeat one are its recomputation (`ModuleInfo.recompute_flops`).
        mesh_axes: the problem's mesh (axis name -> size, trusted: from `problem.toml`), or None
            for a problem on one device. Only with a mesh may the module hold the sharding ops and
            collectives of `graders.untrusted.mesh_ops.MESH_OPS` and declare meshes (`sdy.mesh`); a
            `shard_map` body's FLOPs count once per device it runs on (its manual axes' sizes
            multiplied), so they are the whole mesh's, like a `jit`-style program's.

    Returns:
        ModuleInfo with op counts and disallowed ops; when nothing is disallowed, also peak live
        bytes, FLOPs, the provenance of `main`'s outputs and the artifact's `normalized_digest`;
        for a forward program (no `cotangents`) which outputs depend on an argument, for a
        backward program which arguments it uses only to pick branches
        (`graders.untrusted.dependence`).

    Raises:
        ArtifactError: the module cannot be parsed, has no public `main`, exceeds a cap, or has a
            value of dynamic shape or unknown type.
    """
    info = ModuleInfo()
    with ir_context():
        module = parse_module(exported)
        functions = module_functions(module, info, limits, mesh=mesh_axes is not None)
        info.functions = len(functions)
        reader = ModuleWalker(functions, limits, allowed_custom_calls, info, mesh=mesh_axes is not None)
        reader.scan()
        if "main" not in functions:
            raise ArtifactError("the module has no main function")
        if info.disallowed:  # only walk modules we would run
            return info
        for name in (order := reader.call_order()):
            reader.function_summary[name] = reader.walk_function(name)
        main = reader.function_summary["main"]
        info.peak_live_bytes = main.peak
        counter = FlopCounter(functions, reader.types.size, limits, forward=forward_ops, mesh_axes=mesh_axes)
        _count_flops(info, counter, cotangents)
        returned = list((main_block := functions["main"].regions[0].blocks[0]).operations)[-1].operands
        info.sources = [provenance_of(v, main_block, functions) for v in returned]
        info.memory_kinds = _result_memory_kinds(functions["main"], len(returned))
        _read_dependence(info, functions, order, backward=cotangents > 0)
        info.digest = module_digest(module, exported)  # it strips the module's locations
        info.program_digest = program_digest(module, exported)  # last: it renames the module's functions
    return info
