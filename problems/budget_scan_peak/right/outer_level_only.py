# expect: ACCEPTED
# score: below 1
# groups of four layers, only the groups checkpointed: each group's backward pass rebuilds the
# group once, keeping its layers' values, so every layer is recomputed once, not twice; it fits, but
# keeping the last layers' values outright (right/last_layers_kept.py) recomputes less
import jax
import jax.numpy as jnp


def scan_layers(ws, x):
    n = ws.shape[0]
    g = 4 if n % 4 == 0 and n > 4 else 2

    @jax.checkpoint
    def group(h, wg):
        def layer(h, w):
            return jnp.tanh(h @ w), None

        h, _ = jax.lax.scan(layer, h, wg)
        return h, None

    h, _ = jax.lax.scan(group, x, ws.reshape(n // g, g, *ws.shape[1:]))
    return h
