"""The in-process floor of one verdict: the judge's own work with no process boundaries.

In one warm process: load a submission, trace and export every case of its problem
(`jailside.export.export_case`, as the jail does, on the problem's mesh if it has one, with the
templates' simulated devices), then verify the bundle against the cached
expectations (`graders.verifier.verify.verify`, as the verifier process does). The first round warms
JAX up and builds the cache; the median of the rest is the floor that the POST-to-verdict latency
targets are ratios to (bench/latency.py prints them).

Besides wall milliseconds it reports verify's CPU milliseconds (this process, all threads: XLA
compiles on several), how many XLA executables verify compiled and their compile seconds, and
how long loading the cached expectations takes (`load_expectations`, JAX already imported, as
in the verifier; the page cache warm).

Usage:
    .venv/bin/python bench/floor.py [--problem SLUG] [--file PATH] [--repeats 5] [--json]
"""

from __future__ import annotations

import argparse
import base64
import importlib.util
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from common import REPO

from jailside.protocol import SIMULATED_DEVICES_FLAG

# the devices the jail and the verifier have (a mesh problem needs them), set before JAX starts
os.environ.setdefault("XLA_FLAGS", SIMULATED_DEVICES_FLAG)


def measure(problem_dir: Path, source_path: Path, repeats: int) -> dict[str, float]:
    """Medians over `repeats` warm rounds: wall milliseconds of export, verify and their sum; CPU
    milliseconds of verify; XLA compiles per verify and their milliseconds; milliseconds to load
    the problem's cached expectations."""
    from jax._src import dispatch, monitoring

    from graders.artifact_limits import VerifyLimits
    from graders.problems.hidden_inputs import case_arg_specs
    from graders.problems.problem import load_problem
    from graders.reference.build import ensure_expectations
    from graders.reference.expectation import cache_dir
    from graders.reference.expectation_files import load_expectations
    from graders.verifier.verify import verify
    from jailside.export import export_case
    from sandbox.bundle import BUNDLE_FORMAT, parse_bundle

    compiles: list[float] = []

    def on_event(event: str, duration: float, **_: object) -> None:
        if event == dispatch.BACKEND_COMPILE_EVENT:
            compiles.append(duration)

    monitoring.register_event_duration_secs_listener(on_event)
    problem = load_problem(problem_dir)
    export_ms, verify_ms, verify_cpu_ms, compile_counts, compile_ms, load_ms = [], [], [], [], [], []
    with tempfile.TemporaryDirectory() as cache:
        expectations = ensure_expectations(problem, seed=b"bench-floor-seed", cache_root=Path(cache))
        entry = cache_dir(Path(cache), problem, b"bench-floor-seed")
        for _ in range(repeats + 1):
            t0 = time.perf_counter()
            assert load_expectations(entry) is not None
            load_ms.append((time.perf_counter() - t0) * 1000)
        load_ms = load_ms[1:]
        for round_ in range(repeats + 1):
            t0 = time.perf_counter()
            spec = importlib.util.spec_from_file_location(f"submission_{round_}", source_path)
            module = importlib.util.module_from_spec(spec)  # a fresh function each round: no trace cache
            spec.loader.exec_module(module)  # type: ignore[union-attr]
            fn = getattr(module, problem.spec.entry_point)
            cases = []
            for case in problem.spec.cases:
                fwd, bwd, n_out = export_case(fn, case_arg_specs(problem.spec, case), problem.spec.mesh_plain)
                cases.append(
                    {
                        "name": case.name,
                        "n_primal_outputs": n_out,
                        "fwd": base64.b64encode(fwd).decode(),
                        "bwd": base64.b64encode(bwd).decode(),
                        "residual_notes": None,
                    }
                )
            raw = json.dumps(
                {"format": BUNDLE_FORMAT, "status": "ok", "error": None, "cases": cases, "timings_ms": {}}
            ).encode()
            compiles.clear()
            t1, c1 = time.perf_counter(), time.process_time()
            verify(parse_bundle(raw, limit_bytes=1 << 30), problem, expectations, limits=VerifyLimits())
            t2, c2 = time.perf_counter(), time.process_time()
            if round_:  # the first round warms JAX up
                export_ms.append((t1 - t0) * 1000)
                verify_ms.append((t2 - t1) * 1000)
                verify_cpu_ms.append((c2 - c1) * 1000)
                compile_counts.append(len(compiles))
                compile_ms.append(sum(compiles) * 1000)
    monitoring.unregister_event_duration_listener(on_event)
    return {
        "export_ms": statistics.median(export_ms),
        "verify_ms": statistics.median(verify_ms),
        "floor_ms": statistics.median(e + v for e, v in zip(export_ms, verify_ms, strict=True)),
        "verify_cpu_ms": statistics.median(verify_cpu_ms),
        "compiles": statistics.median(compile_counts),
        "compile_ms": statistics.median(compile_ms),
        "load_expectations_ms": statistics.median(load_ms),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--problem", default="checkpoint_dot_policy")
    parser.add_argument("--file", default=None, help="the submission (default: the problem's reference.py)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args()
    problem_dir = REPO / "problems" / args.problem
    result = measure(problem_dir, Path(args.file) if args.file else problem_dir / "reference.py", args.repeats)
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"in-process floor: {result['floor_ms']:.0f} ms (export {result['export_ms']:.0f} ms, "
            f"verify {result['verify_ms']:.0f} ms), median of {args.repeats}\n"
            f"verify: {result['verify_cpu_ms']:.0f} ms of CPU, {result['compiles']:.0f} XLA compiles taking "
            f"{result['compile_ms']:.0f} ms; loading the cached expectations: "
            f"{result['load_expectations_ms']:.1f} ms"
        )


if __name__ == "__main__":
    main()
