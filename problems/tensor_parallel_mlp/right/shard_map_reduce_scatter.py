# expect: ACCEPTED
# Style: shard_map with the all-reduce written as psum_scatter then all_gather (what an
# all-reduce is made of), a hand-written policy function, and jax.checkpoint inside the body.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec as P


def _keep_hidden(prim, *_, **params):
    return prim.name == "name" and params.get("name") == "hidden"


def _body(x, w1, w2):
    def block(x, w1, w2):
        u = checkpoint_name(jnp.einsum("bd,dh->bh", x, w1), "hidden")
        partial = jnp.einsum("bh,hd->bd", jnp.tanh(u), w2)
        piece = jax.lax.psum_scatter(partial, "model", scatter_dimension=1, tiled=True)
        return x + jax.lax.all_gather(piece, "model", axis=1, tiled=True)

    return jax.checkpoint(block, policy=_keep_hidden)(x, w1, w2)


def tensor_parallel_mlp(x, w1, w2):
    return jax.shard_map(_body, in_specs=(P("data", None), P(None, "model"), P("model", None)),
                         out_specs=P("data", None), check_vma=False)(x, w1, w2)
