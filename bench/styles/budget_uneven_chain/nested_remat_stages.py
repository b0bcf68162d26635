# expect: ACCEPTED
# score: below 1
# Nested remat: each half of the chain (a wide pair and a narrow layer) is one jax.checkpoint that
# saves its narrow layer's product, and inside it the wide pair (d -> D -> d) is its own plain
# jax.checkpoint (nothing inside it saved). The halves keep their inputs and z2, z5: fits easily,
# but the wide pair's products are recomputed, and z1, z4 with them.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


@jax.checkpoint
def _wide_pair(h, w_up, w_down):
    return jnp.tanh(jnp.tanh(h @ w_up) @ w_down)


def _half(h, w_up, w_down, w_sq, name):
    h = _wide_pair(h, w_up, w_down)
    return jnp.tanh(checkpoint_name(h @ w_sq, name))


def uneven_chain(ws, x):
    first = jax.checkpoint(lambda h, a, b, c: _half(h, a, b, c, "z2"),
                           policy=jax.checkpoint_policies.save_only_these_names("z2"))
    second = jax.checkpoint(lambda h, a, b, c: _half(h, a, b, c, "z5"),
                            policy=jax.checkpoint_policies.save_only_these_names("z5"))
    return second(first(x, *ws[:3]), *ws[3:])
