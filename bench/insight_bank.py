"""The insight of the bank's own `right/` and `wrong/` files, graded as if each were a different
student's. Prints, per problem, the policy clusters and identical groups that
`remat-judge problems insight SLUG` shows teachers; nothing is asserted.

    .venv/bin/python bench/insight_bank.py                 # every problem of problems/
    .venv/bin/python bench/insight_bank.py remat_sin_sin   # some

Starts an embedded judge on loopback with a fresh data folder, submits every file (the reference
too) through the API without a key (each anonymous submission counts as its own student), skips
the files that only test limits (time, memory, output bombs), waits for every verdict, then runs
the CLI. Run as root (jails).
"""

from __future__ import annotations

import json
import os
import sys
import time

import httpx
from common import PROBLEMS, bank, scratch_dir

from tests.support import Server, remat_judge


def main() -> None:
    slugs = sys.argv[1:] or sorted(p.name for p in PROBLEMS.iterdir() if (p / "problem.toml").exists())
    with scratch_dir("remat-insight-") as root:
        server = Server(
            root / "data",
            env={"REMAT_JUDGE_RATE_LIMIT": "", "REMAT_JUDGE_MAX_QUEUE_DEPTH": "0", "REMAT_JUDGE_WAIT_TIMEOUT_S": "600"},
        ).start()
        try:
            names: dict[str, str] = {}
            with httpx.Client(base_url=server.url, timeout=600) as client:
                for slug in slugs:
                    for name, source in bank(slug):
                        answer = client.post("/api/v1/submissions", json={"problem": slug, "source": source})
                        if answer.status_code == 202:
                            names[answer.json()["id"]] = f"{slug}:{name}"
                        else:
                            print(f"{slug}:{name} refused: {answer.status_code} {answer.text[:120]}")
                pending = set(names)
                while pending:
                    for submission_id in list(pending):
                        if client.get(f"/api/v1/submissions/{submission_id}").json()["status"] in ("done", "failed"):
                            pending.discard(submission_id)
                    time.sleep(1)
            for slug in slugs:
                done = remat_judge(
                    "problems", "insight", slug, "--json", "--data-dir", str(server.data_dir), env=dict(os.environ)
                )
                found = json.loads(done.stdout)
                print(
                    f"\n{slug} (version {found['version']}): {found['graded']} graded, "
                    f"{len(found['clusters'])} policies"
                )
                for c in found["clusters"]:
                    example = names.get(c["example"], c["example"]).split(":", 1)[1]
                    print(f"  {c['students']:>2} student(s)  {c['verdict']:<22} {c['summary']}  (e.g. {example})")
                for g in found["identical_groups"]:
                    print(
                        f"  identical programs: {', '.join(names.get(i, i).split(':', 1)[1] for i in g['submissions'])}"
                    )
        finally:
            server.stop()


if __name__ == "__main__":
    main()
