# expect: ACCEPTED
# Style: jax.remat with an explicit nothing_saveable policy, the kernel and bias passed as two
# arguments, the matmul written as an einsum.
import jax
import jax.numpy as jnp


def _layer(kernel, bias, h):
    return jnp.tanh(jnp.einsum("nd,dh->nh", h, kernel) + bias)


def mlp_params_tree(params, x):
    layer = jax.remat(_layer, policy=jax.checkpoint_policies.nothing_saveable)
    h = x
    for i in range(3):
        p = params[f"Dense_{i}"]
        h = layer(p["kernel"], p["bias"], h)
    return h
