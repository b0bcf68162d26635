# expect: WRONG_POLICY
# nnx.remat on each block but no policy: the hidden values are not kept, so the backward pass
# recomputes linear1's matmul as well as the GELU.
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


def block_from_params(layer):
    d, h = layer["linear1"]["kernel"].shape
    graphdef, state = nnx.split(nnx.eval_shape(lambda: Block(d, h, rngs=nnx.Rngs(0))))
    nnx.replace_by_pure_dict(state, layer)
    return nnx.merge(graphdef, state)


def nnx_remat_block(params, x):
    forward = nnx.remat(Block.__call__)
    for layer in params["blocks"]:
        x = forward(block_from_params(layer), x)
    return x
