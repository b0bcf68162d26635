# expect: ACCEPTED
# Style: the Flax linen model of jax-ml/jax #23869, fixed: nn.scan over nn.remat(Block) with the
# offloading policy, the stacked kernels as the scanned "params" collection, and the hidden value
# constrained with nn.with_logical_constraint under logical axis rules (batch -> data, mlp -> model).
import flax.linen as nn
import jax
from jax.ad_checkpoint import checkpoint_name

RULES = (("batch", "data"), ("length", None), ("embed", None), ("mlp", "model"))
POLICY = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=[], names_which_can_be_offloaded=["hidden"],
    offload_src="device", offload_dst="pinned_host")


class Block(nn.Module):
    features: int

    @nn.compact
    def __call__(self, x, _):
        h = nn.Dense(self.features, use_bias=False, name="wi")(x)
        h = checkpoint_name(nn.with_logical_constraint(h, ("batch", "length", "mlp")), "hidden")
        y = nn.Dense(x.shape[-1], use_bias=False, name="wo")(nn.relu(h))
        return nn.with_logical_constraint(x + y, ("batch", "length", "embed")), None


class Stack(nn.Module):
    features: int
    layers: int

    @nn.compact
    def __call__(self, x):
        scanned = nn.scan(nn.remat(Block, policy=POLICY, prevent_cse=False),
                          variable_axes={"params": 0}, split_rngs={"params": True}, length=self.layers)
        x, _ = scanned(self.features, name="layers")(x, None)
        return x


def offload_scan_mesh(w_in, w_out, x):
    params = {"layers": {"wi": {"kernel": w_in}, "wo": {"kernel": w_out}}}
    with nn.logical_axis_rules(RULES):
        return Stack(features=w_in.shape[-1], layers=w_in.shape[0]).apply({"params": params}, x)
