# expect: WRONG_POLICY
# two segments offloading their wide products to pinned_host: offloaded residuals count in this peak (held out: written apart from the package)
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def _seg(tag):
    def run(ws, h):
        for i, w in enumerate(ws):
            h = jnp.tanh(checkpoint_name(h @ w, f"{tag}{i}"))
        return h

    policy = jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[f"{tag}{i}" for i in range(1, 6, 2)],
        names_which_can_be_offloaded=[f"{tag}{i}" for i in range(0, 6, 2)],
        offload_src="device",
        offload_dst="pinned_host",
    )
    return jax.checkpoint(run, policy=policy)


_first, _second = _seg("a"), _seg("b")


def chain_peak(ws, x):
    h = _first(ws[:6], x)
    return _second(ws[6:], h)
