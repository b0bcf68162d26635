"""`python -m graders.budget.frontier_table FOLDER`: the frontier of every case of a problem
package (budget -> least recomputation), for an author choosing budgets that make a budget problem
interesting (`remat-judge problems frontier SLUG` runs it). Runs the package's reference in this
process, with its checkpoints removed: use it on your own package.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from graders.budget.optimum import DEFAULT_TIME_LIMIT_S, Solution, frontier, no_remat_floor
from graders.problems.hidden_inputs import case_arg_specs, leaf_names
from graders.problems.problem import load_problem
from graders.reference.budget_facts import forward_of, peak_bound, solution_point
from graders.reference.build import import_file
from graders.reference.plain import checkpoint_disabled
from graders.reference.schedules import measure_schedules, schedule_table


def case_frontiers(folder: Path, *, time_limit_s: float = DEFAULT_TIME_LIMIT_S) -> list[dict[str, Any]]:
    """Per case: {"case", "forward_flops", "budget_of", "points": [{"bytes", "flops", "bound_flops",
    "optimal", "seconds", "saved"}] (saved: how many values the policy keeps; [] on a budget of the
    peak, which this model does not bound), "schedules": the reference and its `SCHEDULES` measured
    (`graders.reference.schedules.measure_schedules`), "budget_bytes" (the case's, or None),
    "floor_bytes" (`no_remat_floor`: a budget at or above it, peak: plus "cotangent_bytes", needs
    no remat), "bound_flops" (on a budget of the peak: `peak_bound`, the least recomputation any
    schedule of the reference's program within it needs; None otherwise or when none fits)}.

    Raises:
        Whatever importing, exporting or reading the reference raises; ValueError for a problem
        on a mesh (its optimum would count one device).
    """
    problem = load_problem(folder)
    if problem.spec.mesh is not None:
        raise ValueError("a problem on a mesh has no frontier yet: the optimum counts one device")
    with checkpoint_disabled():
        module = import_file(problem.reference_path, f"_remat_frontier_{problem.slug}")
        fn = getattr(module, problem.spec.entry_point)
    reference = import_file(problem.reference_path, f"_remat_frontier_ref_{problem.slug}")
    measured = {"the reference": getattr(reference, problem.spec.entry_point), **schedule_table(reference)}
    budget_of = problem.spec.memory.budget_of
    out = []
    for case in problem.spec.cases:
        specs = case_arg_specs(problem.spec, case)
        graph, cotangent = forward_of(fn, specs, leaf_names(problem.spec))
        points: list[Solution] = [] if budget_of == "peak" else frontier(graph, time_limit_s=time_limit_s)
        budget = (problem.spec.memory.budgets or {}).get(case.name)
        bound = peak_bound(graph, budget, cotangent) if budget_of == "peak" and budget is not None else None
        out.append(
            {
                "case": case.name,
                "budget_bytes": budget,
                "floor_bytes": no_remat_floor(graph, time_limit_s=time_limit_s),
                "cotangent_bytes": cotangent,
                "bound_flops": bound.bound_flops if bound is not None and bound.recompute_flops is not None else None,
                "forward_flops": sum(graph.costs),
                "budget_of": budget_of,
                "schedules": measure_schedules(measured, specs, case.name),
                "points": [
                    {**solution_point(p), "seconds": round(p.seconds, 3), "saved": len(p.saved)} for p in points
                ],
            }
        )
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m graders.budget.frontier_table")
    parser.add_argument("folder", type=Path)
    parser.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT_S)
    args = parser.parse_args(argv)
    try:
        found = case_frontiers(args.folder, time_limit_s=args.time_limit)
    except Exception as exc:  # noqa: BLE001 - the author's own code: say what it raised, in one line
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    json.dump(found, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
