# expect: WRONG_POLICY
# the group checkpoint with dots_saveable keeps every product: over the peak budget (held out: written apart from the package)
import jax
import jax.numpy as jnp


def scan_layers(ws, x):
    n = ws.shape[0]
    g = 4 if n % 4 == 0 and n > 4 else 2

    def group(h, wg):
        return jax.lax.scan(lambda h, w: (jnp.tanh(h @ w), None), h, wg)[0], None

    group = jax.checkpoint(group, policy=jax.checkpoint_policies.dots_saveable)
    return jax.lax.scan(group, x, ws.reshape(n // g, g, *ws.shape[1:]))[0]
