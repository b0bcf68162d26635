# expect: WRONG_POLICY
# Names tanh(y) and saves it with save_only_these_names instead of saving the matmul output y: the
# saved f32[B, M, P] has the right shape but holds tanh(y), and the backward pass runs the batched
# matmul again to rebuild tanh's derivative.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def batched_dots_policy(x, w):
    def loss(x, w):
        t = checkpoint_name(jnp.tanh(jnp.einsum("bmk,bkp->bmp", x, w)), "t")
        return jnp.sum(t ** 2)

    policy = jax.checkpoint_policies.save_only_these_names("t")
    return jax.checkpoint(loss, policy=policy)(x, w)
