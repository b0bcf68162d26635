# expect: WRONG_POLICY
# keeping more layers' values outright recomputes less, but the last 5/8 of the layers kept at once
# go over the peak budget in `large`
import jax
import jax.numpy as jnp


def _layer(h, w):
    return jnp.tanh(h @ w), None


def scan_layers(ws, x):
    n = ws.shape[0]
    rebuilt = n - 5 * n // 8
    group = jax.checkpoint(lambda h, wg: (jax.lax.scan(_layer, h, wg)[0], None))
    h = jax.lax.scan(group, x, ws[:rebuilt].reshape(rebuilt // 2, 2, *ws.shape[1:]))[0]
    return jax.lax.scan(_layer, h, ws[rebuilt:])[0]
