# expect: ACCEPTED
# score: below 1
# a Python for-loop over groups of 4 layers, each a checkpointed lax.scan: every layer rebuilt once (held out: written apart from the package)
import jax
import jax.numpy as jnp


@jax.checkpoint
def _group(h, wg):
    def layer(h, w):
        return jnp.tanh(h @ w), None

    return jax.lax.scan(layer, h, wg)[0]


def scan_layers(ws, x):
    n = ws.shape[0]
    g = 4 if n % 4 == 0 and n > 4 else 2
    h = x
    for start in range(0, n, g):
        h = _group(h, ws[start:start + g])
    return h
