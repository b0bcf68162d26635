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
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support import PROBLEMS, Server, remat_judge  # noqa: E402

EXPECT = re.compile(r"^# expect:\s*([A-Z_]+)", re.MULTILINE)
SKIP = ("TIME_LIMIT_EXCEEDED", "MEMORY_LIMIT_EXCEEDED", "OUTPUT_LIMIT_EXCEEDED")


def files(slug: str) -> list[tuple[str, str]]:
    root = PROBLEMS / slug
    out = [("reference", (root / "reference.py").read_text())]
    for folder in ("right", "wrong"):
        for path in sorted((root / folder).glob("*.py")):
            text = path.read_text()
            found = EXPECT.search(text)
            if (found and found.group(1) in SKIP) or path.name == "forged_bundle.py":
                continue
            out.append((f"{folder}/{path.stem}", text))
    return out


def main() -> None:
    slugs = sys.argv[1:] or sorted(p.name for p in PROBLEMS.iterdir() if (p / "problem.toml").exists())
    root = Path(tempfile.mkdtemp(prefix="remat-insight-"))
    os.chmod(root, 0o755)
    server = Server(
        root / "data",
        env={"REMAT_JUDGE_RATE_LIMIT": "", "REMAT_JUDGE_MAX_QUEUE_DEPTH": "0", "REMAT_JUDGE_WAIT_TIMEOUT_S": "600"},
    ).start()
    try:
        names: dict[str, str] = {}
        with httpx.Client(base_url=server.url, timeout=600) as client:
            for slug in slugs:
                for name, source in files(slug):
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
            print(f"\n{slug} (version {found['version']}): {found['graded']} graded, {len(found['clusters'])} policies")
            for c in found["clusters"]:
                example = names.get(c["example"], c["example"]).split(":", 1)[1]
                print(f"  {c['students']:>2} student(s)  {c['verdict']:<22} {c['summary']}  (e.g. {example})")
            for g in found["identical_groups"]:
                print(f"  identical programs: {', '.join(names.get(i, i).split(':', 1)[1] for i in g['submissions'])}")
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
