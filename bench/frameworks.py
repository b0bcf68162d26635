"""What the frameworks section of the bank costs: template memory and import time with and without
the model libraries, and the verdict time of every file of each framework problem.

1. Two template-like processes, each `python -I` importing JAX and running the same warm-up as the
   templates (`jailside.warmup.warm_up`), one also importing `jailside.frameworks`' modules;
   prints each one's import seconds, PSS and RSS (MB, /proc/PID/smaps_rollup) while it waits.
   The real templates add the fork server's own few MB (`bench/ready_memory.py` measures them).
2. Grades every file (reference, right/, wrong/) of each problem through the real jail and
   verifier in this process (`graders.pipeline.grade`, expectations built first and not timed),
   and prints per problem the median and largest verdict seconds, and whether each file got its
   expected verdict. Nothing is asserted.

Usage:
    .venv/bin/python bench/frameworks.py [--problems SLUG ...] [--no-grade]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, smaps_rollup_kb

FRAMEWORK_PROBLEMS = (
    "mlp_params_tree",
    "dropout_key_in_remat",
    "linen_remat_train_flag",
    "linen_scan_remat",
    "linen_remat_scan_sqrt",
    "nnx_remat_block",
    "equinox_scan_checkpoint",
    "maxtext_minimal_stages",
    "qkv_offload_pinned_host",
)

TEMPLATE_LIKE = """
import sys, time
sys.path.insert(0, {repo!r})
t0 = time.monotonic()
import jax, jax.numpy
from jax import export
{frameworks}
from jailside.warmup import warm_up
warm_up()
print(f"{{time.monotonic() - t0:.2f}}", flush=True)
sys.stdin.read()
"""


def _rollup(pid: int) -> tuple[float, float]:
    """(PSS, RSS) of a process in MB."""
    kb = smaps_rollup_kb(pid)
    return kb.get("Pss", 0) / 1024, kb.get("Rss", 0) / 1024


def template_memory() -> None:
    """Prints import seconds, PSS and RSS of a template-like process without and with the frameworks."""
    print("template-like process (JAX imported and warmed up, as the templates do before they fork)")
    print(f"{'imports':<30}{'seconds':>9}{'PSS MB':>9}{'RSS MB':>9}")
    for label, frameworks in (
        ("JAX only", ""),
        ("JAX + flax, nnx, eqx, optax", "from jailside.frameworks import import_frameworks; import_frameworks()"),
    ):
        code = TEMPLATE_LIKE.format(repo=str(REPO), frameworks=frameworks)
        proc = subprocess.Popen(
            [sys.executable, "-I", "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdin is not None
        seconds = proc.stdout.readline().strip()
        pss, rss = _rollup(proc.pid)
        proc.stdin.close()
        proc.wait(timeout=30)
        print(f"{label:<30}{seconds:>9}{pss:>9.0f}{rss:>9.0f}")


def verdict_times(slugs: list[str]) -> None:
    """Grades every file of each problem and prints the verdict seconds per problem."""
    from graders.pipeline import JudgeConfig, grade
    from graders.problems.problem import ProblemRepository
    from graders.reference.build import ensure_expectations
    from graders.verdict import Verdict

    repo = ProblemRepository(REPO / "problems")
    config = JudgeConfig(cache_dir=Path(tempfile.mkdtemp(prefix="bench-frameworks-")), seed=b"bench-frameworks")
    print(f"\n{'problem':<26}{'files':>6}{'median s':>10}{'max s':>8}  verdicts")
    for slug in slugs:
        if slug not in repo.slugs():
            print(f"{slug:<26} (not in the bank)")
            continue
        problem = repo.working(slug)
        ensure_expectations(problem, seed=config.seed, cache_root=config.cache_dir)
        files = [(problem.reference_path, "ACCEPTED")]
        files += [(p, "ACCEPTED") for p in sorted((problem.root / "right").glob("*.py"))]
        files += [(problem.root / "wrong" / name, verdict) for name, verdict in problem.wrong_submissions()]
        seconds, mismatches = [], []
        for path, expected in files:
            t0 = time.monotonic()
            report = grade(path.read_text(), problem, config)
            seconds.append(time.monotonic() - t0)
            if report.verdict != Verdict(expected):
                mismatches.append(f"{path.name}: {report.verdict.value} (expected {expected})")
        verdicts = "all as expected" if not mismatches else "; ".join(mismatches)
        print(f"{slug:<26}{len(files):>6}{statistics.median(seconds):>10.2f}{max(seconds):>8.2f}  {verdicts}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", nargs="*", default=list(FRAMEWORK_PROBLEMS))
    parser.add_argument("--no-grade", action="store_true", help="only the template memory")
    args = parser.parse_args()
    template_memory()
    if not args.no_grade:
        verdict_times(args.problems)


if __name__ == "__main__":
    main()
