# expect: WRONG_POLICY
# everything_saveable in jit style: autodiff keeps what the plain block needs, tanh(u) and
# 1 - tanh(u)**2 (each device its (B/2, h/2) piece), not the hidden x @ W1: 5 residuals.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec as P


def tensor_parallel_mlp(x, w1, w2):
    def block(x, w1, w2):
        u = checkpoint_name(jax.lax.with_sharding_constraint(x @ w1, P("data", "model")), "hidden")
        return x + jnp.tanh(u) @ w2

    return jax.checkpoint(block, policy=jax.checkpoint_policies.everything_saveable)(x, w1, w2)
