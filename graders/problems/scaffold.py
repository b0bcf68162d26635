"""`remat-judge problems new SLUG`: a new problem package with every file, commented."""

from __future__ import annotations

from pathlib import Path

from graders.problems.scaffold_budget import budget_files
from graders.problems.scaffold_frameworks import framework_files, framework_statement
from graders.problems.scaffold_mesh import MESH_BULLET, with_mesh

PROBLEM_TOML = """# {slug}: one problem package. Every field is checked when the package loads; a bad one is an
# error naming this file and the field.
slug = "{slug}"                 # must equal the folder name: lowercase letters, digits, underscores
title = "TODO: a short title"
difficulty = "easy"             # easy | medium | hard
order = 100                     # place in the course list (lowest first; the bank uses 10 to 130)
tags = ["jax.checkpoint"]       # shown in problem lists
entry_point = "{slug}"          # the function a submission must define

# Positional arguments of the entry point, in order. Each is one of:
#   an array:    shape (ints, or dimension names bound by each case's `dims`), dtype, generator
#   a list:      kind = "list", items = [{{ shape = [...], dtype = "float32" }}, ...]
#   a pytree:    kind = "tree", then [args.tree.Dense_0] with kernel = {{ shape = [...] }} and so on:
#                a table with a shape is an array, any other table a dict, an array of tables a
#                list; leaves are passed and named in JAX's flatten order (params['Dense_0']['bias'])
#   a static:    kind = "static" (a Python bool/int/float/str given per case in `static`)
# Generators draw the hidden inputs: {{ kind = "normal", mean = 0.0, scale = 1.0 }} or
# {{ kind = "uniform", low = -1.0, high = 1.0 }}.
[[args]]
name = "x"
shape = ["N"]
dtype = "float32"
generator = {{ kind = "normal", scale = 1.0 }}

# Test cases: give several shapes, including one large enough that a wrong policy costs real
# memory: `problems validate` warns when in no case the reference's residuals differ from the same
# function without any checkpoint by at least 1 MiB. Names must be unique.
[[cases]]
name = "small"
dims = {{ N = 8 }}

[[cases]]
name = "large"
dims = {{ N = 1048576 }}

# Per dtype: |submitted - expected| <= atol * max(1, max|expected|) + rtol * |expected|
[tolerance.float32]
rtol = 1e-4
atol = 1e-5

# The memory rule. "exact": the residual avals (shape and dtype, as a multiset) must equal the
# reference's, and with match = "values" each saved residual must equal one of the reference's as a
# value on every hidden input ("avals": shapes and dtypes only, for a statement that accepts any
# value of the right shape). "at_most": residual bytes AND backward-pass peak live bytes must each
# be at most the reference's plus slack_bytes. Expected residuals are always read from
# reference.py, never typed.
[memory]
rule = "exact"
match = "values"
slack_bytes = 0
recompute_slack = 0.25         # exact only: backward FLOPs at most 1.25x the reference's
                               # (+2 passes over its largest value), on the costliest case;
                               # statement.md's Recomputation bullet says 25%: change both
compare_kinds = true           # exact only: false accepts a residual on the device or offloaded

# Score weights (sum to 1): value right; + gradients right; + residuals right.
[scoring]
value = 0.34
gradient = 0.33
policy = 0.33

# Optional per-problem jail limits (units in the names).
[limits]
# wall_time_limit_s = 10
# cpu_time_limit_s = 10
# memory_limit_mib = 1536

[verify]
inputs_per_case = 3            # hidden inputs (each with a random cotangent) per case
allowed_custom_calls = []      # custom_call targets permitted (none unless the problem needs one)
"""

