# expect: ACCEPTED
# Style: NNX's functional API under plain jax.checkpoint: the graphdef is static (closed over),
# a block's parameter dict is the checkpointed function's argument and the module is merged
# inside it; the blocks are folded with functools.reduce.
from functools import reduce

import jax
from flax import nnx
from jax.ad_checkpoint import checkpoint_name


class Block(nnx.Module):
    def __init__(self, d, h, *, rngs):
        self.linear1 = nnx.Linear(d, h, rngs=rngs)
        self.linear2 = nnx.Linear(h, d, rngs=rngs)

    def __call__(self, x):
        z = checkpoint_name(self.linear1(x), "hidden")
        return x + self.linear2(jax.nn.gelu(z))


def nnx_remat_block(params, x):
    d, h = x.shape[-1], params["blocks"][0]["linear1"]["bias"].shape[0]
    graphdef, abstract = nnx.split(nnx.eval_shape(lambda: Block(d, h, rngs=nnx.Rngs(0))))

    def step(x, layer):
        state = jax.tree.map(lambda v: v, abstract)  # a fresh copy of the abstract state
        nnx.replace_by_pure_dict(state, layer)
        return nnx.merge(graphdef, state)(x)

    step = jax.checkpoint(step, policy=jax.checkpoint_policies.save_only_these_names("hidden"))
    return reduce(step, params["blocks"], x)
