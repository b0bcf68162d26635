"""Hostile exported artifacts for the verifier: hand-written StableHLO in real `jax.export` wrappers.

A submission controls the whole jail process, so the bundle it returns may carry ANY module, not
only what `jax.export` would produce. These helpers build such modules for the problem
`checkpoint_dot_policy` (args w1 f32[d,d], w2 f32[d,d], x f32[N,d]; output f32[]; reference
residuals w1, w2, x and two f32[N,d]) so that the public signatures are exactly right (the
verifier's aval checks pass) and the hostility sits inside: internal values, callees, regions,
attributes.

How an artifact is made: MLIR text (or a module edited with the MLIR Python bindings) is turned
into a StableHLO portable artifact with `serialize_portable_artifact`, the same call
`jax.export` uses, and put into the `Exported` of a real export of a function with the same
avals (`dataclasses.replace(..., mlir_module_serialized=...)`), then `Exported.serialize()`.

The functions `mlir_to_portable` and `exported_bytes` are self-contained (they import what they
use) so `jail_forgery_source` can paste their source into a submission that forges its bundle
from inside the jail.
"""

from __future__ import annotations

import base64
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# The cases of problems/checkpoint_dot_policy/problem.toml: name -> (d, N).
DOT_CASES: dict[str, tuple[int, int]] = {"small": (4, 8), "rectangular": (16, 40), "large": (256, 1024)}

Shape = tuple[tuple[int, ...], str]  # (shape, numpy dtype name)


# --- turning MLIR into exported artifacts (self-contained: also pasted into jail submissions) ----


def mlir_to_portable(module_text: str, edit: Any = None, *, plain: bool = False) -> bytes:
    """Parses StableHLO text and serializes it as a portable artifact (VHLO bytecode), as
    `jax.export` does; `edit(module)` may change the parsed module first (for modules whose text
    would be too large to write). With `plain`, writes plain StableHLO bytecode instead, which
    `deserialize_portable_artifact` (so the verifier and `Exported.call`) accepts as well, and
    which is much faster to write for deeply nested regions (the VHLO conversion of 300 nested
    regions around 40,000 ops takes about a minute)."""
    import io

    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib import _jax
    from jax._src.lib.mlir import ir
    from jax._src.lib.mlir.dialects import hlo

    target = hlo.get_version_from_compatibility_requirement(hlo.StablehloCompatibilityRequirement.WEEK_4)
    with jax_mlir.make_ir_context() as context:
        context.allow_unregistered_dialects = True
        module = ir.Module.parse(module_text)
        if edit is not None:
            edit(module)
        if plain:
            out = io.BytesIO()
            module.operation.write_bytecode(file=out)
            return out.getvalue()
        return bytes(_jax.mlir.serialize_portable_artifact(module, target, False))


def exported_bytes(portable: bytes, in_avals: list, out_avals: list, **fields: Any) -> bytes:
    """`Exported.serialize()` of an export whose module is `portable` and whose public avals are
    `in_avals` / `out_avals` ([(shape, dtype name), ...]); `fields` replace more Exported fields
    (say platforms=("cuda",))."""
    import dataclasses

    import jax
    import jax.numpy as jnp
    from jax import export

    in_specs = [jax.ShapeDtypeStruct(tuple(s), jnp.dtype(t)) for s, t in in_avals]

    def template(*args: Any) -> list[Any]:  # uses every argument, so none is dropped from the signature
        total = sum(jnp.sum(a).astype(jnp.float32) for a in args)
        return [jnp.zeros(tuple(s), jnp.dtype(t)) + total.astype(jnp.dtype(t)) for s, t in out_avals]

    real = export.export(jax.jit(template), platforms=["cpu"])(*in_specs)
    forged = dataclasses.replace(
        real, mlir_module_serialized=portable, module_kept_var_idx=tuple(range(len(in_avals))), **fields
    )
    return bytes(forged.serialize())


# --- MLIR text for checkpoint_dot_policy --------------------------------------------------------

_DTYPES = {"float32": "f32", "int32": "i32", "int64": "i64", "bool": "i1"}


def tensor(shape: tuple[int, ...], dtype: str = "float32") -> str:
    """MLIR tensor type text: tensor(((4, 4)) -> 'tensor<4x4xf32>'."""
    return "tensor<" + "".join(f"{n}x" for n in shape) + _DTYPES[dtype] + ">"


