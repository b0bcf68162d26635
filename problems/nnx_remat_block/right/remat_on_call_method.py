# expect: ACCEPTED
# Style: the remat lives in the class: __call__ is decorated with functools.partial(nnx.remat,
# policy=...); one graphdef is split once and merged with each block's nnx.State.
from functools import partial

import jax
from flax import nnx
from jax.ad_checkpoint import checkpoint_name

POLICY = jax.checkpoint_policies.save_only_these_names("hidden")


class Block(nnx.Module):
    def __init__(self, d, h, *, rngs):
        self.linear1 = nnx.Linear(d, h, rngs=rngs)
        self.linear2 = nnx.Linear(h, d, rngs=rngs)

    @partial(nnx.remat, policy=POLICY)
    def __call__(self, x):
        hidden = checkpoint_name(self.linear1(x), "hidden")
        return x + self.linear2(nnx.gelu(hidden))


def nnx_remat_block(params, x):
    d, h = params["blocks"][0]["linear1"]["kernel"].shape
    graphdef, _ = nnx.split(nnx.eval_shape(lambda: Block(d, h, rngs=nnx.Rngs(0))))
    for layer in params["blocks"]:
        block = nnx.merge(graphdef, nnx.State(layer))
        x = block(x)
    return x
