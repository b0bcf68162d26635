"""The recompute figure on real exported programs: the forward work a backward pass does again,
whatever the derivative's own arithmetic costs (`graders.untrusted.signature`,
`graders.untrusted.linearity`)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import pytest

from graders.untrusted.parse import deserialize
from graders.untrusted.reader import inspect_module
from graders.untrusted.result import ModuleInfo
from jailside.export import export_case


def arrays(**shapes: tuple[int, ...]) -> list[dict[str, Any]]:
    return [{"kind": "array", "name": n, "shape": list(s), "dtype": "float32"} for n, s in shapes.items()]


def backward(fn: Any, specs: list[dict[str, Any]]) -> ModuleInfo:
    """The backward program's facts, read against its forward program's signatures."""
    fwd_blob, bwd_blob, n_out = export_case(fn, specs)
    forward = inspect_module(deserialize(fwd_blob)).op_signatures
    return inspect_module(deserialize(bwd_blob), cotangents=n_out, forward_ops=forward)


D = 64
LAYERS = arrays(W1=(D, D), W2=(D, D), W3=(D, D), x=(D,))
MATVEC = 2 * D * D  # FLOPs of one W @ v


def per_layer(layer: Any) -> Any:
    def net(W1: Any, W2: Any, W3: Any, x: Any) -> Any:
        step = jax.checkpoint(layer)
        return jnp.sum(step(W3, step(W2, step(W1, x))))

    return net


def plain_layer(W: Any, v: Any) -> Any:
    return jnp.sin(W @ v)


def blocked_layer(W: Any, v: Any) -> Any:
    b = W.shape[1] // 4
    return jnp.sin(sum(W[:, i : i + b] @ v[i : i + b] for i in range(0, W.shape[1], b)))


def test_a_blocked_mat_vec_recomputes_what_the_plain_one_does() -> None:
    """Four column blocks cost the backward pass more FLOPs in all (the transposes of the slices
    sum zero-padded gradient blocks), but the forward work redone is the same products."""
    plain = backward(per_layer(plain_layer), LAYERS)
    blocked = backward(per_layer(blocked_layer), LAYERS)
    assert blocked.flops > plain.flops  # the derivative's own arithmetic differs
    assert plain.recompute_flops >= 3 * MATVEC  # each layer's W @ v is done again
    assert blocked.recompute_flops == pytest.approx(plain.recompute_flops, rel=0.05)


def test_a_custom_vjp_that_recomputes_names_what_it_redoes() -> None:
    @jax.custom_vjp
    def layer(W: Any, v: Any) -> Any:
        return jnp.tanh(W @ v)

    def fwd(W: Any, v: Any) -> Any:
        y = jnp.tanh(W @ v)
        return y, (W, v, y)

    def bwd(res: Any, g: Any) -> Any:
        W, v, _ = res  # the output is saved, and recomputed anyway
        z = W @ v
        gz = g * (1 - jnp.tanh(z) ** 2)
        return jnp.outer(gz, v), W.T @ gz

    layer.defvjp(fwd, bwd)
    info = backward(lambda W, x: jnp.sum(layer(W, x)), arrays(W=(D, D), x=(D,)))
    assert info.recompute_flops >= MATVEC + D  # W @ v and tanh, both forward operations
    labels = list(info.recomputed.values())
    assert any(label.startswith("dot_general({residual 0}, {residual 1})") for label in labels), labels


def test_forward_work_mixed_with_the_cotangent_is_still_recomputation() -> None:
    """`W @ (v + 1e-30 * sum(g))` reads the cotangent, but no linear map of it does that: the
    product is forward work with the cotangent mixed in, counted as recomputation."""

    @jax.custom_vjp
    def layer(W: Any, v: Any) -> Any:
        return jnp.sin(W @ v)

    def fwd(W: Any, v: Any) -> Any:
        z = W @ v
        return jnp.sin(z), (W, v, z)

    def honest(res: Any, g: Any) -> Any:
        W, v, z = res
        gz = g * jnp.cos(z)
        return jnp.outer(gz, v), W.T @ gz

    def disguised(res: Any, g: Any) -> Any:
        W, v, _ = res
        z = W @ (v + 1e-30 * jnp.sum(g))
        gz = g * jnp.cos(z)
        return jnp.outer(gz, v), W.T @ gz

    specs = arrays(W=(D, D), x=(D,))
    found = {}
    for name, rule in (("honest", honest), ("disguised", disguised)):
        layer.defvjp(fwd, rule)
        found[name] = backward(lambda W, x: jnp.sum(layer(W, x)), specs)
    assert found["honest"].recompute_flops == 0
    assert found["disguised"].recompute_flops >= MATVEC
    assert found["disguised"].residual_flops >= MATVEC


def test_an_accumulating_scan_is_cotangent_work() -> None:
    """A scan over layers accumulates each layer's weight gradient into a carried sum: linear in
    the cotangent, so none of it is recomputation beyond the checkpointed layer's own product."""

    def net(Ws: Any, x: Any) -> Any:
        @jax.checkpoint
        def body(h: Any, W: Any) -> Any:
            return jnp.tanh(W @ h), None

        h, _ = jax.lax.scan(body, x, Ws)
        return jnp.sum(h)

    info = backward(net, arrays(Ws=(8, D, D), x=(D,)))
    assert 8 * MATVEC <= info.recompute_flops <= 8 * (MATVEC + 4 * D)


