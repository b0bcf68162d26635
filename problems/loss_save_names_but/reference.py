"""Reference solution of loss_save_names_but. Never served, never mounted into a jail."""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def _layer(W, x):
    return jnp.sin(jnp.dot(W, x))


def _predict(params, x):
    *hidden, W_last = params
    for i, W in enumerate(hidden):
        x = checkpoint_name(_layer(W, x), name=f"layer{i}_output")
    return jnp.dot(W_last, x)


def _loss(params, x, y):
    return jnp.sum((_predict(params, x) - y) ** 2)


def loss_save_names_but(params, x, y):
    policy = jax.checkpoint_policies.save_any_names_but_these("layer1_output")
    return jax.checkpoint(_loss, policy=policy)(params, x, y)
