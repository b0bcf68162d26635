"""graders/untrusted/: residual bytes read from exported artifacts, peak live bytes, the op allowlist."""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from graders.untrusted.parse import deserialize, exported_avals
from graders.untrusted.reader import inspect_module
from graders.untrusted.result import ArtifactError
from jailside.export import export_case

X_1024 = [{"kind": "array", "name": "x", "shape": [1024], "dtype": "float32"}]
X_8 = [{"kind": "array", "name": "x", "shape": [8], "dtype": "float32"}]


def sin_chain(depth: int) -> Callable[[Any], Any]:
    """`jnp.sin` applied `depth` times."""

    def f(x):
        for _ in range(depth):
            x = jnp.sin(x)
        return x

    return f


def recursive_checkpoint(funs):
    """The recursive scheme from the `jax.checkpoint` docstring (seeds/jax-checkpoint-api.txt)."""
    if len(funs) == 1:
        return funs[0]
    elif len(funs) == 2:
        f1, f2 = funs
        return lambda x: f1(f2(x))
    else:
        f1 = recursive_checkpoint(funs[: len(funs) // 2])
        f2 = recursive_checkpoint(funs[len(funs) // 2 :])
        return lambda x: f1(jax.checkpoint(f2)(x))


SCHEMES: dict[str, Callable[[int], Callable[[Any], Any]]] = {
    "plain": sin_chain,
    "whole_chain_checkpointed": lambda depth: jax.checkpoint(sin_chain(depth)),
    "recursive": lambda depth: recursive_checkpoint([jnp.sin] * depth),
}

# Measured when the peak walk was designed: (residual bytes, bwd peak live bytes) per depth and scheme
# (docs/ARCHITECTURE.md, "Two axes of a policy").
DESIGN_TABLE = {
    8: {"plain": (32768, 40960), "whole_chain_checkpointed": (4096, 40960), "recursive": (16384, 24576)},
    16: {"plain": (65536, 73728), "whole_chain_checkpointed": (4096, 73728), "recursive": (20480, 28672)},
    32: {"plain": (131072, 139264), "whole_chain_checkpointed": (4096, 139264), "recursive": (24576, 32768)},
}


def residual_bytes_and_bwd_peak(fn: Callable[..., Any], specs: list[dict]) -> tuple[int, int]:
    fwd_blob, bwd_blob, n_out = export_case(fn, specs)
    fwd, bwd = deserialize(fwd_blob), deserialize(bwd_blob)
    residual_bytes = sum(a.nbytes for a in exported_avals(fwd.out_avals)[n_out:])
    return residual_bytes, inspect_module(bwd).peak_live_bytes


@pytest.mark.parametrize("depth", sorted(DESIGN_TABLE))
@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_sin_chain_residual_bytes_and_bwd_peak_match_design_table(depth: int, scheme: str) -> None:
    got = residual_bytes_and_bwd_peak(SCHEMES[scheme](depth), X_1024)
    assert got == DESIGN_TABLE[depth][scheme]


def test_only_peak_live_bytes_separates_whole_chain_checkpoint_from_plain_chain() -> None:
    plain = residual_bytes_and_bwd_peak(sin_chain(16), X_1024)
    whole = residual_bytes_and_bwd_peak(jax.checkpoint(sin_chain(16)), X_1024)
    recursive = residual_bytes_and_bwd_peak(recursive_checkpoint([jnp.sin] * 16), X_1024)
    assert whole[0] < recursive[0] < plain[0]  # by residual bytes the whole-chain checkpoint looks best
    assert whole[1] == plain[1] > recursive[1]  # its backward pass holds as much as no checkpoint at all


def test_exported_avals_reads_shapes_dtypes_and_nbytes_of_artifact() -> None:
    specs = [
        {"kind": "array", "name": "w", "shape": [4, 3], "dtype": "float32"},
        {"kind": "array", "name": "x", "shape": [5, 4], "dtype": "float32"},
    ]
    fwd_blob, _, _ = export_case(lambda w, x: jnp.sum(jnp.tanh(x @ w)), specs)
    fwd = deserialize(fwd_blob)
    ins = exported_avals(fwd.in_avals)
    assert [(a.shape, a.dtype) for a in ins] == [((4, 3), "float32"), ((5, 4), "float32")]
    assert [a.nbytes for a in ins] == [48, 80]
    assert str(ins[1]) == "float32[5,4]"


# --- host callbacks and other non-pure operations ---------------------------------------------------


def test_export_refuses_to_differentiate_a_plain_pure_callback() -> None:
    def f(x):
        y = jax.pure_callback(lambda a: np.sin(a), jax.ShapeDtypeStruct(x.shape, x.dtype), x)
        return jnp.sum(y)

    with pytest.raises(ValueError, match="Pure callbacks do not support JVP"):
        export_case(f, X_8)


def test_export_refuses_to_serialize_a_differentiable_pure_callback() -> None:
    @jax.custom_jvp
    def host_sin(x):
        return jax.pure_callback(lambda a: np.sin(a).astype(a.dtype), jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    @host_sin.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return host_sin(x), jnp.cos(x) * t

    with pytest.raises(NotImplementedError, match="serialization of host_callbacks"):
        export_case(lambda x: jnp.sum(host_sin(x)), X_8)


def test_export_refuses_to_serialize_jax_debug_print() -> None:
    def f(x):
        jax.debug.print("x = {x}", x=x)
        return jnp.sum(jnp.sin(x))

    with pytest.raises(NotImplementedError, match="serialization of host_callbacks"):
        export_case(f, X_8)


def _forge_artifact(module_text: str) -> bytes:
    """A serialized Exported (of float32[8] -> float32[8]) whose module is replaced by `module_text`:
    what a forger who bypasses `jax.export`'s own checks could put in a bundle."""
    from jax import export
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib.mlir import ir

    honest = export.export(jax.jit(jnp.sin), platforms=["cpu"])(jax.ShapeDtypeStruct((8,), jnp.float32))
    with jax_mlir.make_ir_context():
        bytecode = jax_mlir.module_to_bytecode(ir.Module.parse(module_text))
    return bytes(dataclasses.replace(honest, mlir_module_serialized=bytecode).serialize())


def _forge_artifact_from_lowering(fn: Callable[[Any], Any]) -> bytes:
    """`fn` lowered by jit (host callbacks included, which `jax.export` would refuse), as an artifact."""
    text = jax.jit(fn).lower(jax.ShapeDtypeStruct((8,), jnp.float32)).as_text()
    assert "custom_call" in text
    return _forge_artifact(text)


@pytest.mark.parametrize("kind", ["pure_callback", "debug_print"])
def test_forged_artifact_with_host_callback_is_flagged_as_disallowed(kind: str) -> None:
    def with_pure_callback(x):
        return jax.pure_callback(lambda a: np.sin(a), jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    def with_debug_print(x):
        jax.debug.print("{x}", x=x)
        return jnp.sin(x)

    fn = with_pure_callback if kind == "pure_callback" else with_debug_print
    info = inspect_module(deserialize(_forge_artifact_from_lowering(fn)))
    assert "stablehlo.custom_call @xla_ffi_python_cpu_callback" in info.disallowed
    assert info.peak_live_bytes == 0  # never walked: the module is not run


def test_forged_artifact_with_outfeed_is_flagged_as_disallowed() -> None:
    text = """
    module @forged {
      func.func public @main(%arg0: tensor<8xf32>) -> (tensor<8xf32>) {
        %0 = stablehlo.create_token : !stablehlo.token
        %1 = "stablehlo.outfeed"(%arg0, %0) {outfeed_config = ""} : (tensor<8xf32>, !stablehlo.token) -> !stablehlo.token
        return %arg0 : tensor<8xf32>
      }
    }
    """
    info = inspect_module(deserialize(_forge_artifact(text)))
    assert info.disallowed == ["stablehlo.create_token", "stablehlo.outfeed"]


def test_forged_artifact_without_main_is_an_artifact_error() -> None:
    text = """
    module @forged {
      func.func public @not_main(%arg0: tensor<8xf32>) -> (tensor<8xf32>) {
        return %arg0 : tensor<8xf32>
      }
    }
    """
    with pytest.raises(ArtifactError, match="no main function"):
        inspect_module(deserialize(_forge_artifact(text)))


OUTER_BYTES = 1024 * 1024 * 4  # jnp.outer of two float32[1024]


def test_peak_live_bytes_include_temporaries_inside_a_loop_body() -> None:
    from jax import export, lax

    def f(x):  # the loop carries a scalar, but each iteration builds a float32[1024, 1024]
        return lax.fori_loop(0, 3, lambda i, c: c + jnp.sum(jnp.outer(x, x)), 0.0)

    exported = export.export(jax.jit(f), platforms=["cpu"])(jax.ShapeDtypeStruct((1024,), jnp.float32))
    info = inspect_module(exported)
    assert info.op_counts["stablehlo.while"] == 1
    assert OUTER_BYTES < info.peak_live_bytes <= 3 * OUTER_BYTES + 64 * 1024


def test_peak_live_bytes_include_temporaries_inside_a_called_function() -> None:
    from jax import export

    inner = jax.jit(lambda x: jnp.sum(jnp.outer(x, x)))
    exported = export.export(jax.jit(lambda x: inner(x) + inner(2 * x)), platforms=["cpu"])(
        jax.ShapeDtypeStruct((1024,), jnp.float32)
    )
    info = inspect_module(exported)
    assert info.functions == 2 and info.op_counts["func.call"] == 2
    assert OUTER_BYTES < info.peak_live_bytes <= 3 * OUTER_BYTES + 64 * 1024


def test_matmul_artifacts_use_only_allowed_ops() -> None:
    specs = [
        {"kind": "array", "name": "w", "shape": [4, 4], "dtype": "float32"},
        {"kind": "array", "name": "x", "shape": [3, 4], "dtype": "float32"},
    ]
    fwd_blob, bwd_blob, _ = export_case(lambda w, x: jnp.sum(jnp.tanh(x @ w)), specs)
    for blob in (fwd_blob, bwd_blob):
        info = inspect_module(deserialize(blob))
        assert info.disallowed == []
        assert info.op_counts["stablehlo.dot_general"] >= 1
        assert info.functions >= 1
        assert info.peak_live_bytes > 0


X_6x5 = [{"kind": "array", "name": "x", "shape": [6, 5], "dtype": "float32"}]
TYPICAL_DIFFERENTIABLE_FUNCTIONS: dict[str, Callable[[Any], Any]] = {
    "softmax": lambda x: jnp.sum(jax.nn.softmax(x) * x),
    "logsumexp": lambda x: jax.nn.logsumexp(x),
    "gelu_tanh": lambda x: jnp.sum(jax.nn.gelu(x)),
    "layer_norm": lambda x: jnp.sum((x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5)),
    "scan_with_checkpointed_body": lambda x: jax.lax.scan(
        jax.checkpoint(lambda c, r: (jnp.tanh(c * r), None)), jnp.ones(5), x
    )[0].sum(),
    "cond": lambda x: jax.lax.cond(x.sum() > 0, jnp.sin, jnp.cos, x).sum(),
    "sort": lambda x: jnp.sum(jnp.sort(x, axis=1) * jnp.arange(5.0)),
    "cumsum": lambda x: jnp.sum(jnp.cumsum(x, axis=0) ** 2),
    "gather_scatter": lambda x: jnp.sum(x.at[1].set(3.0)[jnp.array([0, 1, 4])] ** 2),
    "random_mask": lambda x: jnp.sum(jnp.where(jax.random.bernoulli(jax.random.PRNGKey(1), 0.5, x.shape), x, 0)),
    "checkpoint_dots_saveable": lambda x: jax.checkpoint(
        lambda y: jnp.tanh(y @ y.T), policy=jax.checkpoint_policies.dots_saveable
    )(x).sum(),
    # chlo.erf and chlo.top_k are on the allowlist; JAX 0.10.2 emits them as stablehlo.composite
    # ops whose decomposition is a private function of pure ops.
    "erf": lambda x: jnp.sum(jax.lax.erf(x)),
    "top_k": lambda x: jnp.sum(jax.lax.top_k(x, 2)[0]),
}


@pytest.mark.parametrize("name", list(TYPICAL_DIFFERENTIABLE_FUNCTIONS))
def test_typical_differentiable_functions_use_only_allowed_ops(name: str) -> None:
    """A correct submission must not be refused for using ordinary jax.numpy / jax.nn / lax functions."""
    fwd_blob, bwd_blob, _ = export_case(TYPICAL_DIFFERENTIABLE_FUNCTIONS[name], X_6x5)
    assert inspect_module(deserialize(fwd_blob)).disallowed == []
    assert inspect_module(deserialize(bwd_blob)).disallowed == []


def test_lapack_custom_call_is_disallowed_unless_the_problem_allows_its_target() -> None:
    specs = [{"kind": "array", "name": "a", "shape": [4, 4], "dtype": "float32"}]
    fwd_blob, _, _ = export_case(lambda a: jnp.sum(jnp.linalg.cholesky(a @ a.T + 4 * jnp.eye(4))), specs)
    fwd = deserialize(fwd_blob)
    blocked = inspect_module(fwd)
    assert blocked.disallowed == ["stablehlo.custom_call @lapack_spotrf_ffi"]
    allowed = inspect_module(fwd, allowed_custom_calls=frozenset({"lapack_spotrf_ffi"}))
    assert allowed.disallowed == []
    assert allowed.peak_live_bytes > 0


# --- deserialization of untrusted bytes ---------------------------------------------------------------


@pytest.mark.parametrize("blob", [b"garbage", b"", b"\x00" * 64], ids=["garbage", "empty", "zeros"])
def test_deserialize_rejects_bytes_that_are_not_an_artifact(blob: bytes) -> None:
    with pytest.raises(ArtifactError, match="not a jax.export artifact"):
        deserialize(blob)


class _Tripwire:
    """Unpickling this writes a file: proof that the bytes were unpickled."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "unpickled"))


def test_deserialize_rejects_a_pickle_without_unpickling_it(tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    blob = pickle.dumps(_Tripwire(marker))
    with pytest.raises(ArtifactError):
        deserialize(blob)
    assert not marker.exists()


def test_deserialize_round_trips_a_real_artifact() -> None:
    fwd_blob, _, n_out = export_case(jnp.sin, X_8)
    fwd = deserialize(fwd_blob)
    assert n_out == 1
    assert [(a.shape, a.dtype) for a in exported_avals(fwd.in_avals)] == [((8,), "float32")]
    assert tuple(fwd.platforms) == ("cpu",)


# --- recompute FLOPs and provenance, on hand-written StableHLO ---------------------------------------


def _inspect_text(text: str, **limits: int) -> Any:
    from graders.artifact_limits import ReadLimits

    return inspect_module(deserialize(_forge_artifact(text)), limits=ReadLimits(**limits))


NESTED = """
module @forged {
  func.func public @main(%arg0: tensor<8x4xf32>, %arg1: tensor<4x4xf32>) -> (tensor<8x4xf32>, tensor<4x8xf32>, tensor<8x4xf32>, tensor<8x4xf32>) {
    %0 = func.call @layer(%arg0, %arg1) : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
    %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<8x4xf32>) -> tensor<4x8xf32>
    %2 = stablehlo.reduce_precision %0, format = e8m23 : tensor<8x4xf32>
    %3 = stablehlo.sine %arg0 : tensor<8x4xf32>
    %4 = stablehlo.convert %arg0 : tensor<8x4xf32>
    return %2, %1, %3, %4 : tensor<8x4xf32>, tensor<4x8xf32>, tensor<8x4xf32>, tensor<8x4xf32>
  }
  func.func private @layer(%x: tensor<8x4xf32>, %w: tensor<4x4xf32>) -> tensor<8x4xf32> {
    %0 = func.call @matmul(%x, %w) : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
    %1 = stablehlo.tanh %0 : tensor<8x4xf32>
    return %1 : tensor<8x4xf32>
  }
  func.func private @matmul(%x: tensor<8x4xf32>, %w: tensor<4x4xf32>) -> tensor<8x4xf32> {
    %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
    return %0 : tensor<8x4xf32>
  }
}
"""


def test_flops_count_matmuls_from_operand_shapes_and_elementwise_ops_per_element_through_calls() -> None:
    info = _inspect_text(NESTED)
    # dot_general: 2*8*4*4 = 256; tanh 32; sine 32; transpose, reduce_precision, convert move data only
    assert info.flops == 256 + 32 + 32
    assert info.flops_exact


def test_provenance_follows_calls_and_looks_through_data_movement() -> None:
    info = _inspect_text(NESTED)
    # reduce_precision and transpose of a called tanh; sine of an argument; a converted argument
    assert info.sources == ["tanh", "tanh", "sine", "argument 0"]


LOOP = """
module @forged {
  func.func public @main(%arg0: tensor<4x4xf32>, %arg1: tensor<3x4xf32>) -> (tensor<5x3x4xf32>, tensor<3x4xf32>) {
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %c1 = stablehlo.constant dense<1> : tensor<i32>
    %c5 = stablehlo.constant dense<5> : tensor<i32>
    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %stack = stablehlo.broadcast_in_dim %z, dims = [] : (tensor<f32>) -> tensor<5x3x4xf32>
    %r:3 = stablehlo.while(%i = %c0, %h = %arg1, %s = %stack) : tensor<i32>, tensor<3x4xf32>, tensor<5x3x4xf32>
    cond {
      %p = stablehlo.compare LT, %i, %c5, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %d = stablehlo.dot_general %h, %arg0, contracting_dims = [1] x [0] : (tensor<3x4xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
      %n = stablehlo.sine %d : tensor<3x4xf32>
      %u = stablehlo.reshape %n : (tensor<3x4xf32>) -> tensor<1x3x4xf32>
      %s2 = stablehlo.dynamic_update_slice %s, %u, %i, %c0, %c0 : (tensor<5x3x4xf32>, tensor<1x3x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<5x3x4xf32>
      %i2 = stablehlo.add %i, %c1 : tensor<i32>
      stablehlo.return %i2, %n, %s2 : tensor<i32>, tensor<3x4xf32>, tensor<5x3x4xf32>
    }
    return %r#2, %r#1 : tensor<5x3x4xf32>, tensor<3x4xf32>
  }
}
"""


def test_loop_flops_multiply_by_the_trip_count_read_from_the_bound() -> None:
    info = _inspect_text(LOOP)
    per_iteration = 2 * 3 * 4 * 4 + 12 + 1 + 1  # dot_general, sine, the counter's add, the compare
    assert info.flops == 5 * per_iteration
    assert info.flops_exact


def test_provenance_through_scan_stacking_and_loop_carries() -> None:
    info = _inspect_text(LOOP)
    assert info.sources == ["sine", "sine"]


def test_a_loop_with_an_unknown_bound_counts_once_and_says_so() -> None:
    info = _inspect_text(LOOP.replace("%p = stablehlo.compare LT, %i, %c5", "%p = stablehlo.compare NE, %i, %c5"))
    assert not info.flops_exact
    assert info.flops == 2 * 3 * 4 * 4 + 12 + 1 + 1


CASE = """
module @forged {
  func.func public @main(%arg0: tensor<i32>, %arg1: tensor<16x16xf32>) -> (tensor<16x16xf32>) {
    %0 = "stablehlo.case"(%arg0) ({
      %a = stablehlo.dot_general %arg1, %arg1, contracting_dims = [1] x [0] : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
      stablehlo.return %a : tensor<16x16xf32>
    }, {
      %b = stablehlo.exponential %arg1 : tensor<16x16xf32>
      stablehlo.return %b : tensor<16x16xf32>
    }) : (tensor<i32>) -> tensor<16x16xf32>
    return %0 : tensor<16x16xf32>
  }
}
"""


def test_a_case_costs_its_costliest_branch_and_names_the_first_branch() -> None:
    info = _inspect_text(CASE)
    assert info.flops == 2 * 16 * 16 * 16
    assert not info.flops_exact  # the branch is chosen at run time: an upper bound ...
    assert info.flops_low == 16 * 16  # ... and the cheapest branch a lower one
    assert info.sources == ["dot_general"]


@pytest.mark.parametrize(
    "op",
    [
        "%d = stablehlo.convert %arg0 : (tensor<8xf32>) -> tensor<?xf32>",  # an allowed op, a dynamic type
    ],
)
def test_dynamic_shapes_are_refused_before_anything_runs(op: str) -> None:
    """(Unranked tensors are refused by StableHLO's own verifier when the module is parsed.)"""
    text = (
        "module @forged {\n func.func public @main(%arg0: tensor<8xf32>) -> (tensor<8xf32>) {\n "
        + op
        + "\n return %arg0 : tensor<8xf32>\n }\n}"
    )
    with pytest.raises(ArtifactError, match="dynamic shape"):
        _inspect_text(text)


def test_deep_call_chains_and_nesting_are_refused_not_recursed() -> None:
    depth = 1500
    functions = [
        f"""
      func.func private @f{i}(%x: tensor<8xf32>) -> tensor<8xf32> {{
        %0 = func.call @f{i + 1}(%x) : (tensor<8xf32>) -> tensor<8xf32>
        return %0 : tensor<8xf32>
      }}"""
        for i in range(depth)
    ]
    functions.append(f"""
      func.func private @f{depth}(%x: tensor<8xf32>) -> tensor<8xf32> {{
        return %x : tensor<8xf32>
      }}""")
    text = (
        "module @forged {\n  func.func public @main(%arg0: tensor<8xf32>) -> (tensor<8xf32>) {\n"
        "    %0 = func.call @f0(%arg0) : (tensor<8xf32>) -> tensor<8xf32>\n    return %0 : tensor<8xf32>\n  }\n"
        + "".join(functions)
        + "\n}"
    )
    with pytest.raises(ArtifactError, match="calls nest deeper than 64"):
        _inspect_text(text, max_ops=100_000)
    nested = _nested_cases(100)
    with pytest.raises(ArtifactError, match="regions nest deeper than 64"):
        _inspect_text(nested)


def _nested_cases(levels: int) -> str:
    body = "%v = stablehlo.sine %arg1 : tensor<8xf32>\nstablehlo.return %v : tensor<8xf32>"
    for _ in range(levels):
        body = (
            '%v = "stablehlo.case"(%arg0) ({\n' + body + "\n}) : (tensor<i32>) -> tensor<8xf32>\n"
            "stablehlo.return %v : tensor<8xf32>"
        )
    body = body.rsplit("stablehlo.return", 1)[0] + "return %v : tensor<8xf32>"
    return (
        "module @forged {\n  func.func public @main(%arg0: tensor<i32>, %arg1: tensor<8xf32>) -> (tensor<8xf32>) {\n"
        + body
        + "\n  }\n}"
    )


def test_the_op_cap_stops_the_walk_early_and_the_walk_is_linear() -> None:
    import time

    adds = "\n".join(f"%a{i} = stablehlo.add %arg1, %arg1 : tensor<8xf32>" for i in range(20_000))
    text = (
        "module @forged {\n  func.func public @main(%arg0: tensor<i32>, %arg1: tensor<8xf32>) -> (tensor<8xf32>) {\n"
        + adds
        + "\nreturn %arg1 : tensor<8xf32>\n  }\n}"
    )
    t0 = time.monotonic()
    with pytest.raises(ArtifactError, match="more operations than the 1,000 allowed"):
        _inspect_text(text, max_ops=1_000)
    t1 = time.monotonic()
    info = _inspect_text(text)  # 20,000 ops under the default cap: walked in one linear pass
    assert info.n_ops == 20_001 and info.peak_live_bytes > 0  # the adds and the return
    assert t1 - t0 < 5


# --- normalized_digest: a content key that ignores where the code came from -------------------------

POLICY_SOURCE = """import jax
import jax.numpy as jnp


def layer(w, x):
    return jnp.tanh(x @ w) @ w


def f(w, x):
    policy = jax.checkpoint_policies.{policy}
    return jax.checkpoint(layer, policy=policy)(w, x)
"""
W_X = [
    {"kind": "array", "name": "w", "shape": [8, 8], "dtype": "float32"},
    {"kind": "array", "name": "x", "shape": [4, 8], "dtype": "float32"},
]


def _digests_of_source(path: Path, source: str) -> tuple[str, str]:
    """(fwd, bwd) normalized digests of `f` defined in `source`, imported from the file `path`."""
    import importlib.util

    from graders.untrusted.digest import normalized_digest

    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"digest_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    fwd_blob, bwd_blob, _ = export_case(module.f, W_X)
    return normalized_digest(deserialize(fwd_blob)), normalized_digest(deserialize(bwd_blob))


def test_normalized_digest_ignores_file_names_comments_and_line_numbers(tmp_path: Path) -> None:
    source = POLICY_SOURCE.format(policy="dots_saveable")
    plain = _digests_of_source(tmp_path / "a.py", source)
    assert all(len(d) == 64 and int(d, 16) >= 0 for d in plain)
    # another file, comments and blank lines above (every line number moves) and after the code
    moved = _digests_of_source(tmp_path / "b.py", "# a comment\n\n\n" + source + "\n# the end\n")
    assert moved == plain


def test_normalized_digest_sees_the_policy_and_the_constants(tmp_path: Path) -> None:
    saving = _digests_of_source(tmp_path / "a.py", POLICY_SOURCE.format(policy="dots_saveable"))
    recomputing = _digests_of_source(tmp_path / "b.py", POLICY_SOURCE.format(policy="nothing_saveable"))
    assert saving[0] != recomputing[0] and saving[1] != recomputing[1]
    scaled = _digests_of_source(
        tmp_path / "c.py", POLICY_SOURCE.format(policy="dots_saveable").replace("@ w) @ w", "@ w) @ (2.0 * w)")
    )
    assert scaled[0] != saving[0]


def test_normalized_digest_is_the_same_in_another_process(tmp_path: Path) -> None:
    import subprocess
    import sys

    source = POLICY_SOURCE.format(policy="dots_saveable")
    here = _digests_of_source(tmp_path / "a.py", source)
    (tmp_path / "b.py").write_text(source + "\n# exported by another process\n")
    script = (
        "import importlib.util, json, sys\n"
        "from graders.untrusted.parse import deserialize\nfrom graders.untrusted.digest import normalized_digest\n"
        "from jailside.export import export_case\n"
        f"spec = importlib.util.spec_from_file_location('other', {str(tmp_path / 'b.py')!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        f"fwd, bwd, _ = export_case(m.f, {W_X!r})\n"
        "print(json.dumps([normalized_digest(deserialize(fwd)), normalized_digest(deserialize(bwd))]))\n"
    )
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(repo)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    import json

    assert tuple(json.loads(done.stdout.strip().splitlines()[-1])) == here


def test_inspect_module_computes_the_same_digest() -> None:
    from graders.untrusted.digest import normalized_digest

    fwd_blob, bwd_blob, _ = export_case(lambda w, x: jnp.sum(jnp.tanh(x @ w)), W_X)
    for blob in (fwd_blob, bwd_blob):
        exported = deserialize(blob)
        assert inspect_module(exported).digest == normalized_digest(exported)


def test_normalized_digest_covers_how_the_artifact_is_called() -> None:
    from graders.untrusted.digest import normalized_digest

    fwd = deserialize(export_case(lambda w, x: jnp.sum(jnp.tanh(x @ w)), W_X)[0])
    other_inputs = dataclasses.replace(fwd, module_kept_var_idx=(1,))  # the same module, called otherwise
    assert normalized_digest(other_inputs) != normalized_digest(fwd)


def test_normalized_digest_of_garbage_is_an_artifact_error() -> None:
    from graders.untrusted.digest import normalized_digest

    fwd = deserialize(export_case(jnp.sin, X_8)[0])
    with pytest.raises(ArtifactError, match="cannot parse"):
        normalized_digest(dataclasses.replace(fwd, mlir_module_serialized=b"not bytecode"))


def test_limits_and_avals_live_jax_free() -> None:
    import graders.artifact_limits

    assert graders.artifact_limits.VerifyLimits(max_ops=7).read_limits == graders.artifact_limits.ReadLimits(max_ops=7)
    assert (
        graders.artifact_limits.Aval((2, 3), "bfloat16").nbytes == 12
        and str(graders.artifact_limits.Aval((), "bool")) == "bool[]"
    )


def test_a_shared_ir_context_reads_every_module_as_a_context_of_its_own_would() -> None:
    from graders.untrusted.parse import shared_ir_context

    blobs = export_case(lambda w, x: jnp.sum(jnp.tanh(x @ w)), W_X)[:2] + export_case(jnp.sin, X_8)[:2]
    alone = [inspect_module(deserialize(b)) for b in blobs]
    with shared_ir_context():
        shared = [inspect_module(deserialize(b)) for b in blobs]
    assert shared == alone


def test_a_case_with_a_constant_index_costs_the_branch_it_selects() -> None:
    """`lax.cond` on a static Python flag exports a `case` on a literal: only that branch runs."""
    picked = CASE.replace(
        '%0 = "stablehlo.case"(%arg0)', '%k = stablehlo.constant dense<1> : tensor<i32>\n    %0 = "stablehlo.case"(%k)'
    )
    info = _inspect_text(picked)
    assert info.flops == 16 * 16 and info.flops_exact  # the exponential, not the matmul
    past_the_end = picked.replace("dense<1> : tensor<i32>", "dense<7> : tensor<i32>")
    assert _inspect_text(past_the_end).flops == 16 * 16  # StableHLO runs the last branch


FOLDED = """
module @forged {
  func.func public @main(%arg0: tensor<8xf32>, %arg1: tensor<8xf32>) -> (tensor<8xf32>) {
    %dead = stablehlo.exponential %arg0 : tensor<8xf32>
    %c = stablehlo.constant dense<false> : tensor<i1>
    %0:2 = call @where(%c, %arg1) : (tensor<i1>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
    %s = stablehlo.sine %arg0 : tensor<8xf32>
    %1 = stablehlo.multiply %s, %0#0 : tensor<8xf32>
    %2 = stablehlo.cosine %arg0 : tensor<8xf32>
    %3 = stablehlo.multiply %2, %0#1 : tensor<8xf32>
    %4 = stablehlo.add %1, %3 : tensor<8xf32>
    return %4 : tensor<8xf32>
  }
  func.func private @where(%p: tensor<i1>, %ct: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
    %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %zs = stablehlo.broadcast_in_dim %z, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %taken = stablehlo.select %p, %ct, %zs : tensor<i1>, tensor<8xf32>
    %other = stablehlo.select %p, %zs, %ct : tensor<i1>, tensor<8xf32>
    return %taken, %other : tensor<8xf32>, tensor<8xf32>
  }
}
"""


def test_dead_code_and_the_side_of_a_constant_select_cost_nothing() -> None:
    """`jnp.where` on a static flag: the untaken side gets a zero cotangent, so its derivative
    (sine times zero, added to the rest) is no work; an unused exponential is dead code."""
    info = _inspect_text(FOLDED)
    assert info.flops == 8 + 8  # the cosine and its product; the add of a zero is the other term
    assert info.flops_exact
    live = FOLDED.replace("dense<false> : tensor<i1>", "dense<true> : tensor<i1>")
    assert _inspect_text(live).flops == 8 + 8  # the other side now: the sine and its product
    unknown = (
        FOLDED.replace("%c = stablehlo.constant dense<false> : tensor<i1>\n", "")
        .replace("@where(%c, %arg1)", "@where(%p0, %arg1)")
        .replace(
            "%arg1: tensor<8xf32>) -> (tensor<8xf32>) {", "%arg1: tensor<8xf32>, %p0: tensor<i1>) -> (tensor<8xf32>) {"
        )
    )
    info = _inspect_text(unknown)
    assert info.flops == 4 * 8 + 8 + 2 * 8  # both selects, sine, cosine, both products and the add


def test_flops_of_a_deeply_nested_program_are_counted_without_recursion() -> None:
    """Sixty nested regions: the counter walks them from its own stack, not Python recursion."""
    depth = 60
    body = "%r0 = stablehlo.sine %x : tensor<4xf32>\n stablehlo.return %r0 : tensor<4xf32>"
    for i in range(1, depth + 1):
        body = (
            f'%k{i} = stablehlo.constant dense<0> : tensor<i32>\n %r{i} = "stablehlo.case"(%k{i}) ({{\n'
            + body
            + f"\n }}) : (tensor<i32>) -> tensor<4xf32>\n stablehlo.return %r{i} : tensor<4xf32>"
        )
    inner = body.rsplit("stablehlo.return", 1)[0]
    text = (
        "module @forged {\n func.func public @main(%x: tensor<4xf32>) -> (tensor<4xf32>) {\n"
        + inner
        + f"return %r{depth} : tensor<4xf32>\n }}\n}}"
    )
    info = _inspect_text(text)
    assert info.flops == 4 and info.flops_exact


BACKWARD = """
module @forged {
  func.func public @main(%z: tensor<16x16xf32>, %w: tensor<16x16xf32>, %ct: tensor<16x16xf32>) -> (tensor<16x16xf32>) {
    %again = stablehlo.dot_general %z, %w, contracting_dims = [1] x [0] : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
    %factor = stablehlo.cosine %again : tensor<16x16xf32>
    %g = stablehlo.multiply %ct, %factor : tensor<16x16xf32>
    %r:2 = stablehlo.while(%i = %c0, %acc = %g) : tensor<i32>, tensor<16x16xf32>
    cond {
      %p = stablehlo.compare LT, %i, %c3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %s = stablehlo.sine %z : tensor<16x16xf32>
      %n = stablehlo.multiply %acc, %s : tensor<16x16xf32>
      %i2 = stablehlo.add %i, %c1 : tensor<i32>
      stablehlo.return %i2, %n : tensor<i32>, tensor<16x16xf32>
    }
    return %r#1 : tensor<16x16xf32>
  }
}
""".replace(
    "    %r:2",
    "    %c0 = stablehlo.constant dense<0> : tensor<i32>\n    %c1 = stablehlo.constant dense<1> : tensor<i32>\n"
    "    %c3 = stablehlo.constant dense<3> : tensor<i32>\n    %r:2",
)


def test_a_backward_program_splits_its_flops_by_whether_they_depend_on_the_cotangent() -> None:
    """The matmul, its cosine and each iteration's sine read only residuals: forward work a policy
    decides. The products with the cotangent (and the loop's counter, carried beside it) do not."""
    from graders.untrusted.parse import deserialize

    exported = deserialize(_forge_artifact(BACKWARD))
    info = inspect_module(exported, cotangents=1)
    matmul, elementwise = 2 * 16 * 16 * 16, 16 * 16
    per_iteration = elementwise + elementwise + 1 + 1  # sine, product, counter add, compare
    assert info.flops == matmul + 2 * elementwise + 3 * per_iteration
    assert info.residual_flops == matmul + elementwise + 3 * (elementwise + 1 + 1)  # sine and the counter
    assert inspect_module(exported).residual_flops == info.flops  # told of no cotangent: all of it
