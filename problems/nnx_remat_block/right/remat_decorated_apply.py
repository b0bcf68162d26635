# expect: ACCEPTED
# Style: nnx.remat as a decorator factory on a function that takes the module; each block is an
# abstract Block filled in place with nnx.update from its parameter dict.
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


@nnx.remat(policy=jax.checkpoint_policies.save_only_these_names("hidden"))
def apply_block(block, x):
    return block(x)


def nnx_remat_block(params, x):
    for layer in params["blocks"]:
        d, h = layer["linear1"]["kernel"].shape
        block = nnx.eval_shape(lambda: Block(d, h, rngs=nnx.Rngs(0)))
        state = nnx.state(block)
        nnx.replace_by_pure_dict(state, layer)
        nnx.update(block, state)
        x = apply_block(block, x)
    return x
