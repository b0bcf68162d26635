# expect: WRONG_POLICY
# One nnx.remat (right policy) around the whole stack of blocks: the hidden values are kept but
# not the outputs of blocks 0 and 1, which the backward pass rebuilds (with the biases as residuals).
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


@nnx.remat(policy=jax.checkpoint_policies.save_only_these_names("hidden"))
def apply_stack(blocks, x):
    for block in blocks:
        x = block(x)
    return x


def nnx_remat_block(params, x):
    return apply_stack([block_from_params(layer) for layer in params["blocks"]], x)
