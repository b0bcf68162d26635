"""Memory of the templates and of the children kept waiting (`sandbox/ready.py`), per grading thread.

Grades the reference of a problem once with `ready_children=N` (in this process, through the real
templates and jails), waits until the replacements are started and have said they are ready, then
prints, for the two templates and the waiting children: PSS (proportional set size: pages shared
with the template counted once between them, from /proc/PID/smaps_rollup), RSS, and the memory
charged to each waiting child's cgroup. Target: templates plus ready children <= 600 MB
per worker. Numbers are printed; nothing is asserted.

Usage:
    .venv/bin/python bench/ready_memory.py [--problem checkpoint_dot_policy] [--threads 2]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from common import REPO, smaps_rollup_kb

from tests.support import descendants


def _rollup(pid: int) -> tuple[int, int]:
    """(PSS, RSS) of one process in bytes, or (0, 0) when it is gone or unreadable."""
    try:
        kb = smaps_rollup_kb(pid)
    except (OSError, ValueError, IndexError):
        return 0, 0
    return kb.get("Pss", 0) * 1024, kb.get("Rss", 0) * 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--problem", default="checkpoint_dot_policy")
    parser.add_argument("--threads", type=int, default=2, help="grading threads: children kept waiting per kind")
    args = parser.parse_args()

    from graders.config import JudgeConfig
    from graders.pipeline import grade, prestart
    from graders.problems.problem import ProblemRepository
    from graders.verifier.client import verifier_ready, verifier_templates
    from sandbox.jail import jail_ready, jail_templates

    problem = ProblemRepository(REPO / "problems").get(args.problem)
    with tempfile.TemporaryDirectory() as cache:
        config = JudgeConfig(cache_dir=Path(cache), seed=b"bench-ready-memory", ready_children=args.threads)
        prestart()
        source = problem.reference_path.read_text()
        grade(source, problem, config)  # builds the expectations once
        for round_ in range(2):  # `threads` grading threads at once, as a worker runs them
            threads = [
                threading.Thread(target=grade, args=("\n" * (1 + i + round_ * args.threads) + source, problem, config))
                for i in range(args.threads)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        for ready in (jail_ready(), verifier_ready()):
            ready.settle(120)
        time.sleep(3.0)  # the waiting children finish their start-up (at CPU weight 1 on an idle host)
        rows = []
        for name, templates, ready in (
            ("jail", jail_templates(), jail_ready()),
            ("verifier", verifier_templates(), verifier_ready()),
        ):
            template_pid = templates.get().pid()
            assert template_pid is not None
            waiting = ready.children()
            child_pids = {p for child in waiting if child.pid is not None for p in descendants(child.pid)}
            template_pids = [p for p in descendants(template_pid) if p not in child_pids]
            t_pss, t_rss = map(sum, zip(*(_rollup(p) for p in template_pids), strict=True))
            c_pss, c_rss = map(sum, zip(*(_rollup(p) for p in child_pids), strict=True)) if child_pids else (0, 0)
            charged = sum(child.memory_bytes() or 0 for child in waiting)
            rows.append((name, len(waiting), t_pss, t_rss, c_pss, c_rss, charged))
        mb = 1 << 20
        print(f"{args.threads} grading threads, {args.problem}; PSS / RSS in MB")
        print(
            f"{'kind':10} {'waiting':>7} {'template PSS':>12} {'RSS':>6} {'waiting PSS':>11} {'RSS':>6} {'cgroup':>7}"
        )
        for name, n, t_pss, t_rss, c_pss, c_rss, charged in rows:
            row = f"{name:10} {n:7d} {t_pss / mb:12.0f} {t_rss / mb:6.0f} {c_pss / mb:11.0f} {c_rss / mb:6.0f}"
            print(f"{row} {charged / mb:7.0f}")
        total = sum(r[2] + r[4] for r in rows)
        per_thread = total / mb / args.threads
        print(f"templates plus waiting children: {total / mb:.0f} MB PSS = {per_thread:.0f} MB per grading thread")
        print("target: templates plus ready children <= 600 MB per worker")
        for ready in (jail_ready(), verifier_ready()):
            ready.drain()


if __name__ == "__main__":
    main()
