# expect: WRONG_ANSWER
# a fitting schedule that runs the layers in reverse order (held out: written apart from the package)
import jax
import jax.numpy as jnp


def scan_layers(ws, x):
    n = ws.shape[0]
    g = 4 if n % 4 == 0 and n > 4 else 2

    @jax.checkpoint
    def group(h, wg):
        return jax.lax.scan(lambda h, w: (jnp.tanh(h @ w), None), h, wg, reverse=True)[0], None

    return jax.lax.scan(group, x, ws.reshape(n // g, g, *ws.shape[1:]), reverse=True)[0]
