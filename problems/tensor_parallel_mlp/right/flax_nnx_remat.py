# expect: ACCEPTED
# Style: a Flax NNX module holding the two kernels as nnx.Param, its forward pass checkpointed
# with nnx.remat and the named policy; with_sharding_constraint keeps the hidden (data, model).
import jax
import jax.numpy as jnp
from flax import nnx
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec as P


class TensorParallelMLP(nnx.Module):
    def __init__(self, w1, w2):
        self.up = nnx.Param(w1)      # [d, h], columns over `model`
        self.down = nnx.Param(w2)    # [h, d], rows over `model`

    def __call__(self, x):
        u = jax.lax.with_sharding_constraint(x @ self.up[...], P("data", "model"))
        u = checkpoint_name(u, "hidden")
        return x + jnp.tanh(u) @ self.down[...]


@nnx.remat(policy=jax.checkpoint_policies.save_only_these_names("hidden"))
def _forward(model, x):
    return model(x)


def tensor_parallel_mlp(x, w1, w2):
    return _forward(TensorParallelMLP(w1, w2), x)
