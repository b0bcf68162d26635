"""Prints, for every file given (or every `right/` and `wrong/` of the bank), the verdict and the
backward-pass FLOPs against the reference's on each case: the table behind the recompute rule
(docs/ARCHITECTURE.md, "Two axes of a policy").

    .venv/bin/python bench/recompute_styles.py                       # the whole bank
    .venv/bin/python bench/recompute_styles.py -p SLUG a.py b.py     # held-out files of one problem
    .venv/bin/python bench/recompute_styles.py --styles DIR          # DIR/<slug>/*.py, each against <slug>
    .venv/bin/python bench/recompute_styles.py --styles bench/styles # the held-out styles kept here

Each row: the file, the verdict it expects (its `# expect:` line), the verdict it got, and per case
`submitted/expected` backward FLOPs with the ratio, `r` the work on the residuals alone and `c` the
recompute figure (forward work done again) with its ratio; `*` marks the case(s) the rule judges.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import PROBLEMS

from graders.config import JudgeConfig
from graders.pipeline import grade
from graders.problems.problem import load_problem


def _expect(path: Path) -> str:
    first = path.read_text(encoding="utf-8").splitlines()[:1]
    return first[0].split(":", 1)[1].strip() if first and first[0].startswith("# expect:") else "?"


def _row(path: Path, problem, config: JudgeConfig) -> str:
    t0 = time.monotonic()
    report = grade(path.read_text(encoding="utf-8"), problem, config)
    recompute = next((c for c in report.checks if c.name == "recompute"), None)
    cells = []
    details = recompute.details if recompute is not None else {}
    for case, d in (details or {}).items():
        if not isinstance(d, dict) or "submitted_bwd_flops" not in d:
            continue
        sub, exp = d["submitted_bwd_flops"], d["expected_bwd_flops"]
        mark = "*" if d.get("judged") else ""
        rsub, rexp = d.get("submitted_residual_flops"), d.get("expected_residual_flops")
        residual = f" r {rsub:,}/{rexp:,}" if rsub is not None and rexp is not None else ""
        csub, cexp = d.get("submitted_recompute_flops"), d.get("expected_recompute_flops")
        redo = f" c {csub:,}/{cexp:,} ({csub / max(1, cexp):.2f})" if csub is not None and cexp is not None else ""
        cells.append(f"{case}{mark} {sub:,}/{exp:,} ({sub / max(1, exp):.2f}){residual}{redo}")
    verdict = report.verdict.value if report.verdict else "?"
    expect = _expect(path)
    flag = "" if expect in ("?", verdict) else "  <-- MISMATCH"
    msg = ""
    if report.verdict and report.verdict.value != "ACCEPTED":
        failed = [c for c in report.checks if not c.passed]
        msg = f"\n      {failed[0].name}: {failed[0].message.splitlines()[0][:160]}" if failed else ""
    return (
        f"{problem.slug}/{path.parent.name}/{path.name}: expect {expect}, got {verdict} "
        f"({time.monotonic() - t0:.1f} s){flag}\n    " + "; ".join(cells) + msg
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-p", "--problem")
    parser.add_argument("--styles", type=Path)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", default="recompute-styles", help="the hidden-input seed")
    parser.add_argument("files", nargs="*", type=Path)
    args = parser.parse_args()
    problems_dir = PROBLEMS
    jobs: list[tuple[Path, Path]] = []  # (problem root, file)
    if args.problem:
        jobs += [(problems_dir / args.problem, f) for f in args.files]
    elif args.styles:
        for d in sorted(p for p in args.styles.iterdir() if p.is_dir()):
            jobs += [(problems_dir / d.name, f) for f in sorted(d.glob("*.py"))]
    else:
        for root in sorted(p for p in problems_dir.iterdir() if (p / "problem.toml").exists()):
            jobs += [(root, f) for f in sorted((root / "right").glob("*.py")) + sorted((root / "wrong").glob("*.py"))]
    with tempfile.TemporaryDirectory() as tmp:
        config = JudgeConfig(cache_dir=Path(tmp) / "cache", seed=args.seed.encode())
        problems = {root: load_problem(root) for root in {r for r, _ in jobs}}
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for line in pool.map(lambda job: _row(job[1], problems[job[0]], config), jobs):
                print(line, flush=True)


if __name__ == "__main__":
    main()
