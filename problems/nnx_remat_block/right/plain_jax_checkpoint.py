# expect: ACCEPTED
# Style: no framework at all. The block is a function of its parameter dict under jax.checkpoint
# with the same names policy: the judge compares what is saved, not which library saved it.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def _block(layer, x):
    l1, l2 = layer["linear1"], layer["linear2"]
    hidden = checkpoint_name(jnp.dot(x, l1["kernel"]) + l1["bias"], "hidden")
    return x + (jnp.dot(jax.nn.gelu(hidden), l2["kernel"]) + l2["bias"])


def nnx_remat_block(params, x):
    block = jax.checkpoint(_block, policy=jax.checkpoint_policies.save_only_these_names("hidden"))
    for layer in params["blocks"]:
        x = block(layer, x)
    return x
