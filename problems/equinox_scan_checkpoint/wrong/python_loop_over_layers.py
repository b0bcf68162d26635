# expect: WRONG_POLICY
# A Python loop over the layers, each under eqx.filter_checkpoint: much the same values are kept,
# but per layer (L weight slices f32[h, d], L inputs f32[N, d], ...), not stacked over L by a scan.
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


def stacked_blocks(params):
    L, h, d = params["linear1"]["weight"].shape
    skeleton = eqx.filter_eval_shape(
        lambda: eqx.filter_vmap(lambda key: Block(d, h, key))(jax.random.split(jax.random.key(0), L))
    )
    return eqx.tree_at(
        lambda m: (m.linear1.weight, m.linear1.bias, m.linear2.weight, m.linear2.bias),
        skeleton,
        (params["linear1"]["weight"], params["linear1"]["bias"], params["linear2"]["weight"], params["linear2"]["bias"]),
    )


def equinox_scan_checkpoint(params, x):
    stack = stacked_blocks(params)
    dynamic, static = eqx.partition(stack, eqx.is_array)
    layer_fn = eqx.filter_checkpoint(lambda block, h: jax.vmap(block)(h))
    for l in range(params["linear1"]["weight"].shape[0]):
        block = eqx.combine(jax.tree.map(lambda a: a[l], dynamic), static)
        x = layer_fn(block, x)
    return x
