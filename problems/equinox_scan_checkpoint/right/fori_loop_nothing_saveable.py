# expect: ACCEPTED
# Style: a lax.fori_loop over the layer index with the body under
# eqx.filter_checkpoint(policy=nothing_saveable); the body slices layer i out of the stacked
# module with jax.tree.map. The stacked weights are kept once, as the arguments; the loop counter
# the backward pass also keeps is bookkeeping, not compared.
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


def equinox_scan_checkpoint(params, x):
    L, h, d = params["linear1"]["weight"].shape
    skeleton = eqx.filter_eval_shape(
        lambda: eqx.filter_vmap(lambda k: Block(d, h, k))(jax.random.split(jax.random.key(0), L))
    )
    stack = eqx.tree_at(
        lambda m: (m.linear1.weight, m.linear1.bias, m.linear2.weight, m.linear2.bias),
        skeleton,
        (params["linear1"]["weight"], params["linear1"]["bias"], params["linear2"]["weight"], params["linear2"]["bias"]),
    )
    dynamic, static = eqx.partition(stack, eqx.is_array)

    @eqx.filter_checkpoint(policy=jax.checkpoint_policies.nothing_saveable)
    def step(i, carry):
        block = eqx.combine(jax.tree.map(lambda a: a[i], dynamic), static)
        return jax.vmap(block)(carry)

    return jax.lax.fori_loop(0, L, step, x)
