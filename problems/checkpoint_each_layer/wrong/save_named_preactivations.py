# expect: WRONG_POLICY
# One checkpoint around the network that saves the named pre-activations W1 x and W2 a instead of
# checkpointing each layer: the same shapes (the four arguments, one f32[h1], one f32[h2]), but the
# saved vectors are the matmul outputs, not the layer outputs a and b.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def network(W1, W2, W3, x):
    z1 = checkpoint_name(W1 @ x, "z1")
    z2 = checkpoint_name(W2 @ jnp.sin(z1), "z2")
    return jnp.sin(W3 @ jnp.sin(z2))


def checkpoint_each_layer(W1, W2, W3, x):
    policy = jax.checkpoint_policies.save_only_these_names("z1", "z2")
    return jax.checkpoint(network, policy=policy)(W1, W2, W3, x)
