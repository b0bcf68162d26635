# expect: ACCEPTED
# Style: Flax linen, as MaxText writes it: DenseGeneral projections named with checkpoint_name,
# nn.remat with the "minimal" policy, and nn.vmap over the stages with the parameters' leading
# axis mapped (variable_axes={"params": 0}). The given pytree is laid out as linen's variables.
import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

MINIMAL = jax.checkpoint_policies.save_only_these_names(
    "query_proj", "key_proj", "value_proj", "out_proj", "mlpwi", "mlpwo")


class Block(nn.Module):
    heads: int
    head_dim: int
    mlp_dim: int

    @nn.compact
    def __call__(self, x):
        d = x.shape[-1]
        proj = lambda name: nn.DenseGeneral((self.heads, self.head_dim), use_bias=False, name=name)
        q = checkpoint_name(proj("query")(x), "query_proj")
        k = checkpoint_name(proj("key")(x), "key_proj")
        v = checkpoint_name(proj("value")(x), "value_proj")
        probs = nn.softmax(jnp.einsum("bqhe,bkhe->bhqk", q, k) / jnp.sqrt(self.head_dim).astype(x.dtype))
        ctx = jnp.einsum("bhqk,bkhe->bqhe", probs, v)
        out = nn.DenseGeneral(d, axis=(-2, -1), use_bias=False, name="out")(ctx)
        h = x + checkpoint_name(out, "out_proj")
        u = checkpoint_name(nn.DenseGeneral(self.mlp_dim, use_bias=False, name="wi")(h), "mlpwi")
        return h + checkpoint_name(nn.DenseGeneral(d, use_bias=False, name="wo")(nn.gelu(u)), "mlpwo")


def maxtext_minimal_stages(params, x):
    _, _, heads, head_dim = params["attention"]["query"].shape
    stages = nn.vmap(nn.remat(Block, policy=MINIMAL), variable_axes={"params": 0},
                     split_rngs={"params": True}, in_axes=0, out_axes=0)
    model = stages(heads=heads, head_dim=head_dim, mlp_dim=params["mlp"]["wi"].shape[-1])
    variables = {"params": {**{k: {"kernel": w} for k, w in params["attention"].items()},
                            **{k: {"kernel": w} for k, w in params["mlp"].items()}}}
    return model.apply(variables, x)
