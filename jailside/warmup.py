"""Work a template does once before it forks, so each child does not do it again.

Only what leaves the process single-threaded with no JAX backend (forking after the backend has
started would copy a runtime without its threads). Measured with jax 0.10.2 on checkpoint_dot_policy
(CPU ms of a child's three exports, median of 3-4 forks): 330 with nothing warmed; 250 after
importing the MLIR `mhlo` and `chlo` dialect bindings, which JAX imports lazily at the first
lowering (about 140 ms under a profiler); about 20-50 ms less again after tracing (not lowering)
the VJP of a small checkpointed function, which fills JAX's first-use caches.
"""

from __future__ import annotations


class WarmupError(Exception):
    """The warm-up started a JAX backend: forking now would be unsafe."""


def warm_up(*, calls_exported: bool = False) -> None:
    """Imports the lazily loaded MLIR dialects and traces one checkpointed VJP to a jaxpr.

    Args:
        calls_exported: also load what lowering a call of an exported artifact loads the first
            time (the verifier): `jax.export` initialises LAPACK's FFI targets, which imports
            SciPy and numpy.testing (about 150 ms of CPU in a fresh child, measured).

    Raises:
        WarmupError: a JAX backend is running afterwards (a JAX upgrade changed what tracing does).
    """
    # the warm-up runs in the template only, after the template imported JAX
    import jax
    import jax.numpy as jnp
    from jax._src import xla_bridge
    from jax._src.lib.mlir.dialects import chlo, mhlo  # noqa: F401 - the lazy import is the point

    def f(w: jax.Array, x: jax.Array) -> jax.Array:
        policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
        return jnp.sum(jax.checkpoint(lambda a, b: jnp.sin(b @ a) @ a, policy=policy)(w, x) ** 2)

    aval = jax.ShapeDtypeStruct((4, 4), jnp.float32)
    jax.make_jaxpr(lambda w, x: jax.vjp(f, w, x)[1](jnp.float32(1.0)))(aval, aval)
    if calls_exported:
        # LAPACK's registration only when exported calls are warmed up
        from jax._src.lax import linalg
        from jaxlib.mlir.dialects import builtin  # noqa: F401

        linalg.initialize_lapack()
    if xla_bridge.backends_are_initialized():
        raise WarmupError("warming up started a JAX backend; the template must not fork after that")
