"""Prints, for every budget problem of the bank (or the slugs given), what its optimum costs to
compute: per case the frontier of the integer program (points, the slowest and the total solve
time), the named schedules measured (how many, and the wall time of exporting and reading them),
and the optimum at the case's budget (docs/ARCHITECTURE.md, "Budget problems").

    .venv/bin/python bench/budget_frontiers.py                    # every budget problem
    .venv/bin/python bench/budget_frontiers.py budget_scan_peak   # one

Runs each reference in this process, as `remat-judge problems frontier` does. Wall times depend on
the machine: run it on a quiet one.
"""

from __future__ import annotations

import sys
import time

from common import PROBLEMS

from graders.budget.frontier_table import case_frontiers
from graders.budget.measured import best_within
from graders.problems.problem import load_problem


def _optimum(case: dict, budget: int, budget_of: str) -> str:
    """The least recomputation within `budget`, read off the case's frontier or its schedules."""
    if budget_of == "peak":
        best = best_within(case["schedules"], budget)
        return f"{best['flops']:,} FLOPs ({best['label']})" if best else "none fits"
    fitting = [p for p in case["points"] if p["bytes"] <= budget]
    return f"{fitting[0]['flops']:,} FLOPs" if fitting else "none fits"


def main(slugs: list[str]) -> None:
    for slug in slugs:
        problem = load_problem(PROBLEMS / slug)
        memory = problem.spec.memory
        t0 = time.monotonic()
        cases = case_frontiers(PROBLEMS / slug)
        wall = time.monotonic() - t0
        print(f"{slug} (budget of the {'peak' if memory.budget_of == 'peak' else 'residuals'}): {wall:.1f} s in all")
        for case in cases:
            solves = [p["seconds"] for p in case["points"]]
            budget = memory.budgets[case["case"]]
            solved = (
                f"frontier {len(solves)} points, slowest solve {max(solves):.3f} s, total {sum(solves):.3f} s; "
                if solves
                else ""  # a budget of the peak: no integer program, the best of the programs measured
            )
            print(
                f"  {case['case']}: forward {case['forward_flops']:,} FLOPs; {solved}"
                f"{len(case['schedules'])} programs measured; "
                f"at the budget of {budget:,} bytes: {_optimum(case, budget, memory.budget_of)}"
            )


def budget_slugs() -> list[str]:
    """The bank's problems whose memory rule is a budget."""
    folders = sorted(p for p in PROBLEMS.iterdir() if (p / "problem.toml").is_file())
    return [p.name for p in folders if load_problem(p).spec.memory.rule == "budget"]


if __name__ == "__main__":
    main(sys.argv[1:] or budget_slugs())
