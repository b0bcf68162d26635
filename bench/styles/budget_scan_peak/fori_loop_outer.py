# expect: ACCEPTED
# score: below 1
# an outer lax.fori_loop slicing the closed-over weights per group, the group checkpointed (held out: written apart from the package)
import jax
import jax.numpy as jnp


def scan_layers(ws, x):
    n = ws.shape[0]
    g = 4 if n % 4 == 0 and n > 4 else 2

    @jax.checkpoint
    def group(h, wg):
        return jax.lax.scan(lambda h, w: (jnp.tanh(h @ w), None), h, wg)[0]

    def body(i, h):
        wg = jax.lax.dynamic_slice_in_dim(ws, i * g, g, axis=0)
        return group(h, wg)

    return jax.lax.fori_loop(0, n // g, body, x)
