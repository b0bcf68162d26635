# expect: WRONG_POLICY
# blocked products save their partial dots, not the policy's whole W @ h: other residuals
import jax
import jax.numpy as jnp


def mlp_dots_policy(W1, W2, W3, x):
    def mv(W, v):
        b = max(1, W.shape[1] // 2)
        return sum(W[:, i:i + b] @ v[i:i + b] for i in range(0, W.shape[1], b))

    def network(W1, W2, W3, x):
        return jnp.sin(mv(W3, jnp.sin(mv(W2, jnp.sin(mv(W1, x))))))

    return jax.checkpoint(network, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)(W1, W2, W3, x)
