"""Shared fixtures for the unit tests: the real example problem and a request builder for the runner.

Everything here runs in-process on the trusted side (no bubblewrap jail): `jailside.runner.run_request`
and `export_case` are plain functions.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from graders.problems.hidden_inputs import case_arg_specs
from graders.problems.problem import Problem
from jailside.runner import run_request
from sandbox.bundle import Bundle, parse_bundle

BUNDLE_LIMIT_BYTES = 64 * 1024 * 1024


@pytest.fixture(scope="session", autouse=True)
def cheap_password_hashes() -> None:
    """argon2id at its smallest cost for the fast layer: a sign-in costs about 1 ms instead of
    0.3 s. The real servers of the other layers keep pwdlib's recommended parameters."""
    from pwdlib import PasswordHash
    from pwdlib.hashers.argon2 import Argon2Hasher

    from server.web.sessions import use_password_hasher

    use_password_hasher(PasswordHash((Argon2Hasher(time_cost=1, memory_cost=1024, parallelism=1),)))


@pytest.fixture(scope="session")
def request_for() -> Callable[[Problem, str], dict[str, Any]]:
    """Builds the runner's request for `source` on every case of `problem` (as the jail receives it)."""

    def build(problem: Problem, source: str) -> dict[str, Any]:
        return {
            "source": source,
            "entry_point": problem.spec.entry_point,
            "cpu_time_limit_s": 30,
            "cases": [{"name": c.name, "args": case_arg_specs(problem.spec, c)} for c in problem.spec.cases],
        }

    return build


@pytest.fixture(scope="session")
def bundle_dict_of(request_for: Callable[[Problem, str], dict[str, Any]]) -> Callable[[Problem, str], dict[str, Any]]:
    """Runs a problem file (relative to the package, e.g. "wrong/no_checkpoint.py") through the
    runner in-process and returns the bundle dict the jail would serialise.

    A jail serves one submission and dies; in-process, what a submission patches in JAX (for
    example wrong/patched_saved_residuals.py) is put back afterwards so later tests see real JAX.
    """
    from jax._src import ad_checkpoint

    def build(problem: Problem, relative_path: str) -> dict[str, Any]:
        source = (problem.root / relative_path).read_text(encoding="utf-8")
        saved_residuals = ad_checkpoint.saved_residuals
        try:
            raw = run_request(request_for(problem, source))
        finally:
            ad_checkpoint.saved_residuals = saved_residuals
        assert raw["status"] == "ok", raw["error"]
        return raw

    return build


def to_bundle(raw: dict[str, Any]) -> Bundle:
    """Serialises a bundle dict to JSON bytes and parses it back strictly, as the worker does."""
    return parse_bundle(json.dumps(raw).encode("utf-8"), limit_bytes=BUNDLE_LIMIT_BYTES)


@pytest.fixture(scope="session")
def parse_bundle_dict() -> Callable[[dict[str, Any]], Bundle]:
    return to_bundle
