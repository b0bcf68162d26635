# expect: ACCEPTED
# Style: the checkpoint lives in the class, as a method decorator (eqx.filter_checkpoint on a
# __call__ that takes the whole batch); the scan body is a plain function of the stacked module's
# array part.
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

    @eqx.filter_checkpoint
    def __call__(self, xs):
        hidden = jnp.tanh(jax.vmap(self.linear1)(xs))
        return xs + jax.vmap(self.linear2)(hidden)


def equinox_scan_checkpoint(params, x):
    L, h, d = params["linear1"]["weight"].shape
    skeleton = eqx.filter_eval_shape(
        lambda: eqx.filter_vmap(lambda k: Block(d, h, k))(jax.random.split(jax.random.key(0), L))
    )
    stack = eqx.tree_at(lambda m: m.linear1.weight, skeleton, params["linear1"]["weight"])
    stack = eqx.tree_at(lambda m: m.linear1.bias, stack, params["linear1"]["bias"])
    stack = eqx.tree_at(lambda m: m.linear2.weight, stack, params["linear2"]["weight"])
    stack = eqx.tree_at(lambda m: m.linear2.bias, stack, params["linear2"]["bias"])
    dynamic, static = eqx.partition(stack, eqx.is_array)
    out, _ = jax.lax.scan(lambda c, layer: (eqx.combine(layer, static)(c), None), x, dynamic)
    return out
