"""Pytree arguments (`kind = "tree"`): parsed from problem.toml's nested tables, passed to the jail,
drawn and named in JAX's flatten order."""

from __future__ import annotations

import string
from typing import Any

import jax
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graders.problem import case_arg_specs, hidden_inputs, leaf_names
from graders.problem_spec import MAX_TREE_DEPTH, ProblemSpec
from jailside.export import _abstract_arg

KEYS = st.text(alphabet=string.ascii_letters + string.digits + "_", min_size=1, max_size=6)
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
    from server.api.problems import _tree_public

    spec = _spec({"Dense_0": {"kernel": {"shape": ["d", 3]}, "bias": {"shape": [3]}}, "scale": [{"shape": [1]}]})
    shown = _tree_public(spec.args[0].tree, "params").model_dump(exclude_none=True)
    assert list(shown["entries"]) == ["Dense_0", "scale"]
    kernel = shown["entries"]["Dense_0"]["entries"]["kernel"]
    assert kernel == {"name": "params['Dense_0']['kernel']", "kind": "array", "shape": ["d", 3], "dtype": "float32"}
    assert shown["entries"]["scale"]["items"][0]["name"] == "params['scale'][0]"
