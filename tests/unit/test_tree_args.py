"""Pytree arguments (`kind = "tree"`): parsed from problem.toml's nested tables, passed to the jail,
drawn and named in JAX's flatten order."""

from __future__ import annotations

import re
import string
import tomllib
from typing import Any

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from graders.problems.hidden_inputs import case_arg_specs, hidden_inputs, leaf_names
from graders.problems.scaffold_frameworks import tree_spec_toml
from graders.problems.spec import LEAF_KEYS, MAX_TREE_DEPTH, ProblemSpec
from graders.untrusted.parse import deserialize, exported_avals
from graders.verifier.evaluate import shifted_inputs
from jailside.export import _abstract_arg, export_case

# a table with a key "shape" is an array spec, so "shape", "dtype" and "generator" are no subtree's keys
KEYS = st.text(alphabet=string.ascii_letters + string.digits + "_", min_size=1, max_size=6).filter(
    lambda k: k not in LEAF_KEYS
)
LEAF = st.builds(lambda n: {"shape": [n, "d"], "dtype": "float32"}, st.integers(1, 3))
TREES = st.recursive(
    LEAF,
    lambda children: st.one_of(
        st.lists(children, min_size=1, max_size=3), st.dictionaries(KEYS, children, min_size=1, max_size=3)
    ),
    max_leaves=12,
)


def _spec(tree: Any) -> ProblemSpec:
    return ProblemSpec.model_validate(
        {
            "slug": "tree_problem",
            "title": "Tree",
            "difficulty": "easy",
            "entry_point": "f",
            "args": [{"name": "params", "kind": "tree", "tree": tree}, {"name": "x", "shape": ["d"]}],
            "cases": [{"name": "small", "dims": {"d": 2}}],
        }
    )


@settings(max_examples=60, deadline=None)
@given(TREES.filter(lambda t: isinstance(t, (dict, list))))
def test_leaves_are_named_drawn_and_passed_in_jax_flatten_order(tree: Any) -> None:
    spec = _spec(tree)
    case = spec.cases[0]
    abstract = _abstract_arg(case_arg_specs(spec, case)[0])
    paths, leaves = zip(*jax.tree_util.tree_flatten_with_path(abstract)[0], strict=True)
    # JAX's own key paths, printed as the judge names them: params['a'][0]['b']
    expected_names = [
        "params" + "".join(f"[{k.key!r}]" if hasattr(k, "key") else f"[{k.idx}]" for k in p) for p in paths
    ]
    assert leaf_names(spec) == [*expected_names, "x"]
    drawn = hidden_inputs(spec, case, seed=b"seed", version="v", index=0)
    assert [d.shape for d in drawn[:-1]] == [leaf.shape for leaf in leaves]
    # the same tree written in another key order is the same argument
    if isinstance(tree, dict):
        assert leaf_names(_spec(dict(reversed(list(tree.items()))))) == leaf_names(spec)


@pytest.mark.parametrize(
    "tree, says",
    [
        ({"Dense_0": {}}, "params['Dense_0']: an empty table"),
        ({"layers": []}, "params['layers']: an empty array"),
        ({"w": {"dtype": "float32"}}, "'dtype' without 'shape'"),
        ({"a b": {"shape": [1]}}, "not a plain name"),
        ({"w": {"shape": ["d"], "scale": 1}}, "params['w']: not an array spec"),
        ({"w": {"shape": ["d"], "dtype": "int8"}}, "params['w']: not an array spec"),
        ({"w": 3}, "params['w']: expected a table"),
        ([], "params: an empty array"),
    ],
)
def test_a_malformed_tree_is_refused_with_its_path(tree: Any, says: str) -> None:
    with pytest.raises(Exception) as refused:
        _spec(tree)
    assert says in str(refused.value)


def test_a_tree_too_deep_or_too_wide_is_refused() -> None:
    deep: Any = {"shape": ["d"]}
    for _ in range(MAX_TREE_DEPTH + 1):
        deep = {"n": deep}
    with pytest.raises(Exception, match="at most 16 levels"):
        _spec(deep)
    with pytest.raises(Exception, match="at most 256 arrays"):
        _spec({f"w{i}": {"shape": [1]} for i in range(257)})


def test_the_api_shows_a_tree_argument_by_key_path() -> None:
    from server.api.problem_routes import _tree_public

    spec = _spec({"Dense_0": {"kernel": {"shape": ["d", 3]}, "bias": {"shape": [3]}}, "scale": [{"shape": [1]}]})
    shown = _tree_public(spec.args[0].tree, "params").model_dump(exclude_none=True)
    assert list(shown["entries"]) == ["Dense_0", "scale"]
    kernel = shown["entries"]["Dense_0"]["entries"]["kernel"]
    assert kernel == {"name": "params['Dense_0']['kernel']", "kind": "array", "shape": ["d", 3], "dtype": "float32"}
    assert shown["entries"]["scale"]["items"][0]["name"] == "params['scale'][0]"


def _key_tree(generator: dict[str, Any] | None, dtype: str = "uint32") -> dict[str, Any]:
    leaf: dict[str, Any] = {"shape": [2], "dtype": dtype}
    if generator is not None:
        leaf["generator"] = generator
    return {"key": leaf, "w": {"shape": ["d"]}}


