# expect: ACCEPTED
# Style: plain JAX, no Flax: an outer lax.scan over the a groups, whose body (under
# jax.checkpoint) is an inner lax.scan over the b layers of the group, not checkpointed.
import jax
import jax.numpy as jnp


def _layer(h, p):
    a = jnp.tanh(h @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"])
    return h + a @ p["Dense_1"]["kernel"] + p["Dense_1"]["bias"], None


@jax.checkpoint
def _group(h, group_params):
    h, _ = jax.lax.scan(_layer, h, group_params)
    return h, None


def linen_remat_scan_sqrt(params, x):
    h, _ = jax.lax.scan(_group, x, params)
    return h
