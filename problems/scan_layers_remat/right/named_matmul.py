# expect: ACCEPTED
# Style: names the matmul output x @ W inside the body with checkpoint_name and saves it with
# save_only_these_names (the value the dots policy saves); the body takes an index and slices.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def scan_layers_remat(Ws, bs, x):
    def layer(h, W, b):
        z = checkpoint_name(jnp.dot(h, W), "z")
        return jax.nn.relu(z + b)

    layer = jax.checkpoint(layer, policy=jax.checkpoint_policies.save_only_these_names("z"))

    def body(h, Wb):
        return layer(h, Wb[0], Wb[1]), None

    return jax.lax.scan(body, x, (Ws, bs))[0]