def test_an_integer_leaf_is_drawn_as_random_bits_and_never_moved() -> None:
    spec = _spec(_key_tree({"kind": "random_bits"}))
    case = spec.cases[0]
    draws = [hidden_inputs(spec, case, seed=b"seed", version="v", index=k)[0] for k in range(64)]
    assert all(d.dtype == np.uint32 and d.shape == (2,) for d in draws)
    bits = np.concatenate(draws)
    assert len(set(bits.tolist())) == bits.size  # 128 draws of 32 bits: no repeats, not small numbers
    assert int(bits.max()) > 1 << 31
    # finite differences move float leaves only; the key's data stays what it was
    x = [draws[0], np.ones(2, np.float32)]
    moved = shifted_inputs(x, [np.zeros(2, np.uint32), np.ones(2, np.float32)], 0.5)
    assert np.array_equal(moved[0], draws[0]) and not np.array_equal(moved[1], x[1])
    assert leaf_names(spec)[:2] == ["params['key']", "params['w']"]


@pytest.mark.parametrize(
    "generator,dtype,message",
    [
        (None, "uint32", 'takes generator = { kind = "random_bits" }'),
        ({"kind": "normal"}, "int32", 'takes generator = { kind = "random_bits" }'),
        ({"kind": "random_bits"}, "float32", "is for uint32 and int32 leaves"),
    ],
)
def test_a_generator_that_does_not_fit_the_dtype_is_refused(
    generator: dict[str, Any] | None, dtype: str, message: str
) -> None:
    with pytest.raises(ValidationError, match=re.escape(message)):
        _spec(_key_tree(generator, dtype))


def test_the_backward_program_returns_no_gradient_for_an_integer_leaf() -> None:
    spec = _spec(_key_tree({"kind": "random_bits"}))

    def f(params: dict[str, Any], x: Any) -> Any:
        keep = jax.random.bernoulli(jax.random.wrap_key_data(params["key"]), 0.5, x.shape)
        return jax.numpy.where(keep, x * params["w"], 0.0)

    _, bwd, _ = export_case(f, case_arg_specs(spec, spec.cases[0]))
    gradients = exported_avals(deserialize(bwd).out_avals)
    assert [str(a) for a in gradients] == ["float32[2]", "float32[2]"]  # params['w'] and x; no float0


def test_a_typed_key_saved_as_a_residual_crosses_as_its_key_data() -> None:
    """A key made with wrap_key_data outside the checkpoint and passed in is a residual: it leaves
    fwd as uint32 data and bwd wraps it back, so the artifacts hold no key type and no sharding."""
    spec = _spec(_key_tree({"kind": "random_bits"}))

    def layer(w: Any, key: Any, x: Any) -> Any:
        keep = jax.random.bernoulli(key, 0.5, x.shape)
        return jax.numpy.where(keep, jax.numpy.tanh(x * w), 0.0)

    def f(params: dict[str, Any], x: Any) -> Any:
        return jax.checkpoint(layer)(params["w"], jax.random.wrap_key_data(params["key"]), x)

    fwd_blob, bwd_blob, n_out = export_case(f, case_arg_specs(spec, spec.cases[0]))
    fwd, bwd = deserialize(fwd_blob), deserialize(bwd_blob)
    residuals = [str(a) for a in exported_avals(fwd.out_avals)[n_out:]]
    assert "uint32[2]" in residuals and not any("key" in r for r in residuals)
    assert [str(a) for a in exported_avals(bwd.out_avals)] == ["float32[2]", "float32[2]"]
    assert "sdy." not in fwd.mlir_module() and "sdy." not in bwd.mlir_module()


def test_a_printed_tree_spec_loads_back_as_the_same_leaves() -> None:
    """`problems tree-spec`'s table: sizes by their dimension's name where one dimension has
    them, numbers where none or two do; integer leaves drawn as bits; nested dicts as headers."""
    tree = {
        "encoder": {"Dense_0": {"kernel": ((4, 6), "float32"), "bias": ((6,), "float32")}, "scale": ((7,), "float32")},
        "rng": ((2,), "uint32"),
        "odd.key": ((4, 4), "bfloat16"),
    }
    text = tree_spec_toml("params", tree, {"d": 4, "N": 3, "M": 7, "K": 7})
    assert 'kernel = { shape = ["d", 6] }' in text and "scale = { shape = [7] }" in text
    assert 'rng = { shape = [2], dtype = "uint32", generator = { kind = "random_bits" } }' in text
    args = tomllib.loads(text + '\n[[args]]\nname = "x"\nshape = ["d"]\n')["args"]
    spec = _spec(args[0]["tree"])
    assert leaf_names(spec)[:-1] == [
        "params['encoder']['Dense_0']['bias']",
        "params['encoder']['Dense_0']['kernel']",
        "params['encoder']['scale']",
        "params['odd.key']",
        "params['rng']",
    ]
    with pytest.raises(ValueError, match="only dicts of arrays"):
        tree_spec_toml("params", {"layers": [((2,), "float32")]}, {})
