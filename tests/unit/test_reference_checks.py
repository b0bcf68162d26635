"""The reference checks itself once per version (graders/reference/build.py): a reference with an author's
mistake is caught while its expectations are built, in process (no jail), with a message that names
the self-check and tells the author what to change. Each mistake is a copy of remat_sin_sin whose
reference.py was edited the way an instructor might get it wrong."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from graders.artifact_limits import VerifyLimits
from graders.problems.problem import load_problem
from graders.reference.build import build_expectations, ensure_expectations
from graders.reference.expectation import cache_dir
from graders.reference.failures import ReferenceCheckError, failure_path, recorded_failure
from tests.support import PROBLEMS

SEED = b"reference-checks"
HEADER = "import jax\nimport jax.numpy as jnp\n\n"
MISTAKES = {
    # a stop_gradient on one term: the value is right, the reference's own gradient is not
    "finite_difference": HEADER + "def remat_sin_sin(x):\n"
    "    f = jax.checkpoint(lambda v: jnp.sin(jnp.sin(v)))\n"
    "    return f(x) + 0.5 * jax.lax.stop_gradient(x) - 0.5 * x\n",
    # an unseeded numpy draw while tracing: each export bakes in another constant
    "deterministic": "import numpy as np\n" + HEADER + "def remat_sin_sin(x):\n"
    "    scale = np.float32(1.0 + np.random.rand())\n"
    "    return jax.checkpoint(lambda v: jnp.sin(jnp.sin(v)) * scale)(x)\n",
    # shapes that only fit some cases: exporting "odd_length" (N = 37) raises
    "runtime_error": HEADER + "def remat_sin_sin(x):\n"
    "    return jax.checkpoint(lambda v: jnp.sin(jnp.sin(v.reshape(2, -1))).reshape(-1))(x)\n",
    "time_limit": "import time\n" + HEADER + "def remat_sin_sin(x):\n    time.sleep(0.6)\n"
    "    return jax.checkpoint(lambda v: jnp.sin(jnp.sin(v)))(x)\n",
}


def package(tmp_path: Path, reference: str) -> Path:
    root = tmp_path / "remat_sin_sin"
    shutil.copytree(PROBLEMS / "remat_sin_sin", root)
    (root / "reference.py").write_text(reference)
    return root


@pytest.mark.parametrize("check", sorted(MISTAKES))
def test_an_authors_mistake_fails_its_self_check(tmp_path: Path, check: str) -> None:
    problem = load_problem(package(tmp_path, MISTAKES[check]))
    with pytest.raises(ReferenceCheckError) as caught:
        build_expectations(problem, seed=SEED, export_budget_s=1.0)
    assert caught.value.check == check, caught.value.failures
    text = str(caught.value)
    assert text.startswith(f"reference.py: {check}: ")
    if check == "time_limit":
        assert "[limits]" in text and "wall_time_limit_s" in text
    if check == "finite_difference":
        assert "stop_gradient" in text and "case 'small'" in text
    if check == "runtime_error":
        assert "case 'odd_length'" in text


def test_a_reference_too_big_for_the_verifier_fails_memory_limit(tmp_path: Path) -> None:
    problem = load_problem(PROBLEMS / "remat_sin_sin")
    with pytest.raises(ReferenceCheckError) as caught:
        build_expectations(problem, seed=SEED, limits=VerifyLimits(max_peak_live_bytes=1 << 20))
    assert caught.value.check == "memory_limit" and "case 'large'" in caught.value.message


def test_the_banks_reference_passes_and_a_deterministic_failure_is_recorded_not_rebuilt(tmp_path: Path) -> None:
    good = load_problem(PROBLEMS / "remat_sin_sin")
    expectations = build_expectations(good, seed=SEED, export_budget_s=60.0)
    assert expectations.cases and all(max(c.fd_reference_error) < 1e-3 for c in expectations.cases)
    bad = load_problem(package(tmp_path, MISTAKES["finite_difference"]))
    with pytest.raises(ReferenceCheckError):
        ensure_expectations(bad, seed=SEED, cache_root=tmp_path / "cache")
    entry = cache_dir(tmp_path / "cache", bad, SEED)
    assert failure_path(entry).is_file() and recorded_failure(entry).check == "finite_difference"  # type: ignore[union-attr]
    (bad.root / "reference.py").write_text(MISTAKES["finite_difference"])  # unchanged: the same version
    with pytest.raises(ReferenceCheckError, match="finite_difference"):  # from the record, at once
        ensure_expectations(bad, seed=SEED, cache_root=tmp_path / "cache")


def test_both_the_determinism_and_the_gradient_of_one_reference_are_reported(tmp_path: Path) -> None:
    both = (
        "import numpy as np\n" + HEADER + "def remat_sin_sin(x):\n"
        "    scale = np.float32(1.0 + np.random.rand())\n"
        "    return jax.checkpoint(lambda v: jnp.sin(jnp.sin(v)))(x) * scale + jax.lax.stop_gradient(x) - x\n"
    )
    with pytest.raises(ReferenceCheckError) as caught:
        build_expectations(load_problem(package(tmp_path, both)), seed=SEED)
    assert [c for c, _ in caught.value.failures] == ["deterministic", "finite_difference"]
