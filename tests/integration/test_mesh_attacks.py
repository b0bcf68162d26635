"""Submissions to a mesh problem that go around the mesh the judge gives them: each gets the verdict
its exported programs earn, through the real jail and verifier, never INTERNAL_ERROR. The jail's
devices are fixed from outside before JAX starts (`jailside.protocol.SIMULATED_DEVICES_FLAG`), so
nothing a submission does to its environment changes them."""

from __future__ import annotations

import pytest

from graders.pipeline import JudgeConfig, grade
from graders.problems.problem import Problem, load_problem
from graders.verdict import Verdict
from tests.support import PROBLEMS, jail_processes

REFERENCE = (PROBLEMS / "fsdp_regather" / "reference.py").read_text()

ATTACKS = {
    # more devices than the mesh: a mesh of its own over all 8 simulated devices
    "own_mesh_over_every_device": (
        """
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

def fsdp_regather(ws, x):
    mesh = jax.make_mesh((8,), ("all",), (jax.sharding.AxisType.Auto,))
    def net(ws, x):
        for w in ws:
            x = jnp.tanh(x @ jax.lax.all_gather(w, "all", axis=0, tiled=True))
        return x
    return jax.shard_map(net, mesh=mesh, in_specs=(P("all"), P("all")), out_specs=P("all"))(ws, x)
""",
        {Verdict.RUNTIME_ERROR},
    ),
    # asks for one device at import: too late, the backend's devices are fixed; the policy is the reference's
    "xla_flags_changed_at_import": (
        'import os\nos.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=1"\n' + REFERENCE,
        {Verdict.ACCEPTED},
    ),
    # unsharded values where sharded ones are due: every input made whole on every device, so the
    # values are right but each device keeps whole residuals where the policy keeps its pieces
    "everything_replicated": (
        """
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

def fsdp_regather(ws, x):
    whole = lambda a: jax.lax.with_sharding_constraint(a, P())
    h = whole(x)
    for w in ws:
        h = jax.checkpoint(lambda h, w: jnp.tanh(h @ w))(h, whole(w))
    return jax.lax.with_sharding_constraint(h, P("fsdp"))
""",
        {Verdict.WRONG_POLICY},
    ),
}


@pytest.fixture(scope="module")
def problem() -> Problem:
    return load_problem(PROBLEMS / "fsdp_regather")


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_a_submission_that_goes_around_the_mesh_gets_its_programs_verdict(
    name: str, problem: Problem, judge_config: JudgeConfig
) -> None:
    source, expected = ATTACKS[name]
    report = grade(source, problem, judge_config)
    failed = [f"{c.name}: {c.message[:300]}" for c in report.checks if not c.passed]
    assert report.verdict in expected, (report.verdict, failed, report.stderr[-1500:])
    assert jail_processes() == []
