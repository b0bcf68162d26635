# expect: ACCEPTED
# Style: the recursion tree built bottom-up with a while loop: pair neighbouring segments, and in
# each pair checkpoint the one that runs first (the plain pairs of sin at the bottom are not
# checkpointed). This builds exactly the reference's tree for 16 = 2**4 steps.
import jax
import jax.numpy as jnp

DEPTH = 16


def _pair(first, second, checkpoint_first):
    run_first = jax.checkpoint(first) if checkpoint_first else first
    return lambda v: second(run_first(v))


def sin_chain_recursive(x):
    segments = [jnp.sin] * DEPTH
    level = 0
    while len(segments) > 1:
        segments = [_pair(segments[i], segments[i + 1], checkpoint_first=level > 0)
                    for i in range(0, len(segments), 2)]
        level += 1
    return segments[0](x)
