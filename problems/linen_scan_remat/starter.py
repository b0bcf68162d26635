import flax.linen as nn
import jax
import jax.numpy as jnp


class Block(nn.Module):
    """One layer: h + Dense_1(tanh(Dense_0(h))). Returns (new carry, no per-layer output), the
    form nn.scan wants."""

    hidden: int

    @nn.compact
    def __call__(self, h):
        a = jnp.tanh(nn.Dense(self.hidden)(h))
        return h + nn.Dense(h.shape[-1])(a), None


def linen_scan_remat(params, x):
    """params: the variables of L Blocks stacked on a leading axis, a dict
        {"Dense_0": {"kernel": float32[L, d, f], "bias": float32[L, f]},
         "Dense_1": {"kernel": float32[L, f, d], "bias": float32[L, d]}}
    (what nn.scan(Block, variable_axes={"params": 0}, length=L) holds);
    x: float32[N, d].

    Applies the L Blocks in order, layer l with params[...][l], starting from h = x, and returns
    the last h, float32[N, d].

    Scan over the layers with nn.scan, over Block wrapped in nn.remat, so the VJP keeps the
    parameters and each layer's input h, stacked [L, N, d], and recomputes inside each layer.
    """
    num_layers, _, hidden = params["Dense_0"]["kernel"].shape
    # nn.scan(Block, variable_axes={"params": 0}, split_rngs={"params": True}, length=num_layers)
    # applied with .apply({"params": params}, x) computes the right value, with no remat.
    raise NotImplementedError
