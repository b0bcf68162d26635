# expect: ACCEPTED
# Style: functools.reduce over the layers' dicts, with the checkpointed step built by
# functools.partial(jax.checkpoint, prevent_cse=True).
from functools import partial, reduce

import jax
import jax.numpy as jnp


@partial(jax.checkpoint, prevent_cse=True)
def _step(h, layer):
    return jnp.tanh(h @ layer["kernel"] + layer["bias"])


def mlp_params_tree(params, x):
    return reduce(_step, [params[k] for k in ("Dense_0", "Dense_1", "Dense_2")], x)