@dataclass(frozen=True)
class CaseSig:
    """The public avals of one case's fwd and bwd, as the verifier expects them."""

    name: str
    d: int
    n: int

    @property
    def fwd_in(self) -> list[Shape]:
        d, n = self.d, self.n
        return [((d, d), "float32"), ((d, d), "float32"), ((n, d), "float32")]

    @property
    def fwd_out(self) -> list[Shape]:
        return [((), "float32"), *self.fwd_in, ((self.n, self.d), "float32"), ((self.n, self.d), "float32")]

    @property
    def bwd_in(self) -> list[Shape]:
        return [*self.fwd_out[1:], ((), "float32")]

    @property
    def bwd_out(self) -> list[Shape]:
        return self.fwd_in


def cases() -> list[CaseSig]:
    return [CaseSig(name, d, n) for name, (d, n) in DOT_CASES.items()]


def fwd_text(sig: CaseSig, body: str = "", functions: str = "") -> str:
    """The fwd program of a cheap wrong function (output sum(x), residuals w1, w2, x, x, x: the
    reference's residual avals), with `body` inserted before the output.

    `body` may use %w1, %w2, %x (the arguments), %zero (f32[] 0) and %s (f32[] sum of x), and
    must define %h : tensor<f32>, which is added to the output. `functions` are more func.func
    of the module.
    """
    d, n = sig.d, sig.n
    w, xs, sc = tensor((d, d)), tensor((n, d)), tensor(())
    body = body or f"    %h = stablehlo.constant dense<0.0> : {sc}\n"
    return f"""module @jit_fwd attributes {{mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32}} {{
  func.func public @main(%w1: {w}, %w2: {w}, %x: {xs}) -> ({sc}, {w}, {w}, {xs}, {xs}, {xs}) {{
    %zero = stablehlo.constant dense<0.0> : {sc}
    %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0, 1] : ({xs}, {sc}) -> {sc}
{body}    %out = stablehlo.add %s, %h : {sc}
    return %out, %w1, %w2, %x, %x, %x : {sc}, {w}, {w}, {xs}, {xs}, {xs}
  }}
{functions}}}
"""


def bwd_text(sig: CaseSig, body: str = "", functions: str = "") -> str:
    """The matching bwd: gradients (0, 0, ct everywhere); `body` as in `fwd_text` may use %r_w1,
    %r_w2, %r_x, %r_a, %r_b (residuals), %ct and %zero, and must define %h : tensor<f32>, which
    is added to the x gradient."""
    d, n = sig.d, sig.n
    w, xs, sc = tensor((d, d)), tensor((n, d)), tensor(())
    body = body or f"    %h = stablehlo.constant dense<0.0> : {sc}\n"
    return f"""module @jit_bwd attributes {{mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32}} {{
  func.func public @main(%r_w1: {w}, %r_w2: {w}, %r_x: {xs}, %r_a: {xs}, %r_b: {xs}, %ct: {sc}) -> ({w}, {w}, {xs}) {{
    %zero = stablehlo.constant dense<0.0> : {sc}
{body}    %g = stablehlo.add %ct, %h : {sc}
    %gw = stablehlo.broadcast_in_dim %zero, dims = [] : ({sc}) -> {w}
    %gx = stablehlo.broadcast_in_dim %g, dims = [] : ({sc}) -> {xs}
    return %gw, %gw, %gx : {w}, {w}, {xs}
  }}
{functions}}}
"""


Forger = Callable[[CaseSig], tuple[bytes, bytes]]


def artifacts(
    sig: CaseSig,
    fwd: str | None = None,
    bwd: str | None = None,
    *,
    fwd_edit: Any = None,
    bwd_edit: Any = None,
    **fields: Any,
) -> tuple[bytes, bytes]:
    """Serialized (fwd, bwd) Exported artifacts of one case from MLIR text (the cheap wrong
    function's where None)."""
    f = exported_bytes(mlir_to_portable(fwd or fwd_text(sig), fwd_edit), sig.fwd_in, sig.fwd_out, **fields)
    b = exported_bytes(mlir_to_portable(bwd or bwd_text(sig), bwd_edit), sig.bwd_in, sig.bwd_out, **fields)
    return f, b


