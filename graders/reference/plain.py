"""`checkpoint_disabled`: the reference as if it had no `jax.checkpoint`, for the comparison points
(`graders.reference.variants`) and the optimum of a budget problem (`graders.reference.budget_facts`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any


@contextlib.contextmanager
def checkpoint_disabled() -> Iterator[None]:
    """Makes `jax.checkpoint` (and its aliases) the identity while a module is imported and traced,
    to see what the same function saves without any checkpoint."""
    # JAX only in the child that builds expectations: the server imports this package
    import jax
    import jax.ad_checkpoint

    def identity_checkpoint(fun: Callable[..., Any] | None = None, **_: Any) -> Any:
        return fun if fun is not None else (lambda f: f)

    saved = {
        (mod, name): getattr(mod, name)
        for mod in (jax, jax.ad_checkpoint)
        for name in ("checkpoint", "remat")
        if hasattr(mod, name)
    }
    try:
        for mod, name in saved:
            setattr(mod, name, identity_checkpoint)
        yield
    finally:
        for (mod, name), value in saved.items():
            setattr(mod, name, value)
