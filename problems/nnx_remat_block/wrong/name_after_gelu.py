# expect: WRONG_POLICY
# The name "hidden" moved after the GELU: each block saves gelu(linear1(x)), the same shape
# f32[N, h] as the policy's value but another array, and still recomputes linear1(x) (and keeps
# linear1's bias) for the GELU's derivative.
import jax
from flax import nnx
from jax.ad_checkpoint import checkpoint_name


class Block(nnx.Module):
    def __init__(self, d, h, *, rngs):
        self.linear1 = nnx.Linear(d, h, rngs=rngs)
        self.linear2 = nnx.Linear(h, d, rngs=rngs)

    def __call__(self, x):
        a = checkpoint_name(jax.nn.gelu(self.linear1(x)), "hidden")
        return x + self.linear2(a)


def block_from_params(layer):
    d, h = layer["linear1"]["kernel"].shape
    graphdef, state = nnx.split(nnx.eval_shape(lambda: Block(d, h, rngs=nnx.Rngs(0))))
    nnx.replace_by_pure_dict(state, layer)
    return nnx.merge(graphdef, state)


def nnx_remat_block(params, x):
    forward = nnx.remat(Block.__call__, policy=jax.checkpoint_policies.save_only_these_names("hidden"))
    for layer in params["blocks"]:
        x = forward(block_from_params(layer), x)
    return x