def bundle(forge: Forger, *, only: str | None = None) -> bytes:
    """The bundle JSON (sandbox/bundle.py) with every case's artifacts from `forge(sig)`; with
    `only`, the other cases get the cheap wrong function's artifacts (so the verifier meets the
    hostile module in that case only)."""
    out = []
    for sig in cases():
        fwd, bwd = forge(sig) if only in (None, sig.name) else artifacts(sig)
        out.append(
            {
                "name": sig.name,
                "n_primal_outputs": 1,
                "fwd": base64.b64encode(fwd).decode(),
                "bwd": base64.b64encode(bwd).decode(),
                "residual_notes": None,
            }
        )
    return json.dumps(
        {"format": "remat-judge-bundle/1", "status": "ok", "error": None, "cases": out, "timings_ms": {}}
    ).encode()


# --- attack 1: dynamic shapes and unranked tensors ----------------------------------------------


def dynamic_pad_body(rows: int, cols: int) -> str:
    """%h from a f32[?,?] rows x cols temporary made by allowed ops only (reshape, then pad with a
    dynamic result type, which StableHLO accepts as "compatible"), held by an optimization_barrier
    so XLA allocates it (XLA refines the shape and runs it). A static walk that counts dynamic
    dims as 0 bytes sees nothing of it."""
    sc = tensor(())
    return f"""    %s11 = stablehlo.reshape %s : ({sc}) -> tensor<1x1xf32>
    %big = stablehlo.pad %s11, %zero, low = [0, 0], high = [{rows - 1}, {cols - 1}], interior = [0, 0] : (tensor<1x1xf32>, {sc}) -> tensor<?x?xf32>
    %held = stablehlo.optimization_barrier %big : tensor<?x?xf32>
    %h = stablehlo.reduce(%held init: %zero) applies stablehlo.add across dimensions = [0, 1] : (tensor<?x?xf32>, {sc}) -> {sc}
"""


def in_case_region(body: str) -> str:
    """`body` (which defines %h) moved into the only branch of a stablehlo.case."""
    sc, idx = tensor(()), tensor((), "int32")
    inner = body.replace("%h =", "%hh =")
    return (
        f"    %i = stablehlo.constant dense<0> : {idx}\n"
        f'    %h = "stablehlo.case"(%i) ({{\n{inner}      stablehlo.return %hh : {sc}\n'
        f"    }}) : ({idx}) -> {sc}\n"
    )


def dynamic_callee(value: str, shape: tuple[int, int]) -> tuple[str, str]:
    """(body, functions): the 2-d f32 `value` (say "%x" in fwd, "%r_x" in bwd) relabelled f32[?,?]
    (abs with a dynamic result type) and passed to a private callee taking f32[?,?]."""
    xs, sc = tensor(shape), tensor(())
    body = f"""    %xd = stablehlo.abs {value} : ({xs}) -> tensor<?x?xf32>
    %h = func.call @total(%xd) : (tensor<?x?xf32>) -> {sc}
"""
    functions = f"""  func.func private @total(%v: tensor<?x?xf32>) -> {sc} {{
    %z = stablehlo.constant dense<0.0> : {sc}
    %t = stablehlo.reduce(%v init: %z) applies stablehlo.add across dimensions = [0, 1] : (tensor<?x?xf32>, {sc}) -> {sc}
    %h = stablehlo.multiply %t, %z : {sc}
    return %h : {sc}
  }}
"""
    return body, functions


def dynamic_broadcast_body(rows: int, cols: int) -> str:
    """%h from a f32[?,?] rows x cols temporary made by dynamic_broadcast_in_dim (an op off the
    allowlist: refused as an op even before the fix)."""
    sc = tensor(())
    return f"""    %dims = stablehlo.constant dense<[{rows}, {cols}]> : tensor<2xi64>
    %big = stablehlo.dynamic_broadcast_in_dim %s, %dims, dims = [] : ({sc}, tensor<2xi64>) -> tensor<?x?xf32>
    %held = stablehlo.optimization_barrier %big : tensor<?x?xf32>
    %h = stablehlo.reduce(%held init: %zero) applies stablehlo.add across dimensions = [0, 1] : (tensor<?x?xf32>, {sc}) -> {sc}
"""


