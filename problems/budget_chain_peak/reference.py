# A budget on the backward pass's peak for the uneven chain. A policy over the whole chain does not
# lower the peak: in program order its backward pass rebuilds every value before it differentiates
# any, so it peaks where no checkpoint does. Separate checkpoints (segments) do: each segment is
# rebuilt just before its own backward pass. The reference checkpoints layers 1-2, the wide pair,
# and runs layers 3-6 without a checkpoint: their values are kept, their backward pass runs first,
# and only the wide pair is rebuilt. SCHEDULES holds every segmentation of the six layers, with the
# last segment checkpointed or not; the least recomputation among those within the budget is the
# optimum.
import itertools

import jax
import jax.numpy as jnp


def _layers(ws, x):
    h = x
    for w in ws:
        h = jnp.tanh(h @ w)
    return h


def _segments(cuts, last_plain):
    """A checkpoint around each run of layers between `cuts`; the last run without one when
    `last_plain`."""

    def run(ws, x):
        bounds = [0, *cuts, len(ws)]
        h = x
        for i, (start, stop) in enumerate(zip(bounds, bounds[1:])):
            plain = last_plain and stop == len(ws)
            h = (_layers if plain else jax.checkpoint(_layers))(ws[start:stop], h)
        return h

    return run


def chain_peak(ws, x):
    return _segments((2,), last_plain=True)(ws, x)


def _label(cuts, last_plain):
    bounds = [0, *cuts, 6]
    runs = " | ".join(f"{a + 1}-{b}" if b > a + 1 else f"{b}" for a, b in zip(bounds, bounds[1:]))
    return f"segments {runs}" + (", the last plain" if last_plain else "")


# every segmentation of the six layers, the last segment checkpointed or kept: 64 schedules
SCHEDULES = {
    _label(cuts, plain): _segments(cuts, plain)
    for k in range(6)
    for cuts in itertools.combinations(range(1, 6), k)
    for plain in (False, True)
}
