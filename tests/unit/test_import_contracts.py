"""The import contracts of pyproject.toml's [tool.importlinter], checked by import-linter.

They keep JAX out of the server process (it grades through child processes), keep the jail side
(`jailside`, mounted into the jail) free of the judge's own packages, and keep the process layer
and the jail's protocol on the standard library."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support import REPO


def test_import_contracts_hold() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run([str(lint), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