# StableHLO ops refuse unranked tensors, so no allowed op can make one; a function may still be
# typed with them (and deserializes fine), here one that nothing calls.
UNRANKED_DEAD_FUNCTION = """  func.func private @unused(%v: tensor<*xf32>) -> tensor<*xf32> {
    return %v : tensor<*xf32>
  }
"""


# --- attack 2: a deep chain of calls ----------------------------------------------------------


def call_chain(depth: int) -> tuple[str, str]:
    """(body, functions): main calls @f0, which calls @f1, ... down to @f{depth-1}."""
    sc = tensor(())
    body = f"    %h = func.call @f0(%zero) : ({sc}) -> {sc}\n"
    lines = []
    for i in range(depth):
        inner = (
            f"    %r = func.call @f{i + 1}(%a) : ({sc}) -> {sc}\n    return %r : {sc}\n"
            if i + 1 < depth
            else f"    return %a : {sc}\n"
        )
        lines.append(f"  func.func private @f{i}(%a: {sc}) -> {sc} {{\n{inner}  }}\n")
    return body, "".join(lines)


# --- attack 3: a small artifact whose text is huge ------------------------------------------------


def repeated_attribute_body(uses: int) -> str:
    """%h from `uses` adds, each carrying a discardable string attribute `note`. The attribute is
    written "PLACEHOLDER" here; `huge_attribute_edit` makes it huge after parsing. Bytecode stores
    the string once; printed text repeats it at every use."""
    sc = tensor(())
    lines = [f"    %h0 = stablehlo.add %zero, %zero : {sc}\n"]
    for i in range(uses):
        lines.append(f'    %h{i + 1} = stablehlo.add %h{i}, %zero {{note = "PLACEHOLDER"}} : {sc}\n')
    lines.append(f"    %h = stablehlo.add %h{uses}, %zero : {sc}\n")
    return "".join(lines)


def huge_attribute_edit(length: int) -> Callable[[Any], None]:
    """An edit for `mlir_to_portable`: every `note` attribute becomes a string of `length` bytes."""

    def edit(module: Any) -> None:
        from jax._src.lib.mlir import ir

        value = ir.StringAttr.get("A" * length)

        def visit(op: Any) -> None:
            for region in op.regions:
                for block in region.blocks:
                    for inner in block.operations:
                        if "note" in inner.attributes:
                            inner.attributes["note"] = value
                        visit(inner)

        visit(module.operation)

    return edit


def repeated_callee_body(uses: int) -> tuple[str, str]:
    """(body, functions): main calls the identity @callee `uses` times; `huge_name_edit` renames
    it to a huge symbol, which printed text repeats at every call."""
    sc = tensor(())
    lines = [f"    %h0 = stablehlo.add %zero, %zero : {sc}\n"]
    for i in range(uses):
        lines.append(f"    %h{i + 1} = func.call @callee(%h{i}) : ({sc}) -> {sc}\n")
    lines.append(f"    %h = stablehlo.add %h{uses}, %zero : {sc}\n")
    functions = f"  func.func private @callee(%a: {sc}) -> {sc} {{\n    return %a : {sc}\n  }}\n"
    return "".join(lines), functions


def huge_name_edit(length: int) -> Callable[[Any], None]:
    """An edit for `mlir_to_portable`: renames @callee to a name of `length` bytes, calls included."""

    def edit(module: Any) -> None:
        from jax._src.lib.mlir import ir

        name = "c" * length
        table = ir.SymbolTable(module.operation)
        ir.SymbolTable.replace_all_symbol_uses("callee", name, module.operation)
        ir.SymbolTable.set_symbol_name(table["callee"], name)

    return edit


def text_size(portable: bytes) -> int:
    """Characters of the module text `Exported.mlir_module()` would render (it prints with debug
    info), measured without keeping the text: a file-like that counts."""
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib import _jax

    class Counter:
        n = 0

        def write(self, chunk: str) -> None:
            self.n += len(chunk)

    counter = Counter()
    with jax_mlir.make_ir_context():
        module = _jax.mlir.deserialize_portable_artifact(portable)
        module.operation.print(file=counter, enable_debug_info=True)
    return counter.n


# --- attack 4: deep region nesting around many ops ------------------------------------------------


