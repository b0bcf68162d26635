"""Prints, for every budget problem of the bank (or the slugs given), per case, the judge's static
peak of the backward program beside XLA's figures of the same program compiled for one CPU device:
for the reference and for each of its named schedules (reference.py's `SCHEDULES`).

    .venv/bin/python bench/xla_peaks.py                    # every budget problem
    .venv/bin/python bench/xla_peaks.py budget_scan_peak   # one

Each program is exported and read as the reference's child does (`variant_facts`: residual bytes,
the backward pass's static peak live bytes, its recompute FLOPs), then its backward artifact is
exported again (`export_case`), deserialized and compiled on its argument avals
(`jax.jit(bwd.call).lower(...).compile()`, as `graders.reference.variants` does on a mesh), and
XLA's `memory_analysis()` is read (`graders.verifier.xla_memory`): arguments, outputs, temporaries,
aliased bytes, XLA's own peak where the backend gives one, and the bytes held (arguments + outputs
+ temporaries - aliased). The last columns are held - static peak, in bytes and in percent of the
static peak. `*` marks the named schedule of least recomputation within the case's budget (of the
peak or of the residual bytes, as problem.toml says). The figures are bytes and do not depend
on the machine; the run takes a few minutes (budget_chain_peak lists 128 schedules).

Measured (jax 0.10.2, CPU, beside another job on a 2-core machine), large case, the reference and
its best schedule within the budget (bytes; diff = XLA held - static peak; the budgets of
chain_peak and scan_peak are of the peak, the others' of residual bytes):

    problem          program                         static      resid  recompute       temp       held       diff     %
    attention_loose  reference                    1,015,816    557,568  1,064,960    229,376  1,049,144    +33,328  +3.3
                     attended, y and hidden       1,082,376    425,984  5,374,082    360,448  1,048,632    -33,744  -3.1
    attention_tight  reference                    1,082,376    294,912  9,568,386    425,984    983,096    -99,280  -9.2
                     the attention scores         1,082,376    294,912 10,608,770    524,288  1,081,400       -976  -0.1
    chain_peak       reference*                   2,293,764  2,048,000 21,340,160    131,072  3,784,808 +1,491,044 +65.0
    scan_peak        reference                    1,261,592    638,976  5,324,862    442,884  1,376,788   +115,196  +9.1
                     groups of √n, Python loop    1,114,132    327,680  8,454,208  1,082,372  1,704,980   +590,848 +53.0
    uneven_chain     reference                    1,441,792    638,976  8,470,528    131,072  1,359,928    -81,864  -5.7
                     every 3rd layer              1,130,500    589,824 17,907,712    131,072  1,310,776   +180,276 +15.9

    * budget_chain_peak's best schedule is the reference's own segmentation (1-2|3-4|...|11-12,
      last plain, narrow kept): the same figures. Arguments and outputs, the rest of held, are the
      residuals and cotangents, and the gradients plus a 16-byte table (chain_peak: 2,064,384 and
      1,589,352).

Over all 314 rows (both cases, every program) held - static runs from -47.5% to +97.4%; alias is 0
everywhere and XLA's peak_memory_in_bytes is arguments + outputs + 0 to 72 bytes, its temporaries
left out, so on CPU it is no peak and `held` is the figure to compare. Where they part: XLA keeps
every argument (the residuals and cotangents, not donated) and every output buffer for the whole
program, while the static peak frees a residual after its last read and counts a gradient from its
producer on; so programs with large weight gradients or many residuals read early (budget_chain_peak:
outputs 1,589,352 of ws' gradients; unrolled Python loops) come out above the static peak, up to
+97%. The other way, a `lax.scan`'s backward loop: with no checkpoint the static peak is 2,654,224
against arguments 1,064,960 and temporaries 49,284, which fits the judge counting the loop's stacked
operands and stacked results as values of their own while XLA reads the stacked residuals and writes
the stacked gradient in place (the scan schedules of budget_scan_peak's SCHEDULES are 21.8% to
47.5% below on the large case; its reference, also a scan, is 9.1% above). XLA's temporaries
are its buffer assignment (fusion scratch included) with reuse, so a loop unrolled in Python
(temp 1,082,372 for groups of √n) costs far more than the same schedule as a scan (246,148).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from common import PROBLEMS

from graders.problems.hidden_inputs import case_arg_specs
from graders.problems.problem import Problem, load_problem
from graders.reference.build import import_file
from graders.reference.schedules import schedule_table
from graders.reference.variants import variant_facts
from graders.untrusted.parse import deserialize
from graders.verifier.xla_memory import held_bytes, xla_memory
from jailside.export import export_case

COLUMNS = ("static", "resid", "recompute", "arg", "out", "temp", "alias", "xla_peak", "held", "diff", "diff%")


def compiled_memory(fn: Callable[..., Any], specs: list[dict[str, Any]]) -> dict[str, int]:
    """XLA's figures (`xla_memory`) of `fn`'s backward program compiled for one device."""
    # JAX after `common` has put the repository on the path, like the rest of the bench's imports
    import jax

    _, bwd_blob, _ = export_case(fn, specs, None)
    bwd = deserialize(bwd_blob)
    args = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in bwd.in_avals]
    return xla_memory(jax.jit(bwd.call).lower(*args).compile())


def measure(fn: Callable[..., Any], specs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """One program's row: the judge's figures and XLA's; None when it cannot be exported or read."""
    variant = variant_facts(fn, specs, None)
    if variant is None:
        return None
    memory = compiled_memory(fn, specs)
    static = variant.bwd_info.peak_live_bytes
    held = held_bytes(memory)
    return {
        "static": static,
        "resid": variant.residual_bytes,
        "recompute": variant.bwd_info.recompute_flops,
        "arg": memory.get("argument"),
        "out": memory.get("output"),
        "temp": memory.get("temp"),
        "alias": memory.get("alias"),
        "xla_peak": memory.get("peak"),
        "held": held,
        "diff": None if held is None else held - static,
        "diff%": None if held is None or not static else 100.0 * (held - static) / static,
    }


