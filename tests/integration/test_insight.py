"""Policy fingerprints and program digests of real gradings (bubblewrap jail, verifier): the
same mistake written three ways has one fingerprint, different mistakes among the bank's
`wrong/` files have different ones, a correct solution's is the reference's; a renamed copy has
the same program digest and an independent solution of the same policy, written differently,
another.

What the program digest can and cannot see: it hashes the exported StableHLO with debug
locations, private function names and argument names removed. Renaming variables and helpers,
reformatting, comments, a decorator instead of a call are invisible to it. Inlining a helper
by hand, `jnp.where` for `relu`, `einsum` for `@`, or names for a policy change it, even when the
policy is the same: the bank's four correct solutions have four program digests."""

from __future__ import annotations

import json

import pytest

from graders.insight import fingerprint
from graders.pipeline import JudgeConfig, grade
from graders.problems.problem import Problem
from graders.verdict import VerdictReport
from tests.support import PROBLEMS

pytestmark = pytest.mark.jail
DOT = PROBLEMS / "checkpoint_dot_policy"

NO_POLICY_RENAMED = """import jax
import jax.numpy as jnp


def checkpoint_dot_policy(first_weights, second_weights, batch):
    def forward(a, b, c):
        return jnp.sum((jax.nn.relu(c @ a) @ b) ** 2)

    return jax.checkpoint(forward)(first_weights, second_weights, batch)
"""

NO_POLICY_DECORATED = """import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    @jax.checkpoint
    def pipeline(w1, w2, x):
        hidden = jax.nn.relu(x @ w1)
        out = hidden @ w2
        return jnp.sum(out ** 2)

    return pipeline(w1, w2, x)
"""


RENAMED_COPY = '''"""My own solution (a copy of the reference with other names)."""
import jax
import jax.numpy as jnp


def checkpoint_dot_policy(a, b, inputs):
    def my_net(a, b, inputs):
        hidden = jax.nn.relu(inputs @ a)
        return jnp.sum((hidden @ b) ** 2)

    keep = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(my_net, policy=keep)(a, b, inputs)
'''


def stored(report: VerdictReport) -> dict:
    return json.loads(report.stored_json())


@pytest.fixture(scope="module")
def graded(judge_config: JudgeConfig, dot_problem: Problem) -> dict[str, VerdictReport]:
    sources = {
        "reference": (DOT / "reference.py").read_text(),
        "no policy": (DOT / "wrong" / "checkpoint_without_policy.py").read_text(),
        "no policy, renamed": NO_POLICY_RENAMED,
        "no policy, decorator": NO_POLICY_DECORATED,
    }
    for folder in ("right", "wrong"):
        for path in sorted((DOT / folder).glob("*.py")):
            text = path.read_text()
            if (
                any(bomb in text for bomb in ("TIME_LIMIT", "MEMORY_LIMIT", "OUTPUT_LIMIT"))
                or path.name == "forged_bundle.py"
            ):
                continue
            sources[f"{folder}/{path.stem}"] = text
    sources["reference, renamed copy"] = RENAMED_COPY
    return {name: grade(source, dot_problem, judge_config) for name, source in sources.items()}


def test_one_mistake_written_three_ways_has_one_fingerprint(graded: dict[str, VerdictReport]) -> None:
    three = [fingerprint(stored(graded[n])) for n in ("no policy", "no policy, renamed", "no policy, decorator")]
    assert all(f is not None for f in three)
    assert len({f.key for f in three if f}) == 1, [f.parts for f in three if f]
    assert three[0] is not None and three[0].parts["verdict"] == "WRONG_POLICY"
    assert "does not save" in three[0].summary


def test_a_correct_solution_has_the_references_fingerprint(graded: dict[str, VerdictReport]) -> None:
    accepted = {n: fingerprint(stored(r)) for n, r in graded.items() if r.verdict and r.verdict.value == "ACCEPTED"}
    assert {"reference", "right/named_matmuls", "right/decorator_einsum", "right/remat_alias_tensordot"} <= set(
        accepted
    )
    assert len({f.key for f in accepted.values() if f}) == 1
    assert next(iter(accepted.values())).summary == "saves what the reference saves"  # type: ignore[union-attr]


def test_different_mistakes_have_different_fingerprints(graded: dict[str, VerdictReport]) -> None:
    wrong = {n: fingerprint(stored(r)) for n, r in graded.items() if n.startswith("wrong/")}
    assert all(f is not None for f in wrong.values())
    key = {n: f.key for n, f in wrong.items() if f}
    # everything_saveable saves what no checkpoint at all saves: one mistake, one fingerprint
    assert key["wrong/everything_saveable"] == key["wrong/no_checkpoint"]
    policies = [
        "wrong/checkpoint_without_policy",
        "wrong/names_post_activation",
        "wrong/no_checkpoint",
        "wrong/stop_gradient_weight",
        "wrong/wrong_math",
        "wrong/custom_vjp_saves_gradients",
    ]
    assert len({key[n] for n in policies}) == len(policies), {n: wrong[n].parts for n in policies}  # type: ignore[union-attr]
    post = wrong["wrong/names_post_activation"]
    assert post is not None and "where the reference saves" in post.summary and "`maximum`" in post.summary
    early = wrong["wrong/syntax_error"]
    assert early is not None and early.parts == {"verdict": "COMPILE_ERROR", "failed": early.parts["failed"]}


def test_program_digests_see_through_names_only(graded: dict[str, VerdictReport]) -> None:
    digest = {n: r.program_digest for n, r in graded.items()}
    assert digest["reference"] and len(digest["reference"]) == 64
    assert digest["reference, renamed copy"] == digest["reference"]  # a renamed copy
    assert digest["no policy, renamed"] == digest["no policy"]  # other argument and function names
    assert digest["right/named_matmuls"] != digest["reference"]  # the same policy, written differently
    assert digest["no policy, decorator"] == digest["no policy"]  # a decorator and split lines: the same ops
    assert (
        len(
            {
                digest[n]
                for n in ("reference", "right/named_matmuls", "right/decorator_einsum", "right/remat_alias_tensordot")
            }
        )
        == 4
    )  # four ways to write one policy
    assert "program_digest" not in graded["reference"].model_dump_json()  # never shown to students
