# expect: ACCEPTED
# score: below 1
# groups of 4 checkpointed in a scan, the last group a plain scan: 12 of 16 layers rebuilt (held out: written apart from the package)
import jax
import jax.numpy as jnp


def _layer(h, w):
    return jnp.tanh(h @ w), None


def scan_layers(ws, x):
    n = ws.shape[0]
    g = 4 if n % 4 == 0 and n > 4 else 2
    head, tail = ws[: n - g], ws[n - g:]

    @jax.checkpoint
    def group(h, wg):
        return jax.lax.scan(_layer, h, wg)[0], None

    h = jax.lax.scan(group, x, head.reshape((n - g) // g, g, *ws.shape[1:]))[0]
    return jax.lax.scan(_layer, h, tail)[0]
