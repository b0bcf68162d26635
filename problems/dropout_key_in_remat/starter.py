import jax
import jax.numpy as jnp

KEEP = 0.9  # dropout rate 0.1: each element is kept with probability 0.9, and kept ones scaled by 1/0.9


def dropout_key_in_remat(params, dropout_key, x):
    """params: {"Dense_0": {"kernel": float32[d, h], "bias": float32[h]},
                "Dense_1": {"kernel": float32[h, k], "bias": float32[k]}};
    dropout_key: uint32[2], the data of a PRNG key (turn it into a key with
    jax.random.wrap_key_data); x: float32[N, d].

    With k0, k1 = jax.random.split(key), each layer i computes
        h = tanh(h @ kernel + bias)
        keep = jax.random.bernoulli(k_i, KEEP, h.shape)
        h = where(keep, h / KEEP, 0)
    starting from h = x, and the function returns the last h, float32[N, k].

    Checkpoint each layer, dropout included, so that the backward pass draws each mask again from
    its key instead of keeping it.
    """
    raise NotImplementedError
