# expect: ACCEPTED
# Style: no framework at all. A lax.scan over the stacked parameter dict whose body is under
# jax.checkpoint; Equinox's (out, in) weights are applied as h @ W.T. The judge compares what is
# saved, not which library saved it.
import jax
import jax.numpy as jnp


@jax.checkpoint
def _layer(h, p):
    l1, l2 = p["linear1"], p["linear2"]
    hidden = jnp.tanh(h @ l1["weight"].T + l1["bias"])
    return h + (hidden @ l2["weight"].T + l2["bias"]), None


def equinox_scan_checkpoint(params, x):
    h, _ = jax.lax.scan(_layer, x, params)
    return h
