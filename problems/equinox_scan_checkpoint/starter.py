import equinox as eqx
import jax
import jax.numpy as jnp


class Block(eqx.Module):
    """One layer on one example: x -> x + linear2(tanh(linear1(x))), x of shape (d,)."""

    linear1: eqx.nn.Linear
    linear2: eqx.nn.Linear

    def __init__(self, d, h, key):
        k1, k2 = jax.random.split(key)
        self.linear1 = eqx.nn.Linear(d, h, key=k1)
        self.linear2 = eqx.nn.Linear(h, d, key=k2)

    def __call__(self, x):
        return x + self.linear2(jnp.tanh(self.linear1(x)))


def stacked_blocks(params):
    """A Block whose leaves are stacked over L layers (what eqx.filter_vmap of the constructor
    builds), holding the arrays of `params`. The skeleton is built under eqx.filter_eval_shape:
    no random numbers are drawn, only shapes; eqx.tree_at puts the given arrays in."""
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
    """params: the L layers' parameters, stacked along a leading axis, as a dict shaped like the
    stacked Block (Equinox's Linear keeps its weight as (out, in)):
        {"linear1": {"weight": float32[L, h, d], "bias": float32[L, h]},
         "linear2": {"weight": float32[L, d, h], "bias": float32[L, d]}}
    x: float32[N, d], a batch of N examples.

    Applies the L blocks in order, layer l to every row of x (x <- jax.vmap(block_l)(x)), and
    returns the last x, float32[N, d].

    Write it as one jax.lax.scan over the layers, the carry being x, with the scanned body wrapped
    in eqx.filter_checkpoint (no policy): split the stacked module with eqx.partition, scan over
    its array part and eqx.combine one layer's slice with the static part inside the body.
    """
    stack = stacked_blocks(params)
    raise NotImplementedError("scan over the layers of `stack` with a checkpointed body")
