"""Helpers shared by tests (importable as `tests.support`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROBLEMS = REPO / "problems"


def jail_available() -> str | None:
    """Why the real jail cannot run here, or None when it can."""
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (make test installs it when run as root)"
    return None


def jail_processes() -> list[str]:
    """`ps` lines of processes running as a jail uid that no judge process holds: leftovers of a
    finished jail (there must be none). Jails of other judge processes running now are not counted."""
    from sandbox.jail import JAIL_UIDS

    out = subprocess.run(["ps", "-eo", "uid=,pid=,stat=,args="], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines()
            if line.split() and int(line.split()[0]) in JAIL_UIDS.uids and JAIL_UIDS.is_free(int(line.split()[0]))]
