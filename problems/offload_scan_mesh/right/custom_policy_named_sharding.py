# expect: ACCEPTED
# Style: jit-style code with a hand-written policy (Offloadable for "hidden", Recompute for the
# rest), NamedShardings built from the abstract mesh for the constraints, and jax.remat applied
# to the layer function inside the scan call.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import Offloadable, Recompute, checkpoint_name
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

TO_HOST = Offloadable(src="device", dst="pinned_host")


def hidden_to_host(prim, *avals, **params):
    if prim.name == "name" and params["name"] == "hidden":
        return TO_HOST
    return Recompute


def offload_scan_mesh(w_in, w_out, x):
    mesh = jax.sharding.get_abstract_mesh()
    hidden_sharding = NamedSharding(mesh, P("data", None, "model"))
    stream_sharding = NamedSharding(mesh, P("data", None, None))

    def layer(x, w):
        a, b = w
        h = checkpoint_name(jax.lax.with_sharding_constraint(jnp.dot(x, a), hidden_sharding), "hidden")
        return jax.lax.with_sharding_constraint(x + jnp.maximum(h, 0.0) @ b, stream_sharding), None

    x, _ = jax.lax.scan(jax.remat(layer, policy=hidden_to_host), x, (w_in, w_out))
    return x
