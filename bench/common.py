"""What the benchmarks share. Imported first by each (`from common import ...`: a benchmark runs as
`.venv/bin/python bench/NAME.py`, so this folder is on the import path), it puts the repository
there too, for their imports of `graders`, `sandbox` and `tests`.

- `REPO`, `PROBLEMS`: the repository and its problem bank;
- `BOMBS`, `bank(slug)`: a problem's files as the benchmarks submit them (no bomb: they measure
  limits, not the judge);
- `scratch_dir(prefix)`: a temporary folder the jails' users can read, removed at the end;
- `smaps_rollup_kb(pid)`: a process's memory totals from /proc.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
PROBLEMS = REPO / "problems"

EXPECT = re.compile(r"^# expect:\s*([A-Z_]+)", re.MULTILINE)
BOMBS = ("TIME_LIMIT_EXCEEDED", "MEMORY_LIMIT_EXCEEDED", "OUTPUT_LIMIT_EXCEEDED")


def bank(slug: str) -> list[tuple[str, str]]:
    """(name, source) of the problem's reference.py ("reference"), then its right/ and wrong/
    files ("right/NAME", "wrong/NAME"), each folder sorted, leaving out the files whose
    `# expect:` is a bomb (`BOMBS`) and `forged_bundle.py` (a forged artifact, not a program)."""
    root = PROBLEMS / slug
    out = []
    for path in [root / "reference.py", *sorted((root / "right").glob("*.py")), *sorted((root / "wrong").glob("*.py"))]:
        source = path.read_text()
        found = EXPECT.search(source)
        if (found and found.group(1) in BOMBS) or path.name == "forged_bundle.py":
            continue
        out.append(("reference" if path.parent == root else f"{path.parent.name}/{path.stem}", source))
    return out


@contextmanager
def scratch_dir(prefix: str, *, keep: bool = False) -> Iterator[Path]:
    """A fresh temporary folder, readable by the jails' users (0755), removed on leaving unless `keep`."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(root, 0o755)
    try:
        yield root
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def smaps_rollup_kb(pid: int) -> dict[str, int]:
    """The totals of /proc/PID/smaps_rollup in kB, by name ("Pss", "Rss", ...).

    Raises:
        OSError: the process is gone or unreadable.
    """
    values = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, _, rest = line.partition(":")
        values[key] = int(rest.split()[0])
    return values
