"""`remat-judge problems new SLUG --budget`: an open problem's package (docs/ARCHITECTURE.md,
"Budget problems"): three tanh layers whose first matmul is wide, budgets per case between two rows
of the frontier (`remat-judge problems frontier SLUG` prints it), a reference within them, a
`right/` file that reaches the optimum and one that fits below it (each with its `# score:`), and
`wrong/` files over the budget. It validates as it is; the TODOs are the author's to write."""

from __future__ import annotations

PROBLEM_TOML = """# {slug}: an open problem. Any program with the right values and gradients whose residuals fit
# each case's budget is ACCEPTED; the policy part of the score is how close its recomputation comes to
# the least any policy within the budget needs, which the judge computes (an integer program).
slug = "{slug}"                 # must equal the folder name
title = "TODO: a short title"
difficulty = "medium"           # easy | medium | hard
order = 400                     # place in the course list (lowest first)
tags = ["jax.checkpoint", "budget", "open problem"]
entry_point = "{slug}"

# ws = [W1, W2, W3], used as h @ W: d -> D -> d -> d, the first product wide
[[args]]
name = "ws"
kind = "list"
items = [
  {{ shape = ["d", "D"], dtype = "float32", generator = {{ kind = "normal", scale = 0.1 }} }},
  {{ shape = ["D", "d"], dtype = "float32", generator = {{ kind = "normal", scale = 0.1 }} }},
  {{ shape = ["d", "d"], dtype = "float32", generator = {{ kind = "normal", scale = 0.2 }} }},
]

[[args]]
name = "x"
shape = ["B", "d"]
dtype = "float32"
generator = {{ kind = "normal", scale = 1.0 }}

[[cases]]
name = "small"
dims = {{ B = 4, d = 6, D = 20 }}

[[cases]]
name = "large"
dims = {{ B = 64, d = 64, D = 512 }}

[tolerance.float32]
rtol = 1e-4
atol = 1e-5

# Bytes of residuals each case's policy may keep (offloaded ones too). The arguments the backward pass
# reads always count (294,912 bytes in "large"); `remat-judge problems frontier {slug}` prints
# every budget where more bytes buy less recomputation: put each budget between two rows.
[memory]
rule = "budget"
budgets = {{ small = 1300, large = 320000 }}
"""

REFERENCE = """import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def _layers(ws, x):
    h = x
    for i, w in enumerate(ws):
        h = jnp.tanh(checkpoint_name(h @ w, f"z{{i}}"))
    return h


def {slug}(ws, x):
    \"\"\"ws: three float32 weights, x: float32[B, d]. Keeps the narrow product z1 besides the
    arguments: within the budget, the least recomputation.\"\"\"
    policy = jax.checkpoint_policies.save_only_these_names("z1")
    return jax.checkpoint(_layers, policy=policy)(ws, x)


def _every_layer(ws, x):
    h = x
    for w in ws:
        h = jax.checkpoint(lambda w, h: jnp.tanh(h @ w))(w, h)
    return h


# schedules the judge measures like a submission and draws beside the optimum (the uniform recipes
# students reach for); on a budget of the peak (budget_of = "peak") the best of these within the
# budget is the optimum
SCHEDULES = {{
    "every layer": _every_layer,
    "everything recomputed": lambda ws, x: jax.checkpoint(_layers)(ws, x),
}}
"""

STARTER = """import jax
import jax.numpy as jnp


def {slug}(ws, x):
    \"\"\"Three tanh layers, h <- tanh(h @ W) for each W in ws, returning the last h; keep the
    residuals of every case within its budget.\"\"\"
    raise NotImplementedError
"""

RIGHT_OPTIMAL = """# expect: ACCEPTED
# score: 1.0
# the optimum: the narrow product z1 kept, with a decorator
from functools import partial

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


@partial(jax.checkpoint, policy=jax.checkpoint_policies.save_only_these_names("narrow"))
def {slug}(ws, x):
    h = jnp.tanh(x @ ws[0])
    h = jnp.tanh(checkpoint_name(h @ ws[1], "narrow"))
    return jnp.tanh(h @ ws[2])
"""

