"""`remat-judge problems new SLUG --framework flax|nnx|equinox`: a problem package whose parameters
are a pytree and whose reference is written in a model library; and `problems tree-spec`, which
prints the `[[args]]` table of a reference's parameters so an author never types one by hand.

Each framework's package validates as it is: a residual block `x + W2 tanh(W1 x + b1) + b2` whose
reference checkpoints the whole block (so it saves the parameters and x), a plain-JAX right/ file
that saves the same values, and a wrong/ file without the checkpoint. The reference defines
`init(N, d, h)`, the parameter pytree at a case's dimensions: `problems tree-spec` evaluates its
shapes with `jax.eval_shape` (nothing is computed; `graders/problems/tree_spec.py`, in its own process)
and writes them as problem.toml's tree. No JAX here: the CLI imports this module.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from graders.problems.spec import INTEGER_DTYPES

FRAMEWORKS = ("flax", "nnx", "equinox")

_TOML_HEAD = """# {slug}: a problem whose parameters are a pytree, written with {library}. Every field is
# checked when the package loads. `remat-judge problems tree-spec {slug}` prints the [[args]] table
# of the parameters reference.py's `init` makes: paste it here after changing the model.
slug = "{slug}"
title = "TODO: a short title"
difficulty = "medium"           # easy | medium | hard
order = 100                     # place in the course list (lowest first)
tags = ["jax.checkpoint", "pytree", "{library}"]
entry_point = "{slug}"          # the function a submission must define

# The parameters, leaves in JAX's flatten order (keys sorted), named by their path in verdicts
# (params['{first}']['bias']). A table with a shape is an array; any other table is a dict.
"""

_TOML_TAIL = """
[[args]]
name = "x"
shape = ["N", "d"]
dtype = "float32"
generator = { kind = "normal", scale = 1.0 }

# Several shapes, all dimensions distinct in one of them (so `tree-spec` can name each size), and
# one large enough that a wrong policy costs megabytes.
[[cases]]
name = "small"
dims = { N = 3, d = 4, h = 6 }

[[cases]]
name = "rectangular"
dims = { N = 16, d = 24, h = 40 }

[[cases]]
name = "large"
dims = { N = 512, d = 256, h = 512 }

[tolerance.float32]
rtol = 1e-4
atol = 1e-5

[memory]
rule = "exact"

[scoring]
value = 0.34
gradient = 0.33
policy = 0.33

[verify]
inputs_per_case = 3
"""

# Per framework: the parameter tree of `init(N, d, h)` as (shape, dtype) leaves in dimension
# names (the scaffold writes it with `tree_spec_toml`), then the files. `{slug}` is replaced.
_BLOCK_DOC = "x + W2 tanh(W1 x + b1) + b2 over the rows of x: float32[N, d] -> float32[N, d], hidden width h"

_TEMPLATES: dict[str, dict[str, Any]] = {
    "flax": {
        "library": "flax.linen",
        "tree": {
            "Dense_0": {"kernel": (("d", "h"), "float32"), "bias": (("h",), "float32")},
            "Dense_1": {"kernel": (("h", "d"), "float32"), "bias": (("d",), "float32")},
        },
        "model": """import flax.linen as nn
import jax
import jax.numpy as jnp


class Block(nn.Module):
    \"\"\"{doc}.\"\"\"

    hidden: int

    @nn.compact
    def __call__(self, x):
        h = jnp.tanh(nn.Dense(self.hidden)(x))  # Dense_0: made first, named first
        return x + nn.Dense(x.shape[-1])(h)


def init(N, d, h):
    \"\"\"The parameter pytree at a case's dimensions (`remat-judge problems tree-spec` reads it).\"\"\"
    return Block(h).init(jax.random.key(0), jnp.zeros((N, d)))["params"]
""",
        "reference": """

def {slug}(params, x):
    block = nn.remat(Block)(params["Dense_0"]["bias"].shape[0])
    return block.apply({{"params": params}}, x)
""",
        "wrong": """

def {slug}(params, x):
    return Block(params["Dense_0"]["bias"].shape[0]).apply({{"params": params}}, x)
""",
        "plain": """import jax
import jax.numpy as jnp


