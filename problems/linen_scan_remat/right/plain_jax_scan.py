# expect: ACCEPTED
# Style: plain JAX, no Flax: lax.scan over the parameter dict itself (each step gets one layer's
# dict), the body under jax.checkpoint.
import jax
import jax.numpy as jnp


@jax.checkpoint
def _layer(h, p):
    a = jnp.tanh(h @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"])
    return h + a @ p["Dense_1"]["kernel"] + p["Dense_1"]["bias"], None


def linen_scan_remat(params, x):
    h, _ = jax.lax.scan(_layer, x, params)
    return h
