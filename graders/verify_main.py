"""The verifier process: `python -m graders.verify_main`, one per submission, trusted code only.

It runs the untrusted exported StableHLO, so the parent starts it under a cgroup and RLIMITs
with a time-out, and reads its progress as JSON lines on stdout:

1. The process imports JAX, then waits for stdin line 1 (so it can be started ahead of time):
   `{"problem_dir": str, "problem_version": str, "cache_dir": str, "seed_hex": str, "limits": {...}}`;
   a package on disk whose version differs from the worker's is refused (a judge fault). It loads the
   problem and the reference's expectations (building them on a cache miss), then prints
   `{"event": "ready"}` or `{"event": "error", "message": str}`.
2. The rest of stdin: the bundle bytes. The process prints `{"event": "running"}` just before
   the first untrusted artifact runs, then `{"event": "result", ...}`.

An exception in our code is the judge's fault (INTERNAL_ERROR, "error" event); a time-out or
memory kill once the bundle has been sent belongs to the submission's artifacts, which the process
is then reading or running.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any


def _emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def main() -> int:
    # Import and initialise JAX before the problem arrives: a warm verifier waits here.
    import jax.numpy as jnp

    from graders.problem import load_problem
    from graders.reference import ensure_expectations
    from graders.verifier import VerifyLimits, verify
    from sandbox.bundle import BundleError, parse_bundle

    jnp.zeros(()).block_until_ready()
    line = sys.stdin.buffer.readline()
    if not line:
        return 0  # a warm verifier that was never used
    t0 = time.monotonic()
    config = json.loads(line)
    try:
        problem = load_problem(Path(config["problem_dir"]))
        if problem.version != config.get("problem_version", problem.version):
            raise RuntimeError(f"the worker judges {problem.slug} version {config['problem_version']}, but "
                               f"the package now on disk is version {problem.version}")
        expectations = ensure_expectations(problem, seed=bytes.fromhex(config["seed_hex"]),
                                           cache_root=Path(config["cache_dir"]))
    except Exception as exc:
        _emit({"event": "error", "message": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()})
        return 1
    _emit({"event": "ready", "ms": (time.monotonic() - t0) * 1000, "version": problem.version})

    data = sys.stdin.buffer.read()
    limits = VerifyLimits(**config.get("limits", {}))
    t1 = time.monotonic()
    try:
        bundle = parse_bundle(data, limit_bytes=config.get("bundle_limit_bytes", 64 << 20))
    except BundleError as exc:
        _emit({"event": "error", "message": f"bundle rejected after the parent accepted it: {exc}"})
        return 1
    try:
        result = verify(bundle, problem, expectations, limits=limits,
                        on_execute=lambda: _emit({"event": "running"}))
    except MemoryError:
        _emit({"event": "memory_error"})
        return 1
    except Exception as exc:  # a fault of ours (or of XLA): never blamed on the submission
        _emit({"event": "error", "message": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()})
        return 1
    import jax

    _emit({"event": "result", "verdict": result.verdict.value, "score": result.score,
           "checks": [c.model_dump(mode="json") | {"verdict": c.verdict.value if c.verdict else None}
                      for c in result.checks],
           "residuals": result.residuals.model_dump(mode="json") if result.residuals else None,
           "problem_version": problem.version, "jax_version": jax.__version__,
           "verify_ms": (time.monotonic() - t1) * 1000})
    return 0


if __name__ == "__main__":
    sys.exit(main())
