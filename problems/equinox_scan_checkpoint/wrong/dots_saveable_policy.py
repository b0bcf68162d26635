# expect: WRONG_POLICY
# The scanned body under eqx.filter_checkpoint(policy=dots_saveable): linear1's matmul output
# (before its bias) is stacked over the layers and kept as well as the layer inputs; linear2's is
# not needed by the backward pass.
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
    dynamic, static = eqx.partition(stacked_blocks(params), eqx.is_array)

    @eqx.filter_checkpoint(policy=jax.checkpoint_policies.dots_saveable)
    def body(h, layer):
        return jax.vmap(eqx.combine(layer, static))(h), None

    return jax.lax.scan(body, x, dynamic)[0]
