# expect: WRONG_POLICY
# Only linear1 and the tanh are under eqx.filter_checkpoint, inside a scan body that is not itself
# checkpointed: every layer also keeps tanh(linear1(h)), f32[L, N, h], for linear2's gradients.
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

    @eqx.filter_checkpoint
    def first_half(linear1, h):
        return jnp.tanh(jax.vmap(linear1)(h))

    def body(h, layer):
        block = eqx.combine(layer, static)
        return h + jax.vmap(block.linear2)(first_half(block.linear1, h)), None

    return jax.lax.scan(body, x, dynamic)[0]
