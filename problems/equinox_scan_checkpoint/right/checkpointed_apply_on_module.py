# expect: ACCEPTED
# Style: eqx.filter_checkpoint on a function that takes a whole (one-layer) module: its arrays are
# the dynamic inputs, everything else static. The scan body combines the layer's slice with the
# static part and calls it; the skeleton is filled with jax.tree_util.tree_unflatten.
import equinox as eqx
import jax
import jax.numpy as jnp


class Block(eqx.Module):
    linear1: eqx.nn.Linear
    linear2: eqx.nn.Linear

    def __init__(self, d, h, key):
        k1, k2 = jax.random.split(key)
        self.linear1 = eqx.nn.Linear(d, h, key=k1)
        self.linear2 = eqx.nn.Linear(h, d, key=k2)

    def __call__(self, x):
        return x + self.linear2(jnp.tanh(self.linear1(x)))


@eqx.filter_checkpoint
def apply_layer(block, h):
    return jax.vmap(block)(h)


def equinox_scan_checkpoint(params, x):
    L, h, d = params["linear1"]["weight"].shape
    skeleton = eqx.filter_eval_shape(
        lambda: eqx.filter_vmap(lambda k: Block(d, h, k))(jax.random.split(jax.random.key(1), L))
    )
    # a Block flattens field by field: linear1.weight, linear1.bias, linear2.weight, linear2.bias
    leaves = [params[name][leaf] for name in ("linear1", "linear2") for leaf in ("weight", "bias")]
    stack = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(skeleton), leaves)
    dynamic, static = eqx.partition(stack, eqx.is_array)

    def body(carry, layer):
        return apply_layer(eqx.combine(layer, static), carry), None

    out, _ = jax.lax.scan(body, x, dynamic)
    return out
