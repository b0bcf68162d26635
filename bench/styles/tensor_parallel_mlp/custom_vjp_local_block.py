# expect: ACCEPTED
# Style: shard_map with the device-local part of the block (x @ w1, tanh, @ w2) as a jax.custom_vjp
# whose forward rule saves the pieces of x, w1, w2 and the hidden u; tanh is recomputed from u in the
# backward rule. x is cast to varying over `model` (lax.pcast) before the local block, so its
# transpose sums the gradient of x over `model`; the psum of the partial sums is outside the rule,
# the weight gradients' psum over `data` inside the backward rule.
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


@jax.custom_vjp
def local_block(x, w1, w2):
    return jnp.tanh(x @ w1) @ w2


def _local_block_fwd(x, w1, w2):
    u = x @ w1                                   # [B/2, h/2]: this device's piece of the hidden
    return jnp.tanh(u) @ w2, (x, w1, w2, u)


def _local_block_bwd(res, g):
    x, w1, w2, u = res
    t = jnp.tanh(u)                              # recomputed, no matmul
    dt = g @ w2.T
    du = dt * (1.0 - t * t)
    # the weights are replicated over `data`: their gradients sum every data shard's share
    return du @ w1.T, jax.lax.psum(x.T @ du, "data"), jax.lax.psum(t.T @ g, "data")


local_block.defvjp(_local_block_fwd, _local_block_bwd)


def _body(x, w1, w2):
    xv = jax.lax.pcast(x, "model", to="varying")
    return x + jax.lax.psum(local_block(xv, w1, w2), "model")


def tensor_parallel_mlp(x, w1, w2):
    return jax.shard_map(_body, in_specs=(P("data", None), P(None, "model"), P("model", None)),
                         out_specs=P("data", None))(x, w1, w2)