RIGHT_BELOW = """# expect: ACCEPTED
# score: below 1
# one plain checkpoint: only the arguments kept, the whole forward pass recomputed
import jax
import jax.numpy as jnp


def {slug}(ws, x):
    def layers(ws, x):
        h = x
        for w in ws:
            h = jnp.tanh(h @ w)
        return h

    return jax.checkpoint(layers)(ws, x)
"""

WRONG_OVER = """# expect: WRONG_POLICY
# keeps the wide product z0: over the budget
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def {slug}(ws, x):
    def layers(ws, x):
        h = x
        for i, w in enumerate(ws):
            h = jnp.tanh(checkpoint_name(h @ w, f"z{{i}}"))
        return h

    return jax.checkpoint(layers, policy=jax.checkpoint_policies.save_only_these_names("z0"))(ws, x)
"""

WRONG_PLAIN = """# expect: WRONG_POLICY
# no checkpoint: every layer's output kept, over the budget
import jax.numpy as jnp


def {slug}(ws, x):
    h = x
    for w in ws:
        h = jnp.tanh(h @ w)
    return h
"""

STATEMENT = """# TODO: title

## An open problem

TODO: why this budget is the question practitioners face. Any program with the right values and
gradients whose residuals fit the budget is ACCEPTED; how close its recomputation comes to the best
any policy can do within the budget is part of the score.

## The task

Define `{slug}(ws, x)`, all arrays `float32`: three layers $h \\leftarrow \\tanh(h W)$ over
`ws = [W1, W2, W3]` ($(d, D)$, $(D, d)$, $(d, d)$), returning the last $h$, $(B, d)$. TODO: the
budgets per case and what they leave room for besides the arguments.

## How this judge measures it

- **The budget.** The judge exports your function's forward and backward programs and adds up the
  bytes of the residuals the forward program hands to the backward pass, wherever they are kept (the
  list `jax.ad_checkpoint.print_saved_residuals` prints; offloaded ones count too: this judge prices
  recomputation, not transfers). Over the budget in any case is WRONG_POLICY, with by how much.
  Values are not compared one to one: any residuals that fit are fine.
- **The score.** Values and gradients are compared with the reference's on hidden inputs. The
  policy part is $(F + R^*) / (F + R)$, capped at 1: $F$ the forward pass's FLOPs, $R$ what your
  backward pass recomputes, $R^*$ the least any policy within the budget recomputes, on the case
  whose backward pass costs the most.
- **The optimum.** The judge reads the forward program with every checkpoint removed and solves for
  the values to keep, within the budget, that leave the least to recompute (an integer program).
- **Bookkeeping is left out.** A residual is bookkeeping, not part of a policy, only when it carries
  nothing about the inputs, as the judge reads it from your program (never from a dtype or a size):
  an integer or boolean value of at most 256 elements that no floating-point input's data flows into
  (a `fori_loop` or `scan` loop counter, an index built from `iota`, a PRNG key split from a key
  argument), or the branch index of a `lax.cond` or `lax.switch` on data that the backward pass uses
  only to pick a branch. Such residuals are left out of the budget on both sides, yours and the
  reference's, and the panel lists each as "left out" with the reason. Anything computed from the
  data, whatever its dtype (a relu's `bool` mask, an `argmax`, a value bitcast or quantized to
  integers), is a residual like any other.
- **Recomputation.** The recompute figure counts forward work done again: the FLOPs of the forward
  program's operations that your backward pass runs again from what was saved (a product $h W$
  computed again), not the derivative's own arithmetic.
"""

HINTS = """# Hints

## Hint 1

TODO
"""


def budget_files(slug: str) -> dict[str, str]:
    """Every file of a budget problem's package, by path relative to its folder."""
    templates = {
        "problem.toml": PROBLEM_TOML,
        "reference.py": REFERENCE,
        "starter.py": STARTER,
        "right/optimal_decorator.py": RIGHT_OPTIMAL,
        "right/checkpoint_everything.py": RIGHT_BELOW,
        "wrong/saves_the_wide_product.py": WRONG_OVER,
        "wrong/no_checkpoint.py": WRONG_PLAIN,
        "statement.md": STATEMENT,
        "hints.md": HINTS,
    }
    return {name: text.format(slug=slug) for name, text in templates.items()}
