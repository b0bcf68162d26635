# expect: ACCEPTED
# score: 1.0
# the last 3/8 of the layers run as a plain scan, so their values are kept and their backward pass
# runs first, before anything is rebuilt; the layers before them in checkpointed pairs, unrolled in
# a Python loop: only 10 of the 16 layers are recomputed, and the peak stays within the budget
import jax
import jax.numpy as jnp


def _layer(h, w):
    return jnp.tanh(h @ w), None


def scan_layers(ws, x):
    n = ws.shape[0]
    rebuilt = n - 3 * n // 8
    step = 2 if rebuilt % 2 == 0 else 1
    segment = jax.checkpoint(lambda h, wp: jax.lax.scan(_layer, h, wp)[0])
    h = x
    for start in range(0, rebuilt, step):
        h = segment(h, ws[start : start + step])
    return jax.lax.scan(_layer, h, ws[rebuilt:])[0]
