# Within the budget the weights and x alone take 573,440 bytes in the large case, so four narrow
# (B, d) values fit besides them and no wide (B, D) one does. This policy keeps the four narrow
# pre-activations and recomputes the two wide products.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def _layers(ws, x):
    h = x
    for i, w in enumerate(ws):
        h = jnp.tanh(checkpoint_name(h @ w, f"z{i}"))
    return h


def uneven_chain(ws, x):
    policy = jax.checkpoint_policies.save_only_these_names("z1", "z2", "z4", "z5")
    return jax.checkpoint(_layers, policy=policy)(ws, x)


def _segments(size):
    """A checkpoint around each run of `size` layers: the uniform "every size-th layer" recipe."""

    def run(ws, x):
        h = x
        for start in range(0, len(ws), size):
            h = jax.checkpoint(_layers)(ws[start : start + size], h)
        return h

    return run


def _names(*names):
    return lambda ws, x: jax.checkpoint(_layers, policy=jax.checkpoint_policies.save_only_these_names(*names))(ws, x)


# the uniform heuristics, measured by the judge and drawn on the panel beside the optimum
SCHEDULES = {
    "every layer": _segments(1),
    "every 2nd layer (about √n)": _segments(2),
    "every 3rd layer": _segments(3),
    "every other product (z1, z3, z5)": _names("z1", "z3", "z5"),
    "the wide products (z0, z3)": _names("z0", "z3"),
}