@jax.checkpoint
def _block(p, x):
    h = jnp.tanh(x @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"])
    return x + h @ p["Dense_1"]["kernel"] + p["Dense_1"]["bias"]


def {slug}(params, x):
    return _block(params, x)
""",
    },
    "nnx": {
        "library": "flax.nnx",
        "tree": {
            "linear1": {"kernel": (("d", "h"), "float32"), "bias": (("h",), "float32")},
            "linear2": {"kernel": (("h", "d"), "float32"), "bias": (("d",), "float32")},
        },
        "model": """import jax
import jax.numpy as jnp
from flax import nnx


class Block(nnx.Module):
    \"\"\"{doc}.\"\"\"

    def __init__(self, d, h, rngs):
        self.linear1 = nnx.Linear(d, h, rngs=rngs)
        self.linear2 = nnx.Linear(h, d, rngs=rngs)

    def __call__(self, x):
        return x + self.linear2(jnp.tanh(self.linear1(x)))


def init(N, d, h):
    \"\"\"The parameter pytree at a case's dimensions (`remat-judge problems tree-spec` reads it).\"\"\"
    return nnx.to_pure_dict(nnx.state(Block(d, h, nnx.Rngs(0)), nnx.Param))


def build(params):
    \"\"\"The Block holding `params` (an abstract module filled with the given arrays).\"\"\"
    d, h = params["linear1"]["kernel"].shape
    graphdef, state = nnx.split(nnx.eval_shape(lambda: Block(d, h, nnx.Rngs(0))))
    nnx.replace_by_pure_dict(state, params)
    return nnx.merge(graphdef, state)
""",
        "reference": """

def {slug}(params, x):
    return nnx.remat(lambda block, x: block(x))(build(params), x)
""",
        "wrong": """

def {slug}(params, x):
    return build(params)(x)
""",
        "plain": """import jax
import jax.numpy as jnp


@jax.checkpoint
def _block(p, x):
    h = jnp.tanh(x @ p["linear1"]["kernel"] + p["linear1"]["bias"])
    return x + h @ p["linear2"]["kernel"] + p["linear2"]["bias"]


def {slug}(params, x):
    return _block(params, x)
""",
    },
    "equinox": {
        "library": "equinox",
        "tree": {
            "linear1": {"weight": (("h", "d"), "float32"), "bias": (("h",), "float32")},
            "linear2": {"weight": (("d", "h"), "float32"), "bias": (("d",), "float32")},
        },
        "model": """import equinox as eqx
import jax
import jax.numpy as jnp


class Block(eqx.Module):
    \"\"\"{doc} (one row at a time: vmap it over N).\"\"\"

    linear1: eqx.nn.Linear
    linear2: eqx.nn.Linear

    def __init__(self, d, h, key):
        k1, k2 = jax.random.split(key)
        self.linear1 = eqx.nn.Linear(d, h, key=k1)
        self.linear2 = eqx.nn.Linear(h, d, key=k2)

    def __call__(self, x):
        return x + self.linear2(jnp.tanh(self.linear1(x)))


def _leaves(block):
    return block.linear1.weight, block.linear1.bias, block.linear2.weight, block.linear2.bias


def init(N, d, h):
    \"\"\"The parameter pytree at a case's dimensions (`remat-judge problems tree-spec` reads it).\"\"\"
    w1, b1, w2, b2 = _leaves(Block(d, h, jax.random.key(0)))
    return {"linear1": {"weight": w1, "bias": b1}, "linear2": {"weight": w2, "bias": b2}}


def build(params):
    \"\"\"The Block holding `params` (an abstract module with the given arrays put in).\"\"\"
    h, d = params["linear1"]["weight"].shape
    skeleton = eqx.filter_eval_shape(Block, d, h, jax.random.key(0))
    p1, p2 = params["linear1"], params["linear2"]
    return eqx.tree_at(_leaves, skeleton, (p1["weight"], p1["bias"], p2["weight"], p2["bias"]))
""",
        "reference": """

def {slug}(params, x):
    return eqx.filter_checkpoint(lambda block, x: jax.vmap(block)(x))(build(params), x)
""",
        "wrong": """

def {slug}(params, x):
    return jax.vmap(build(params))(x)
""",
        "plain": """import jax
import jax.numpy as jnp


@jax.checkpoint
def _block(p, x):
    h = jnp.tanh(x @ p["linear1"]["weight"].T + p["linear1"]["bias"])
    return x + h @ p["linear2"]["weight"].T + p["linear2"]["bias"]


def {slug}(params, x):
    return _block(params, x)
""",
    },
}


def framework_files(framework: str, slug: str) -> dict[str, str]:
    """The files of a `problems new --framework` package, by path inside the package.

    Raises:
        KeyError: `framework` is not one of FRAMEWORKS.
    """
    t = _TEMPLATES[framework]
    model = t["model"].replace("{doc}", _BLOCK_DOC)
    first = next(iter(t["tree"]))
    toml_head = _TOML_HEAD.format(slug=slug, library=t["library"], first=first)
    toml_tree = tree_spec_toml("params", t["tree"], {})
    return {
        "problem.toml": toml_head + toml_tree + _TOML_TAIL,
        "reference.py": '"""Reference solution of '
        + slug
        + '. Never served, never mounted into a jail."""\n\n'
        + model
        + t["reference"].format(slug=slug),
        "starter.py": model
        + f"""

def {slug}(params, x):
    \"\"\"params: the pytree `init` makes (see problem statement); x: float32[N, d].

    Returns Block applied to x, float32[N, d]. TODO: say what must be saved for the backward pass.
    \"\"\"
    raise NotImplementedError
""",
        "right/plain_jax_checkpoint.py": "# expect: ACCEPTED\n# The same block in plain JAX under one "
        "jax.checkpoint: the judge judges what is saved, not the library.\n" + t["plain"].format(slug=slug),
        "wrong/no_checkpoint.py": "# expect: WRONG_POLICY\n# The block without a checkpoint keeps "
        "its hidden activations.\n" + model + t["wrong"].format(slug=slug),
    }