def test_heads_first_attention_recomputes_nothing_more_than_heads_last() -> None:
    """The same attention written with heads first: its transposes repeat the shapes of its own
    forward products, and none of that is recomputation."""

    def attention(layout: str) -> Any:
        def fn(x: Any, wq: Any, wk: Any) -> Any:
            q = jnp.einsum(f"td,dhe->{layout}", x, wq)
            k = jnp.einsum(f"td,dhe->{layout}", x, wk)
            pair = "hqe,hke->hqk" if layout == "hte" else "qhe,khe->hqk"
            return jnp.sum(jax.nn.softmax(jnp.einsum(pair, q, k), axis=-1))

        return fn

    specs = arrays(x=(16, 32), wq=(32, 4, 8), wk=(32, 4, 8))
    first, last = backward(attention("hte"), specs), backward(attention("the"), specs)
    assert first.recompute_flops == last.recompute_flops == 0


def test_a_nan_guard_or_a_relu_of_the_cotangent_stays_cotangent_work() -> None:
    """`where(isfinite(g), g, 0)`, `maximum(g, 0)` and `g * (g > 0)` scale with the cotangent: a
    correct backward pass may use them, and none of its work becomes recomputation."""

    @jax.custom_vjp
    def layer(W: Any, v: Any) -> Any:
        return jnp.sin(W @ v)

    def fwd(W: Any, v: Any) -> Any:
        z = W @ v
        return jnp.sin(z), (W, v, z)

    def guarded(res: Any, g: Any) -> Any:
        W, v, z = res
        g = jnp.where(jnp.isfinite(g), g, 0.0)
        gz = jnp.maximum(g, 0.0) * jnp.cos(z) + (g * (g < 0)) * jnp.cos(z)
        return jnp.outer(gz, v), W.T @ gz

    layer.defvjp(fwd, guarded)
    info = backward(lambda W, x: jnp.sum(layer(W, x)), arrays(W=(D, D), x=(D,)))
    assert info.recompute_flops == 0
    assert info.residual_flops <= 2 * D  # cos(z), on the residual alone


def test_every_recomputed_operation_is_counted_by_signature_not_only_the_costliest() -> None:
    """A reference that recomputes ten different functions: all ten are kept by signature, so a
    submission that recomputes its ninth is told "more often than the policy does", never "which
    the required policy does not recompute"; only the costliest eight are labelled."""
    functions = [jnp.sin, jnp.cos, jnp.tanh, jnp.exp, jnp.log1p, jnp.sqrt, jnp.cbrt, jnp.arctan, jnp.sinh, jnp.cosh]

    def net(x: Any) -> Any:
        @jax.checkpoint
        def body(x: Any) -> Any:
            return sum(f(x * (i + 1)) for i, f in enumerate(functions))

        return jnp.sum(body(x))

    info = backward(net, arrays(x=(D,)))
    assert len(info.recomputed_signatures) >= len(functions)
    assert len(info.recomputed) == 8
    assert sum(info.recomputed_signatures.values()) == info.recompute_flops
