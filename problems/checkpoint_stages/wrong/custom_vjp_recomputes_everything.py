# expect: WRONG_POLICY
# Saves exactly the reference's four values, but its custom_vjp backward rule recomputes and
# differentiates f2(f1(x)) 60 times: the recompute check, not the residuals, catches it.
import jax
import jax.numpy as jnp


def f1(x):
    return jnp.sin(x) * x


def f2(x):
    return jnp.exp(jnp.cos(x))


def f3(x):
    return jnp.tanh(x) ** 2


@jax.custom_vjp
def first_two(x):
    return f2(f1(x))


def _fwd(x):
    return first_two(x), (x,)


def _bwd(res, g):
    (x,) = res
    # "to be safe", recompute and differentiate the chain again and again
    total = jnp.zeros_like(x)
    for _ in range(60):
        _, vjp = jax.vjp(lambda v: f2(f1(v)), x)
        total = total + vjp(g)[0]
    return (total / 60,)


first_two.defvjp(_fwd, _bwd)


def checkpoint_stages(x):
    return f3(first_two(x))
