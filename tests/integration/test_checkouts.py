"""Every child the judge starts imports the code of the checkout that started it, not the checkout
the virtualenv's editable install points at (a second checkout, such as a git worktree elsewhere,
shares the virtualenv)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO, jail_available

pytestmark = pytest.mark.jail

MARKER = "checkout-marker"
# Appended to the copy's packages only: a process that imports the copy's code says so on stderr.
SAY_SO = f'\nimport sys as _sys\nprint(f"{MARKER} {{__name__}} {{__file__}}", file=_sys.stderr, flush=True)\n'

# Run in the copy: starts the verifier and jail templates from the copy's modules and prints what
# each template wrote on its stderr (the markers of the packages it imported), one line each.
START_TEMPLATES = """
import json, sys, time
from graders.verifier import client
from sandbox import jail
found = {"host": client.__file__}
for name, templates in (("verifier", client.verifier_templates()), ("jail", jail.jail_templates())):
    template = templates.get()  # imported everything and said it is ready
    deadline = time.monotonic() + 10
    while b"checkout-marker" not in template.stderr and time.monotonic() < deadline:
        time.sleep(0.05)  # the template's stderr is read by a thread
    time.sleep(0.2)  # and the lines after the first
    found[name] = bytes(template.stderr).decode("utf-8", "replace")
    templates.close()
print(json.dumps(found))
"""


def copy_checkout(target: Path) -> Path:
    """The judge's packages copied to `target` (a checkout at another path), each marked."""
    for package in ("graders", "jailside", "sandbox"):
        shutil.copytree(REPO / package, target / package, ignore=shutil.ignore_patterns("__pycache__"))
        with open(target / package / "__init__.py", "a") as f:
            f.write(SAY_SO)
    return target


@pytest.mark.skipif(jail_available() is not None, reason=str(jail_available()))
def test_templates_import_the_checkout_that_started_them(tmp_path: Path) -> None:
    copy = copy_checkout(tmp_path / "other-checkout")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    done = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(copy)!r})\n{START_TEMPLATES}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["host"] == str(copy / "graders" / "verifier" / "client.py")
    # the verifier template ran on the host: the copy's own packages, at the copy's paths
    assert f"{MARKER} graders {copy / 'graders' / '__init__.py'}" in found["verifier"], found["verifier"]
    assert f"{MARKER} jailside {copy / 'jailside' / '__init__.py'}" in found["verifier"], found["verifier"]
    # the jail template sees only the jailside package, mounted at /judge/jailside: the copy's
    assert f"{MARKER} jailside /judge/jailside/__init__.py" in found["jail"], found["jail"]
    assert f"{MARKER} graders" not in found["jail"] and f"{MARKER} sandbox" not in found["jail"]
