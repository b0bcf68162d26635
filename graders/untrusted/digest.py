"""Content digests of untrusted modules: blind to debug locations (`normalized_digest`, the result
cache's key) and to function and argument names (`program_digest`, what the insight pages call
the same program)."""

from __future__ import annotations

import hashlib
import io
import json
from typing import Any

from graders.untrusted.ops import NAME_ATTRIBUTES
from graders.untrusted.parse import ir_context, mlir_ir, parse_module


def _calling_facts(exported: Any) -> dict[str, Any]:
    """What, besides the module, decides how an artifact is called and what it computes."""

    def avals(seq: Any) -> list[Any]:
        return [[[str(d) for d in a.shape], str(a.dtype), bool(getattr(a, "weak_type", False))] for a in seq]

    return {
        "in_avals": avals(exported.in_avals),
        "out_avals": avals(exported.out_avals),
        "in_tree": str(exported.in_tree),
        "out_tree": str(exported.out_tree),
        "platforms": [str(p) for p in exported.platforms],
        "nr_devices": int(exported.nr_devices),
        "in_shardings_hlo": [str(s) for s in exported.in_shardings_hlo],
        "out_shardings_hlo": [str(s) for s in exported.out_shardings_hlo],
        "ordered_effects": [str(e) for e in exported.ordered_effects],
        "unordered_effects": [str(e) for e in exported.unordered_effects],
        "disabled_safety_checks": [str(c) for c in exported.disabled_safety_checks],
        "calling_convention_version": int(exported.calling_convention_version),
        "module_kept_var_idx": [int(i) for i in exported.module_kept_var_idx],
        "uses_global_constants": bool(exported.uses_global_constants),
    }


def _hash(domain: bytes, module: Any, exported: Any) -> str:
    """sha256 (64 hex digits) of `domain`, `exported`'s calling facts and `module`'s bytecode."""
    bytecode = io.BytesIO()
    module.operation.write_bytecode(bytecode)
    h = hashlib.sha256(domain)
    h.update(json.dumps(_calling_facts(exported), sort_keys=True, separators=(",", ":")).encode())
    h.update(b"\0")
    h.update(bytecode.getvalue())
    return h.hexdigest()


def module_digest(module: Any, exported: Any) -> str:
    """sha256 of `module` without debug locations and of `_calling_facts(exported)`.

    Strips locations in place (`strip-debuginfo`; the module is not read afterwards) and hashes
    the module's bytecode rather than its text: bytecode is a faithful, deterministic encoding
    whose size stays that of the artifact, while text repeats uniqued attributes at every use (a
    1 MB artifact can print as gigabytes).
    """
    # JAX's MLIR only in the verifier child: the server imports graders.untrusted's types
    from jax._src.lib.mlir import passmanager

    passmanager.PassManager.parse("builtin.module(strip-debuginfo)").run(module.operation)
    return _hash(b"remat-judge normalized artifact\0", module, exported)


def normalized_digest(exported: Any) -> str:
    """A content digest of one artifact that ignores where its code came from.

    sha256 over the StableHLO module with every debug location stripped (source files, lines,
    function and scope names only live there) and over what decides how it is called: input and
    output avals, pytree structures, platforms, number of devices, shardings, effects, calling
    convention and kept inputs. Exporting the same function twice (in two processes, or from a
    file with other comments or line numbers) gives the same digest; a different computation
    (another checkpoint policy, say) a different one. Linear in the artifact's size: the module is
    parsed from bytecode and hashed as bytecode, never printed (see `module_digest`).
    `inspect_module` computes the same value as `ModuleInfo.digest` on the module it parses.

    Args:
        exported: a deserialized `jax.export.Exported`.

    Returns:
        64 lowercase hex digits.

    Raises:
        ArtifactError: the module cannot be parsed.
    """
    with ir_context():
        return module_digest(parse_module(exported), exported)


def program_digest(module: Any, exported: Any) -> str:
    """sha256 of `module` (its debug locations already stripped) with its private functions
    renamed `__f0`, `__f1`, ... in module order (a helper called `layer` or `lay` lowers to
    `@layer` or `@lay`) and the argument and result names JAX records removed, and of its
    calling facts. What stays visible: every op, its operands' order, shapes, dtypes, constants
    and attributes, and the call structure. So renaming variables or functions, reformatting, or
    comments leave it unchanged; inlining a helper by hand, reordering independent statements
    (which changes op order), or another way to write the same policy change it. Modifies
    `module` in place.
    """
    ir = mlir_ir()
    functions = [op for op in module.body.operations if op.operation.name == "func.func"]
    renamed = 0
    for function in functions:
        name = ir.StringAttr(function.attributes["sym_name"]).value
        if name == "main":
            continue
        canonical = f"__f{renamed}"
        renamed += 1
        ir.SymbolTable.replace_all_symbol_uses(name, canonical, module.operation)
        ir.SymbolTable.set_symbol_name(function, canonical)
    for function in functions:
        for key in ("arg_attrs", "res_attrs"):
            if key not in function.attributes:
                continue
            kept = []
            for attrs in ir.ArrayAttr(function.attributes[key]):
                attrs = ir.DictAttr(attrs)
                kept.append(
                    ir.DictAttr.get(
                        {
                            attrs[i].name: attrs[i].attr
                            for i in range(len(attrs))
                            if attrs[i].name not in NAME_ATTRIBUTES
                        }
                    )
                )
            function.attributes[key] = ir.ArrayAttr.get(kept)
    return _hash(b"remat-judge program\0", module, exported)
