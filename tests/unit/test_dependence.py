"""graders/untrusted/dependence.py on programs JAX exports: which residuals carry nothing about the
inputs (loop counters, iotas) and which the backward pass only branches on (a `lax.cond` index),
against the disguises an attacker tries (bitcast or quantized pieces, an index used to look up)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from graders.checks.comparison import BRANCH_BOOKKEEPING, LOOP_BOOKKEEPING
from graders.checks.described import describe_residuals
from graders.untrusted.parse import deserialize, exported_avals
from graders.untrusted.reader import inspect_module
from jailside.export import export_case

SPECS = [
    {"kind": "array", "name": "x", "shape": [8, 16], "dtype": "float32"},
    {"kind": "array", "name": "w", "shape": [4, 16, 16], "dtype": "float32"},
]


def reasons(fn: Callable[..., Any]) -> list[tuple[str, str | None]]:
    """(dtype, `left_out` reason) per residual of `fn`'s VJP, read as the verifier reads them."""
    fwd_blob, bwd_blob, n_out = export_case(fn, SPECS)
    fwd, bwd = deserialize(fwd_blob), deserialize(bwd_blob)
    fwd_info = inspect_module(fwd)
    bwd_info = inspect_module(bwd, cotangents=n_out)
    avals = exported_avals(fwd.out_avals)[n_out:]
    facts = describe_residuals(
        avals,
        None,
        depends=fwd_info.depends_on_arguments[n_out:],
        selectors=bwd_info.selector_arguments[: len(avals)],
    )
    return [(f.dtype, f.left_out) for f in facts]


def integer_reasons(fn: Callable[..., Any]) -> list[str | None]:
    return [reason for dtype, reason in reasons(fn) if not dtype.startswith("float")]


def test_a_fori_loops_counters_carry_nothing_and_every_float_counts() -> None:
    def fori(x, w):
        return lax.fori_loop(0, 4, lambda i, h: jnp.tanh(h @ w[i]), x).sum()

    found = reasons(fori)
    assert [r for d, r in found if d == "int32"] == [LOOP_BOOKKEEPING] * 3  # i32[], i32[], i32[4]
    assert all(r is None for d, r in found if d == "float32")


def test_a_branch_index_on_data_is_left_out_alone_and_stacked_in_a_scan() -> None:
    def cond(x, w):
        return lax.cond(x.sum() > 0, lambda h: jnp.sin(h @ w[0]), lambda h: jnp.cos(h @ w[1]), x).sum()

    def scan_cond(x, w):
        def body(h, wi):
            return lax.cond(h.sum() > 0, lambda h: jnp.sin(h @ wi), lambda h: jnp.cos(h @ wi), h), None

        return lax.scan(body, x, w)[0].sum()

    assert integer_reasons(cond) == [BRANCH_BOOKKEEPING]
    assert integer_reasons(scan_cond) == [BRANCH_BOOKKEEPING]


def _pieces_of(transform: Callable[[Any], Any], restore: Callable[[Any], Any], size: int) -> Callable[..., Any]:
    """A chain whose tanh keeps its output as `transform`ed pieces of `size` elements."""

    @jax.custom_vjp
    def hidden_tanh(z):
        return jnp.tanh(z)

    def fwd(z):
        t = jnp.tanh(z)
        flat = transform(t).reshape(-1)
        return t, tuple(flat[i : i + size] for i in range(0, flat.size, size))

    def bwd(pieces, g):
        t = restore(jnp.concatenate(pieces)).reshape(8, 16)
        return (g * (1 - t * t),)

    hidden_tanh.defvjp(fwd, bwd)
    return lambda x, w: hidden_tanh(x @ w[0]).sum()


def test_an_activation_disguised_as_small_integers_is_a_residual() -> None:
    disguises = [
        _pieces_of(
            lambda t: lax.bitcast_convert_type(t, jnp.int32), lambda b: lax.bitcast_convert_type(b, jnp.float32), 32
        ),
        _pieces_of(
            lambda t: lax.bitcast_convert_type(t, jnp.uint8),
            lambda b: lax.bitcast_convert_type(b.reshape(-1, 4), jnp.float32),
            1,
        ),
        _pieces_of(lambda t: jnp.round(t * 127).astype(jnp.int8), lambda q: q.astype(jnp.float32) / 127, 16),
        _pieces_of(lambda t: t > 0, lambda m: m.astype(jnp.float32), 8),
    ]
    for fn in disguises:
        found = integer_reasons(fn)
        assert found and all(r is None for r in found)


