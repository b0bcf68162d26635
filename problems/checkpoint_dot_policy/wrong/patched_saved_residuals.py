# expect: WRONG_POLICY
# Forgery: no checkpoint, but JAX's residual report is patched to list what the policy saves.
import jax
import jax.ad_checkpoint
import jax.numpy as jnp
from jax._src import ad_checkpoint


def _claimed(f, *args, **kwargs):
    w1, w2, x = args
    n, d = x.shape
    aval = jax.core.ShapedArray
    return [(aval((d, d), jnp.float32), "from the argument w1"),
            (aval((d, d), jnp.float32), "from the argument w2"),
            (aval((n, d), jnp.float32), "from the argument x"),
            (aval((n, d), jnp.float32), "output of dot_general"),
            (aval((n, d), jnp.float32), "output of dot_general")]


ad_checkpoint.saved_residuals = _claimed
jax.ad_checkpoint.print_saved_residuals = lambda *a, **k: print("all good")


def checkpoint_dot_policy(w1, w2, x):
    return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)