def best_label(rows: dict[str, dict[str, Any]], budget: int, budget_of: str) -> str | None:
    """The named schedule (not the reference) of least recomputation within `budget`, then of the
    lowest static peak; None when none fits."""
    key = "static" if budget_of == "peak" else "resid"
    fitting = [
        (r["recompute"], r["static"], label) for label, r in rows.items() if label != "reference" and r[key] <= budget
    ]
    return min(fitting)[2] if fitting else None


def _cell(value: Any, column: str) -> str:
    if value is None:
        return "-"
    return f"{value:+.1f}" if column == "diff%" else f"{value:,}"


def print_case(name: str, rows: dict[str, dict[str, Any]], best: str | None, budget: int, budget_of: str) -> None:
    """One case's table: a row per program, the best within the budget marked `*`."""
    width = max(len(label) for label in rows) + 2
    print(f"  {name} (budget {budget:,} bytes of {'peak' if budget_of == 'peak' else 'residuals'}):")
    print("    " + "program".ljust(width) + "".join(c.rjust(12) for c in COLUMNS))
    for label, row in rows.items():
        mark = "*" if label == best else " "
        cells = "".join(_cell(row[c], c).rjust(12) for c in COLUMNS)
        print(f"   {mark}{label.ljust(width)}{cells}")


def measure_problem(problem: Problem) -> list[tuple[str, dict[str, dict[str, Any]], str | None]]:
    """(case, {label: row}, best label) of every case, the reference first (label "reference")."""
    module = import_file(problem.reference_path, f"_remat_reference_{problem.slug}")
    programs = {"reference": getattr(module, problem.spec.entry_point), **schedule_table(module)}
    memory = problem.spec.memory
    out = []
    for case in problem.spec.cases:
        specs = case_arg_specs(problem.spec, case)
        rows = {}
        for label, fn in programs.items():
            row = measure(fn, specs)
            if row is None:
                print(f"  {case.name}: {label!r} could not be exported or read", file=sys.stderr)
                continue
            rows[label] = row
        best = best_label(rows, memory.budgets[case.name], memory.budget_of)
        print_case(case.name, rows, best, memory.budgets[case.name], memory.budget_of)
        out.append((case.name, rows, best))
    return out


def budget_slugs() -> list[str]:
    """The bank's problems whose memory rule is a budget."""
    folders = sorted(p for p in PROBLEMS.iterdir() if (p / "problem.toml").is_file())
    return [p.name for p in folders if load_problem(p).spec.memory.rule == "budget"]


def main(argv: list[str]) -> None:
    for slug in argv or budget_slugs():
        problem = load_problem(PROBLEMS / slug)
        print(f"{slug}:")
        measure_problem(problem)


if __name__ == "__main__":
    main(sys.argv[1:])