def test_an_index_the_backward_pass_looks_up_with_is_data() -> None:
    """An argmax of the data used as a `dynamic_slice` index reads a table: it carries the data,
    not a branch, so it counts (a lookup can rebuild anything its table holds)."""

    @jax.custom_vjp
    def pick(x, w):
        return (x @ w[0]).sum()

    def fwd(x, w):
        i = jnp.argmax(x.sum(1))
        return (x @ w[0]).sum(), (i, x, w)

    def bwd(res, g):
        i, x, w = res
        row = lax.dynamic_slice_in_dim(x, i, 1)  # the index used as a number
        return (g * jnp.ones_like(x) @ w[0].T + 0 * row.sum(), jnp.zeros_like(w).at[0].set(g * x.sum(0)[:, None]))

    pick.defvjp(fwd, bwd)
    assert integer_reasons(pick) == [None]


def test_a_loop_whose_trip_count_comes_from_the_data_carries_the_data() -> None:
    """A counter of a `while_loop` that stops on the data tells how many steps ran."""

    @jax.custom_vjp
    def steps(x):
        return jnp.sin(x).sum()

    def fwd(x):
        n = lax.while_loop(lambda c: (c[0] < 64) & (c[1] < x.sum()), lambda c: (c[0] + 1, c[1] + 1.0), (0, 0.0))[0]
        return jnp.sin(x).sum(), (n, x)

    def bwd(res, g):
        n, x = res
        return (g * jnp.cos(x) + 0 * n,)

    steps.defvjp(fwd, bwd)
    assert integer_reasons(lambda x, w: steps(x @ w[0])) == [None]


def test_a_key_split_from_a_key_argument_is_bookkeeping_and_a_mask_drawn_from_it_counts() -> None:
    """A PRNG key carries no activation (it comes from an integer argument alone): the split keys
    a checkpointed dropout saves are left out; a dropout mask drawn outside the checkpoint,
    bool[32, 16] from the key alone, is memory a policy keeps, and counts."""
    specs = [
        {"kind": "array", "name": "x", "shape": [32, 16], "dtype": "float32"},
        SPECS[1],
        {"kind": "array", "name": "key", "shape": [2], "dtype": "uint32"},
    ]

    def dropout(x, w, key):
        k0, _ = jax.random.split(jax.random.wrap_key_data(key))

        def layer(h, k):
            h = jnp.tanh(h @ w[0])
            return jnp.where(jax.random.bernoulli(k, 0.9, h.shape), h, 0.0)

        return jax.checkpoint(layer)(x, k0).sum()

    def mask_outside(x, w, key):
        keep = jax.random.bernoulli(jax.random.wrap_key_data(key), 0.9, (32, 16))
        return jnp.where(keep, jnp.tanh(x @ w[0]), 0.0).sum()

    def read(fn: Callable[..., Any]) -> list[tuple[str, str | None]]:
        fwd_blob, bwd_blob, n_out = export_case(fn, specs)
        fwd, bwd = deserialize(fwd_blob), deserialize(bwd_blob)
        avals = exported_avals(fwd.out_avals)[n_out:]
        facts = describe_residuals(
            avals,
            None,
            depends=inspect_module(fwd).depends_on_arguments[n_out:],
            selectors=inspect_module(bwd, cotangents=n_out).selector_arguments[: len(avals)],
        )
        return [(f.dtype, f.left_out) for f in facts]

    assert [r for d, r in read(dropout) if d == "uint32"] == [LOOP_BOOKKEEPING]
    masks = [r for d, r in read(mask_outside) if d == "bool"]
    assert masks == [None]  # 512 elements: past BOOKKEEPING_ELEMENTS, a residual like any other
