"""The habits of pyproject.toml, checked in `make test`: ruff's lint rules and formatting
([tool.ruff]) and mypy's types ([tool.mypy]: strict on jailside, sandbox and graders)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support import REPO

BIN = Path(sys.executable).parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / args[0]), *args[1:]], cwd=REPO, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing_to_fix() -> None:
    done = _run("ruff", "check", "--no-cache", "--output-format", "concise", ".")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_the_code_is_formatted() -> None:
    done = _run("ruff", "format", "--no-cache", "--check", ".")
    assert done.returncode == 0, "run `.venv/bin/ruff format .`:\n" + done.stdout[-4000:] + done.stderr[-2000:]


def test_mypy_finds_no_type_errors() -> None:
    """Strict on jailside, sandbox and graders; the server with check_untyped_defs. Incremental
    (`.mypy_cache`, git-ignored): a clean clone checks everything, a rerun only what changed."""
    done = _run("mypy")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
