# expect: ACCEPTED
# Style: the body wrapped in call form with the jax.remat alias, jnp.einsum for the matmul,
# jnp.maximum as relu, xs passed as a tuple unpacked in the signature.
import jax
import jax.numpy as jnp


def scan_layers_remat(Ws, bs, x):
    def body(h, layer):
        W, b = layer
        h = jnp.maximum(jnp.einsum("nd,de->ne", h, W) + b, 0.0)
        return h, None

    body = jax.remat(body, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
    out, _ = jax.lax.scan(body, x, (Ws, bs))
    return out