def framework_statement(framework: str, slug: str) -> tuple[str, str]:
    """The statement's task paragraph of a `problems new --framework` package and the bullets its
    measuring section adds for a parameter pytree (how leaves are named, that the library is not
    judged), each bullet ending in a newline.

    Raises:
        KeyError: `framework` is not one of FRAMEWORKS.
    """
    t = _TEMPLATES[framework]
    first = next(iter(t["tree"]))
    leaves = sorted(t["tree"][first])
    task = (
        f"Define `{slug}(params, x)` where `params` is the pytree `init` makes and `x` is a `float32` "
        f"array of shape `(N, d)`: it returns `Block` ({t['library']}) applied to `x`, of shape `(N, d)`. "
        "TODO: what it must save."
    )
    bullets = (
        f"- **Named by their path.** Parameters are named the way JAX flattens them, keys in sorted order: "
        f"`params['{first}']['{leaves[0]}']`, `params['{first}']['{leaves[1]}']`, … A gradient that is "
        "wrong names its leaf.\n"
        f"- **Not the library.** Only the exported programs are judged: {t['library']} or plain "
        "`jax.checkpoint` on a function of the parameter dicts are both fine if the same values are saved.\n"
    )
    return _wrapped(task, ""), "".join(_wrapped(b, "  ") + "\n" for b in bullets.splitlines())


def _wrapped(text: str, indent: str) -> str:
    """`text` filled to 100 columns, later lines indented by `indent`, code spans never broken."""
    words = re.sub(r"`[^`]*`", lambda m: m.group(0).replace(" ", "\0"), text).split(" ")
    lines = [words[0]]
    for word in words[1:]:
        if len(lines[-1]) + 1 + len(word) > 100:
            lines.append(indent + word)
        else:
            lines[-1] += " " + word
    return "\n".join(lines).replace("\0", " ")


def _tree_lines(tree: Mapping[str, Any], path: str, dims: Mapping[str, int], out: list[str]) -> None:
    """Appends the TOML of one dict node (leaves first, as inline tables; then each sub-dict under
    its own `[path.key]` header), depth first with an explicit stack."""
    stack: list[tuple[str, Mapping[str, Any]]] = [(path, tree)]
    while stack:
        here, node = stack.pop()
        leaves = [(k, v) for k, v in sorted(node.items()) if isinstance(v, tuple)]
        subtrees = [(k, v) for k, v in sorted(node.items()) if not isinstance(v, tuple)]
        if leaves or not subtrees:
            out.append(f"\n[{here}]")
            out.extend(f"{_key(k)} = {_leaf(shape, dtype, dims)}" for k, (shape, dtype) in leaves)
        stack.extend((f"{here}.{_key(k)}", v) for k, v in reversed(subtrees))


def _key(key: str) -> str:
    """A TOML key: bare when it can be, else quoted."""
    return key if key.replace("_", "").replace("-", "").isalnum() and key.isascii() else f'"{key}"'


def _leaf(shape: tuple[int | str, ...], dtype: str, dims: Mapping[str, int]) -> str:
    """`{ shape = ["d", "h"] }`: each size by the dimension name that has it, when exactly one does
    (a size given as a name already stays that name)."""
    names = []
    for size in shape:
        matching = [size] if isinstance(size, str) else [name for name, value in dims.items() if value == size]
        names.append(f'"{matching[0]}"' if len(matching) == 1 else str(size))
    parts = [f"shape = [{', '.join(names)}]"]
    if dtype != "float32":
        parts.append(f'dtype = "{dtype}"')
    if dtype in INTEGER_DTYPES:
        parts.append('generator = { kind = "random_bits" }')
    return "{ " + ", ".join(parts) + " }"


def tree_spec_toml(name: str, tree: Any, dims: Mapping[str, int]) -> str:
    """The `[[args]]` table of a pytree argument, as problem.toml takes it.

    Args:
        name: the argument's name.
        tree: nested dicts whose leaves are (shape, dtype name) tuples, e.g. from
            `jax.tree_util.tree_map(lambda a: (a.shape, str(a.dtype)), jax.eval_shape(init))`.
        dims: the case's dimensions: a size that exactly one dimension has is written by its name,
            any other as a number (choose a case whose dimensions are all distinct).

    Raises:
        ValueError: `tree` is not a non-empty dict of dicts and leaves (lists are written by hand).
    """
    if not isinstance(tree, Mapping) or not tree:
        raise ValueError("the parameters must be a non-empty dict (of dicts and arrays)")
    stack: list[Any] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            stack.extend(node.values())
        elif not (isinstance(node, tuple) and len(node) == 2):
            raise ValueError(f"only dicts of arrays can be written as a tree spec, found {type(node).__name__}")
    out = [f'[[args]]\nname = "{name}"\nkind = "tree"']
    _tree_lines(tree, "args.tree", dims, out)
    return "\n".join(out) + "\n"
