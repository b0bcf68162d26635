import jax
from flax import nnx
from jax.ad_checkpoint import checkpoint_name


class Block(nnx.Module):
    """x -> x + linear2(gelu(linear1(x))), with linear1's output named "hidden"."""

    def __init__(self, d, h, *, rngs):
        self.linear1 = nnx.Linear(d, h, rngs=rngs)
        self.linear2 = nnx.Linear(h, d, rngs=rngs)

    def __call__(self, x):
        z = checkpoint_name(self.linear1(x), "hidden")
        return x + self.linear2(jax.nn.gelu(z))


def block_from_params(layer):
    """Builds a Block whose parameters are the arrays of `layer` (a dict shaped like
    nnx.state(Block)): an abstract Block (no random numbers are drawn), split into its graphdef
    and state, the given arrays put into the state, merged back."""
    d, h = layer["linear1"]["kernel"].shape
    graphdef, state = nnx.split(nnx.eval_shape(lambda: Block(d, h, rngs=nnx.Rngs(0))))
    nnx.replace_by_pure_dict(state, layer)
    return nnx.merge(graphdef, state)


def nnx_remat_block(params, x):
    """params: {"blocks": [block_0, block_1, block_2]}, a list of three dicts, each the pure
    dict of one Block's nnx.state:
        {"linear1": {"kernel": float32[d, h], "bias": float32[h]},
         "linear2": {"kernel": float32[h, d], "bias": float32[d]}}
    x: float32[N, d].

    Applies the three blocks in order, x <- Block(x) with
    Block(x) = x + linear2(gelu(linear1(x))), and returns the last x, float32[N, d].

    Apply each block with nnx.remat and a policy that saves only the values named "hidden", so
    the VJP keeps the kernels, x, the outputs of the first two blocks and each block's hidden
    value, and recomputes the GELU in the backward pass.
    """
    blocks = [block_from_params(layer) for layer in params["blocks"]]
    raise NotImplementedError("apply the blocks, each under nnx.remat with a policy")