def nested_case_body(depth: int, adds: int) -> str:
    """%h from `depth` nested single-branch stablehlo.case ops, the innermost holding a chain of
    `adds` adds of a value from outside (each level's walk sees every op below it)."""
    sc, idx = tensor(()), tensor((), "int32")
    lines = [f"    %i = stablehlo.constant dense<0> : {idx}\n"]
    lines.append('    %h = "stablehlo.case"(%i) ({\n')
    for level in range(1, depth):
        lines.append(f'      %c{level} = "stablehlo.case"(%i) ({{\n')
    lines.append(f"        %a0 = stablehlo.add %s, %zero : {sc}\n")
    for k in range(1, adds):
        lines.append(f"        %a{k} = stablehlo.add %a{k - 1}, %s : {sc}\n")
    lines.append(f"        stablehlo.return %a{adds - 1} : {sc}\n")
    for level in range(depth - 1, 0, -1):
        lines.append(f"      }}) : ({idx}) -> {sc}\n      stablehlo.return %c{level} : {sc}\n")
    lines.append(f"    }}) : ({idx}) -> {sc}\n")
    return "".join(lines)


# --- attack 5: a static temporary the verifier's memory cannot hold -------------------------------


def big_static_temporary_body(rows: int, cols: int) -> str:
    """%h from a static f32[rows, cols] temporary: s reshaped to f32[1,1] and padded (a broadcast of
    a scalar is never materialized by XLA, even behind a barrier; a pad is), held by an
    optimization_barrier, then summed."""
    sc, big = tensor(()), tensor((rows, cols))
    return f"""    %s11 = stablehlo.reshape %s : ({sc}) -> tensor<1x1xf32>
    %big = stablehlo.pad %s11, %zero, low = [0, 0], high = [{rows - 1}, {cols - 1}], interior = [0, 0] : (tensor<1x1xf32>, {sc}) -> {big}
    %held = stablehlo.optimization_barrier %big : {big}
    %h = stablehlo.reduce(%held init: %zero) applies stablehlo.add across dimensions = [0, 1] : ({big}, {sc}) -> {sc}
"""


# --- attack 6: regressions --------------------------------------------------------------------


def custom_call_body() -> str:
    sc = tensor(())
    return f"    %h = stablehlo.custom_call @my_host_function(%s) {{has_side_effect = false}} : ({sc}) -> {sc}\n"


# --- a submission that forges its bundle from inside the jail ---------------------------------------


def jail_forgery_source(modules: dict[str, tuple[str, str]]) -> str:
    """Python source of a submission that builds the artifacts of `modules` (case name -> (fwd
    MLIR text, bwd MLIR text)) inside the jail, writes the bundle to the runner's result pipe
    (the one pipe open for writing besides stdout and stderr, found as
    problems/checkpoint_dot_policy/wrong/forged_bundle.py finds it) and exits before the runner
    can write the real one."""
    sigs = {sig.name: (sig.fwd_in, sig.fwd_out, sig.bwd_in, sig.bwd_out) for sig in cases()}
    return f"""# Forgery: hand-written StableHLO with correct public avals, serialized and bundled in-jail.
import base64, fcntl, json, os, sys
from typing import Any


def result_pipe() -> int:
    for fd in sorted(int(n) for n in os.listdir("/proc/self/fd")):
        try:
            if fd > 2 and os.readlink(f"/proc/self/fd/{{fd}}").startswith("pipe:") \\
                    and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:
                return fd
        except OSError:
            continue
    raise RuntimeError("no result pipe found")


{inspect.getsource(mlir_to_portable)}
{inspect.getsource(exported_bytes)}
MODULES = {modules!r}
SIGS = {sigs!r}
cases = []
for name, (fwd_mlir, bwd_mlir) in MODULES.items():
    fwd_in, fwd_out, bwd_in, bwd_out = SIGS[name]
    fwd = exported_bytes(mlir_to_portable(fwd_mlir), fwd_in, fwd_out)
    bwd = exported_bytes(mlir_to_portable(bwd_mlir), bwd_in, bwd_out)
    cases.append({{"name": name, "n_primal_outputs": 1, "fwd": base64.b64encode(fwd).decode(),
                  "bwd": base64.b64encode(bwd).decode(), "residual_notes": None}})
os.write(result_pipe(), json.dumps({{"format": "remat-judge-bundle/1", "status": "ok", "error": None,
                                   "cases": cases, "timings_ms": {{}}}}).encode())
os._exit(0)
"""
