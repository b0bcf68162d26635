"""Reference solution of nnx_remat_block. Never served, never mounted into a jail."""

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


def _block(layer):
    d, h = layer["linear1"]["kernel"].shape
    graphdef, state = nnx.split(nnx.eval_shape(lambda: Block(d, h, rngs=nnx.Rngs(0))))
    nnx.replace_by_pure_dict(state, layer)
    return nnx.merge(graphdef, state)


def nnx_remat_block(params, x):
    policy = jax.checkpoint_policies.save_only_these_names("hidden")
    forward = nnx.remat(Block.__call__, policy=policy)
    for layer in params["blocks"]:
        x = forward(_block(layer), x)
    return x
