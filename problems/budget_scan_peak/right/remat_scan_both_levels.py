# expect: ACCEPTED
# score: below 1
# the textbook two-level remat (as flax's nn.remat_scan nests it): both levels checkpointed, so
# within the budget but every layer is recomputed twice
import jax
import jax.numpy as jnp


def _layer(h, w):
    return jnp.tanh(h @ w), None


def scan_layers(ws, x):
    n = ws.shape[0]
    g = 4 if n % 4 == 0 and n > 4 else 2
    inner = jax.checkpoint(_layer, prevent_cse=False)

    def group(h, wg):
        return jax.lax.scan(inner, h, wg)[0], None

    blocks = ws.reshape(n // g, g, *ws.shape[1:])
    return jax.lax.scan(jax.checkpoint(group, prevent_cse=False), x, blocks)[0]
