# expect: WRONG_POLICY
# Checkpoints the scanned body but forgets the policy: the matmul outputs are recomputed, not saved.
import jax
import jax.numpy as jnp


def scan_layers_remat(Ws, bs, x):
    @jax.checkpoint
    def layer(x, W_b):
        W, b = W_b
        return jax.nn.relu(x @ W + b), None

    x, _ = jax.lax.scan(layer, x, (Ws, bs))
    return x