STATEMENT = """# TODO: title

## Why it matters

TODO: what the technique is for, in terms of residuals (what autodiff saves for the backward pass)
and rematerialization (what it recomputes instead).

## A worked example

TODO: a small example that is not the task, with the real `print_saved_residuals` output.

## Common pitfalls

- TODO

## The task

{task}

## How this judge measures it

- **What is read.** At each test shape the judge exports your function's forward and backward
  programs and reads the residuals from the exported forward program: the arrays it hands to the
  backward pass, the list `jax.ad_checkpoint.print_saved_residuals` prints. Names and source
  locations do not survive export; shapes, dtypes and values do.
- **Compared one to one.** Your residuals must pair up one to one with those of the required
  policy (the reference solution): the same values on the hidden inputs (up to float32 rounding),
  in any order. Saving a different array of the right shape fails (WRONG_POLICY). TODO: name the
  values the reference saves, and a plausible wrong policy that saves other values.
- **Bookkeeping is left out.** A residual is bookkeeping, not part of a policy, only when it carries
  nothing about the inputs, as the judge reads it from your program (never from a dtype or a size):
  an integer or boolean value of at most 256 elements that no floating-point input's data flows into
  (a `fori_loop` or `scan` loop counter, an index built from `iota`, a PRNG key split from a key
  argument), or the branch index of a `lax.cond` or `lax.switch` on data that the backward pass uses
  only to pick a branch. Such residuals are left out of the comparison on both sides, yours and the
  policy's, and the panel lists each as "left out" with the reason. Anything computed from the data,
  whatever its dtype (a relu's `bool` mask, an `argmax`, a value bitcast or quantized to integers),
  is a residual like any other.
- **Layout does not matter.** A saved value that holds the same numbers as one of the policy's in
  another layout, with its axes permuted (a weight kept transposed, say) or split or merged by a
  reshape, counts as the same residual; its bytes are still compared. Any other reordering of its
  elements (reversed, rolled, shuffled) makes it a different value.
{bullets}- **Recomputation.** The recompute figure counts forward work done again: the FLOPs of the forward
  program's operations that your backward pass runs again from what was saved (a matmul such as
  `x @ w1` recomputed, say), not the derivative's own arithmetic (how the transpose of a slice, a
  blocked sum or an indexed weight accumulates its gradient does not count). It is judged on the
  case whose reference backward pass costs the most and on any case past 1,000,000 FLOPs, where
  yours may exceed the required policy's by at most 25%; the other cases are reported with the
  result.
- **Values and gradients** are compared with a float64 evaluation of the reference.
"""

TASK = """Define `{slug}(x)` where `x` is a `float32` array of shape `(N,)`. TODO: what it returns and what
it must save."""

STARTER = '''import jax
import jax.numpy as jnp


def {slug}(x):
    """x: float32[N]. TODO: describe the return value and the residuals to save."""
    raise NotImplementedError
'''

REFERENCE = '''"""Reference solution of {slug}. Never served, never mounted into a jail."""

import jax
import jax.numpy as jnp


def {slug}(x):
    return jnp.sum(jax.checkpoint(lambda v: jnp.sin(jnp.sin(v)))(x))
'''

WRONG = """# expect: WRONG_POLICY
# Every file in wrong/ starts with "# expect: VERDICT"; `remat-judge problems validate` checks it.
# The same function without jax.checkpoint saves two cosines instead of x.
import jax.numpy as jnp


def {slug}(x):
    return jnp.sum(jnp.sin(jnp.sin(x)))
"""

RIGHT = """# expect: ACCEPTED
# Every file in right/ is a correct solution in another style than reference.py; each must be
# ACCEPTED. This one uses the decorator form and jax.remat, the alias of jax.checkpoint.
import jax
import jax.numpy as jnp


@jax.remat
def _twice_sin(v):
    return jnp.sin(jnp.sin(v))


def {slug}(x):
    return jnp.sum(_twice_sin(x))
"""

HINTS = """# Hints

## Hint 1

TODO
"""


def scaffold(
    root: Path, slug: str, framework: str | None = None, mesh: dict[str, int] | None = None, *, budget: bool = False
) -> Path:
    """Creates `root/slug/` with problem.toml, statement.md, starter.py, reference.py, hints.md,
    a right/ file and wrong/no_checkpoint.py. The statement's "How this judge measures it" is
    written: what is compared, the bookkeeping left out, that layout does not matter and what the
    recompute figure counts (with a framework, also how leaves are named). The scaffold validates
    as it is: without a framework its reference checkpoints sin(sin(x)); with one
    (`graders.problems.scaffold_frameworks.FRAMEWORKS`) it checkpoints a residual block over a
    parameter pytree, written in that library. With `mesh` (axis name -> size, plain scaffold only)
    the problem runs on that mesh, `x` split over its first axis (`graders.problems.scaffold_mesh`).
    With `budget` (plain scaffold only), an open problem (`graders.problems.scaffold_budget`).

    Raises:
        FileExistsError: the folder exists.
        KeyError: an unknown framework (the CLI offers only FRAMEWORKS).
    """
    bullets = ""
    if budget:
        texts = budget_files(slug)
    elif framework is None:
        task = TASK.format(slug=slug)
        files = {
            "problem.toml": PROBLEM_TOML,
            "starter.py": STARTER,
            "reference.py": REFERENCE,
            "right/decorator_remat.py": RIGHT,
            "wrong/no_checkpoint.py": WRONG,
        }
        texts = {name: template.format(slug=slug) for name, template in files.items()}
        if mesh is not None:
            texts["problem.toml"] = with_mesh(texts["problem.toml"], mesh)
            bullets = MESH_BULLET
    else:
        texts = framework_files(framework, slug)
        task, bullets = framework_statement(framework, slug)
    if not budget:
        texts["statement.md"] = STATEMENT.format(task=task, bullets=bullets)
        texts["hints.md"] = HINTS
    target = root / slug
    target.mkdir(parents=True, exist_ok=False)
    (target / "wrong").mkdir()
    (target / "right").mkdir()
    for name, text in texts.items():
        (target / name).write_text(text, encoding="utf-8")
    return target
