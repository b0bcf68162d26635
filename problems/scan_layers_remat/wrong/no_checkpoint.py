# expect: WRONG_POLICY
# A plain scan: autodiff stacks each layer's input and its relu mask (bool) over the L steps.
import jax
import jax.numpy as jnp


def scan_layers_remat(Ws, bs, x):
    def layer(x, W_b):
        W, b = W_b
        return jax.nn.relu(x @ W + b), None

    x, _ = jax.lax.scan(layer, x, (Ws, bs))
    return x
