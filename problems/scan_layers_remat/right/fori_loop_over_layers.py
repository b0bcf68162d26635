# expect: ACCEPTED
# Style: a fori_loop over the stacked layers instead of a scan. Its backward pass also keeps the
# loop counter (i32[] and i32[L]): bookkeeping, not part of the policy, and not compared.
import jax


def scan_layers_remat(Ws, bs, x):
    layer = jax.checkpoint(
        lambda h, W, b: jax.nn.relu(h @ W + b),
        policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
    )
    return jax.lax.fori_loop(0, Ws.shape[0], lambda i, h: layer(h, Ws[i], bs[i]), x)
