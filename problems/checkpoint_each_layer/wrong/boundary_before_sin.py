# expect: WRONG_POLICY
# Shifts every checkpoint boundary to just before the sin: the segments are W @ x, then
# W2 @ sin(.), then sin(W3 @ sin(.)). It saves the same shapes as per-layer checkpointing
# (the four arguments, one f32[h1], one f32[h2]), but the f32[h1] and f32[h2] it keeps are the
# pre-activations W1 x and W2 a, not the layer outputs a and b.
import jax
import jax.numpy as jnp


def checkpoint_each_layer(W1, W2, W3, x):
    z1 = jax.checkpoint(lambda W, v: W @ v)(W1, x)
    z2 = jax.checkpoint(lambda W, z: W @ jnp.sin(z))(W2, z1)
    return jax.checkpoint(lambda W, z: jnp.sin(W @ jnp.sin(z)))(W3, z2)
