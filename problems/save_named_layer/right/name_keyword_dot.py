# expect: ACCEPTED
# Style: checkpoint_name(..., name=...) keyword, jnp.dot, the policy built once at module level and
# the checkpointed function built with jax.checkpoint in call form.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

SAVE_A = jax.checkpoint_policies.save_only_these_names("a")


def _network(W1, W2, W3, x):
    a = checkpoint_name(jnp.sin(jnp.dot(W1, x)), name="a")
    b = checkpoint_name(jnp.sin(jnp.dot(W2, a)), name="b")
    return checkpoint_name(jnp.sin(jnp.dot(W3, b)), name="c")


_checkpointed = jax.checkpoint(_network, policy=SAVE_A)


def save_named_layer(W1, W2, W3, x):
    return _checkpointed(W1, W2, W3, x)
