# expect: WRONG_POLICY
# A hand-written jax.custom_vjp layer with a textbook cache: its inputs (h, W, b) and its output
# relu(h @ W + b), from which the backward pass takes relu's mask. Scanned, that stacks to the
# reference's shapes (f32[L, d, d], f32[L, d], f32[L, N, d] twice), but the second f32[L, N, d]
# holds the layer outputs, not the matmul outputs h @ W.
import jax
import jax.numpy as jnp


@jax.custom_vjp
def _layer(h, W, b):
    return jax.nn.relu(h @ W + b)


def _layer_fwd(h, W, b):
    out = jax.nn.relu(h @ W + b)
    return out, (h, W, b, out)


def _layer_bwd(cache, g):
    h, W, _b, out = cache
    gz = jnp.where(out > 0, g, 0.0)
    return gz @ W.T, h.T @ gz, jnp.sum(gz, axis=0)


_layer.defvjp(_layer_fwd, _layer_bwd)


def scan_layers_remat(Ws, bs, x):
    def body(h, Wb):
        return _layer(h, Wb[0], Wb[1]), None

    return jax.lax.scan(body, x, (Ws, bs))[0]
