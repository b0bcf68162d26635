# expect: WRONG_POLICY
# Puts jax.checkpoint (with the right policy) around the whole scan instead of the scanned body.
import jax
import jax.numpy as jnp


def scan_layers_remat(Ws, bs, x):
    def layer(x, W_b):
        W, b = W_b
        return jax.nn.relu(x @ W + b), None

    def net(Ws, bs, x):
        x, _ = jax.lax.scan(layer, x, (Ws, bs))
        return x

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(net, policy=policy)(Ws, bs, x)
