# A budget on the backward pass's peak. One checkpoint on the scanned layer keeps one carry per
# layer, and the backward pass holds them all: over the budget in `large`. Two levels, as
# `nn.remat_scan` nests them, fit: an outer scan over groups of layers keeps one carry per group,
# and the backward pass of each group rebuilds only that group. The reference, the best schedule
# measured, checkpoints only the outer level, in groups of 2, and keeps the last 3/8 of the layers
# outright: their backward pass runs first, before any group is rebuilt. SCHEDULES lists the
# schedules the judge measures beside it; the least recomputation among those within the budget is
# the optimum.
import math

import jax
import jax.numpy as jnp


def _layer(h, w):
    return jnp.tanh(h @ w), None


def _groups(n_layers):
    """The group size: the largest divisor of n_layers at most its square root."""
    return max(g for g in range(1, math.isqrt(n_layers) + 1) if n_layers % g == 0)


def _two_levels(ws, x, *, group, outer, inner):
    layer = jax.checkpoint(_layer) if inner else _layer

    def run_group(h, wg):
        return jax.lax.scan(layer, h, wg)[0], None

    run = jax.checkpoint(run_group) if outer else run_group
    grouped = ws.reshape(ws.shape[0] // group, group, *ws.shape[1:])
    return jax.lax.scan(run, x, grouped)[0]


def scan_layers(ws, x):
    return _last_layers_kept(ws, x)


def _no_checkpoint(ws, x):
    return jax.lax.scan(_layer, x, ws)[0]


def _every_layer(ws, x):
    return jax.lax.scan(jax.checkpoint(_layer), x, ws)[0]


def _around_the_scan(ws, x):
    return jax.checkpoint(_no_checkpoint)(ws, x)


def _schedule(group_of, **levels):
    return lambda ws, x: _two_levels(ws, x, group=group_of(ws.shape[0]), **levels)


def _last_layers_kept(ws, x):
    """Groups of 2, outer level only, but the last 3/8 of the layers in a plain scan: their values
    are kept, and their backward pass runs first, before any group is rebuilt."""
    n = ws.shape[0]
    kept = 3 * n // 8
    group = 2 if (n - kept) % 2 == 0 else 1
    h = _two_levels(ws[: n - kept], x, group=group, outer=True, inner=False)
    return jax.lax.scan(_layer, h, ws[n - kept :])[0]


def _python_loop(group_of):
    """A checkpoint around each group of layers, the groups unrolled in a Python loop."""

    def run(ws, x):
        group = group_of(ws.shape[0])
        run_group = jax.checkpoint(lambda h, wg: jax.lax.scan(_layer, h, wg)[0])
        h = x
        for start in range(0, ws.shape[0], group):
            h = run_group(h, ws[start : start + group])
        return h

    return run


SCHEDULES = {
    "no checkpoint": _no_checkpoint,
    "every layer": _every_layer,
    "one checkpoint around the scan": _around_the_scan,
    "groups of √n, both levels": _schedule(_groups, outer=True, inner=True),
    "groups of √n, outer level only": _schedule(_groups, outer=True, inner=False),
    "groups of 2, outer level only": _schedule(lambda n: 2, outer=True, inner=False),
    "groups of n/2, outer level only": _schedule(lambda n: n // 2, outer=True, inner=False),
    "groups of 2, both levels": _schedule(lambda n: 2, outer=True, inner=True),
    "groups of n/2, both levels": _schedule(lambda n: n // 2, outer=True, inner=True),
    "every layer, in a Python loop": _python_loop(lambda n: 1),
    "groups of √n, in a Python loop": _python_loop(_groups),
}
