# expect: WRONG_POLICY
# checkpoint_name without jax.checkpoint: the name alone does nothing, so the plain scan keeps what
# autodiff needs at every layer (the hidden value, the relu output, ...) all on the device.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec as P


def _layer(x, w):
    w_in, w_out = w
    h = jax.lax.with_sharding_constraint(jnp.einsum("btd,df->btf", x, w_in), P("data", None, "model"))
    h = checkpoint_name(h, "hidden")
    y = jnp.einsum("btf,fd->btd", jax.nn.relu(h), w_out)
    return jax.lax.with_sharding_constraint(x + y, P("data", None, None)), None


def offload_scan_mesh(w_in, w_out, x):
    x, _ = jax.lax.scan(_layer, x, (w_in, w_out))
    return x
