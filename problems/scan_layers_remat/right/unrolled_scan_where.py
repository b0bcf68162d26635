# expect: ACCEPTED
# Style: jax.checkpoint in call form on a module-level body, the policy alias
# checkpoint_dots_with_no_batch_dims, relu written with jnp.where, lax.scan with unroll=2.
import jax
import jax.numpy as jnp


def _body(h, layer):
    W, b = layer
    z = jnp.dot(h, W) + b[None, :]
    return jnp.where(z > 0, z, 0.0), None


def scan_layers_remat(Ws, bs, x):
    body = jax.checkpoint(_body, policy=jax.checkpoint_policies.checkpoint_dots_with_no_batch_dims)
    h, _ = jax.lax.scan(body, x, (Ws, bs), unroll=2)
    return h
