# A budget on the backward pass's peak for an uneven chain of twelve tanh layers, wide and narrow in
# turn. A policy over the whole chain does not lower the peak: in program order its backward pass
# rebuilds every value before it differentiates any, so it peaks where no checkpoint does. Separate
# checkpoints (segments) do: each segment is rebuilt just before its own backward pass. The
# reference puts a checkpoint around each pair (a wide layer and the narrow one after it) but the
# last, keeping the pair's narrow product by name, and runs the last pair without a checkpoint:
# only the five wide layers before it are rebuilt, one at a time. SCHEDULES holds every way to cut
# the chain between pairs, with the last segment checkpointed or not, and each checkpointed segment
# keeping its narrow products by name or nothing; the least recomputation among those within the
# budget is the optimum.
import itertools

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

LAYERS = 12
NARROW = tuple(range(1, LAYERS, 2))  # the layers (from 0) whose product h @ W is (B, d)


def _layers(first):
    """Layers first, first + 1, ... of the chain, each product named z<layer>."""

    def run(ws, h):
        for i, w in enumerate(ws, start=first):
            h = jnp.tanh(checkpoint_name(h @ w, f"z{i}"))
        return h

    return run


def _segments(cuts, last_plain, keep_narrow):
    """A checkpoint around each run of layers between `cuts` (keeping the run's narrow products
    by name when `keep_narrow`); the last run without one when `last_plain`."""

    def run(ws, x):
        bounds = [0, *cuts, len(ws)]
        h = x
        for start, stop in zip(bounds, bounds[1:]):
            body = _layers(start)
            if not (last_plain and stop == len(ws)):
                names = [f"z{i}" for i in range(start, stop) if i in NARROW] if keep_narrow else []
                body = jax.checkpoint(body, policy=jax.checkpoint_policies.save_only_these_names(*names))
            h = body(ws[start:stop], h)
        return h

    return run


PAIRS = tuple(range(2, LAYERS, 2))  # a cut after each narrow layer


def chain_peak(ws, x):
    return _segments(PAIRS, last_plain=True, keep_narrow=True)(ws, x)


def _label(cuts, last_plain, keep_narrow):
    bounds = [0, *cuts, LAYERS]
    runs = "|".join(f"{a + 1}-{b}" for a, b in zip(bounds, bounds[1:]))
    return f"segments {runs}" + (", last plain" if last_plain else "") + (", narrow kept" if keep_narrow else "")


# every way to cut the chain between pairs, the last segment checkpointed or kept, each checkpointed
# segment keeping its narrow products or nothing: 128 schedules
SCHEDULES = {
    _label(cuts, plain, keep): _segments(cuts, plain, keep)
    for k in range(len(PAIRS) + 1)
    for cuts in itertools.combinations(PAIRS, k)
    for plain in (False, True)
    for keep in (False, True)
}
