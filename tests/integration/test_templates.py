"""The fork-server templates: they come back when they die, are replaced after N forks, hold no
secret, and fork verifier children that run unprivileged without a network.

Observed from outside through /proc (we are the judge's user; as root we may read any process),
with real templates, real children and the real pipeline."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace
from pathlib import Path

import pytest

from graders.config import JudgeConfig
from graders.pipeline import grade
from graders.problems.problem import Problem
from graders.verdict import Verdict
from graders.verifier.client import Verifier, verifier_templates
from jailside.protocol import SIMULATED_DEVICES_FLAG
from sandbox.jail import JailRequest, jail_templates, run_in_jail, template_spec
from sandbox.jail_limits import JailLimits
from sandbox.templates import Template, Templates
from tests.support import descendants, memory_contains

pytestmark = pytest.mark.jail

TRIVIAL_CASE = [{"name": "small", "args": [{"kind": "array", "name": "x", "shape": [4], "dtype": "float32"}]}]
TRIVIAL = JailRequest(
    source="def f(x):\n    return (x * x).sum()\n", entry_point="f", cases=TRIVIAL_CASE, cpu_time_limit_s=10
)


def _python_of(template: Template) -> int:
    """The template's Python process (below enter.py's exec and, for the jail, bubblewrap)."""
    pid = template.pid()
    assert pid is not None
    for p in descendants(pid):
        try:
            if b"python" in Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[0]:
                return p
        except OSError:
            continue
    raise AssertionError("no python process under the template")


def test_the_model_libraries_are_imported_before_the_fork() -> None:
    """A child finds Flax, NNX, Equinox and optax already imported: it pays no import."""
    probe = (
        "import sys\n"
        "missing = [m for m in ('flax.linen', 'flax.nnx', 'equinox', 'optax') if m not in sys.modules]\n"
        "assert not missing, f'not preloaded: {missing}'\n"
        "def f(x):\n    return (x * x).sum()\n"
    )
    outcome = run_in_jail(replace(TRIVIAL, source=probe), JailLimits(), jail_templates())
    assert outcome.exit_code == 0 and outcome.bundle, outcome.stderr[-800:]


def test_a_dead_template_is_replaced_by_the_next_fork() -> None:
    templates = jail_templates()
    assert run_in_jail(TRIVIAL, JailLimits(), templates).exit_code == 0
    template = templates.get()
    started = templates.started
    os.killpg(template.pid(), signal.SIGKILL)
    template.proc.wait(timeout=10)
    outcome = run_in_jail(TRIVIAL, JailLimits(), templates)
    assert outcome.exit_code == 0 and outcome.bundle
    assert templates.started == started + 1


def test_a_template_is_replaced_after_max_forks() -> None:
    templates = Templates(template_spec(), max_forks=2)
    try:
        pids = []
        for _ in range(3):
            assert run_in_jail(TRIVIAL, JailLimits(), templates).exit_code == 0
            pids.append(templates.current.pid())
        assert pids[0] == pids[1] != pids[2]
        assert templates.started == 2
    finally:
        templates.close()


def test_templates_hold_no_secret(
    judge_config: JudgeConfig, dot_problem: Problem, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = "instructor-token-" + os.urandom(8).hex()
    monkeypatch.setenv("REMAT_JUDGE_INSTRUCTOR_TOKEN", token)
    monkeypatch.setenv("REMAT_JUDGE_HIDDEN_SEED", judge_config.seed.decode())
    report = grade(dot_problem.reference_path.read_text(), dot_problem, judge_config)
    assert report.verdict == Verdict.ACCEPTED  # both templates forked a child that used the seed
    secrets = [
        judge_config.seed,
        judge_config.seed.hex().encode(),
        token.encode(),
        str(judge_config.cache_dir).encode(),
        str(dot_problem.reference_path).encode(),
    ]
    for templates in (jail_templates(), verifier_templates()):
        pid = _python_of(templates.get())
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        assert not [s for s in secrets if s in environ], environ
        variables = dict(kv.split(b"=", 1) for kv in environ.split(b"\0") if kv)
        assert variables[b"XLA_FLAGS"] == SIMULATED_DEVICES_FLAG.encode()  # every mesh's devices, nothing else
        assert set(variables) <= {
            b"PATH",
            b"HOME",
            b"TMPDIR",
            b"LANG",
            b"JAX_PLATFORMS",
            b"JAX_ENABLE_X64",
            b"TF_CPP_MIN_LOG_LEVEL",
            b"PYTHONUNBUFFERED",
            b"XLA_FLAGS",
            b"PWD",
        }  # bubblewrap sets PWD for --chdir
        targets = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        opened_files = [t for t in targets if t.startswith("/") and not t.startswith("/dev/")]
        assert not [
            t
            for t in opened_files
            if "problems" in t or str(judge_config.cache_dir) in t or t.endswith((".db", ".sqlite", "session_secret"))
        ], targets
        assert memory_contains(pid, secrets) == [], templates.spec.name


def test_a_verifier_child_is_unprivileged_and_offline(judge_config: JudgeConfig, dot_problem: Problem) -> None:
    verifier = Verifier.start(dot_problem, judge_config)
    try:
        verifier.wait_ready()  # locked down, waiting for the bundle on stdin
        pid = verifier.child.pid
        assert pid is not None
        status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
        uids = status["Uid"].split()
        if os.geteuid() == 0:
            assert all(u == uids[0] for u in uids) and int(uids[0]) != 0
        for cap in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb"):
            assert int(status[cap], 16) == 0, (cap, status[cap])
        assert status["NoNewPrivs"].strip() == "1" and status["Seccomp"].strip() == "2"
        assert os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
        interfaces = [line.split(":")[0].strip() for line in Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]]
        assert interfaces == ["lo"]
        assert pid in (verifier.child.cgroup.pids() if verifier.child.cgroup else [pid])
    finally:
        verifier.close()


def test_a_closed_child_leaves_no_process_cgroup_or_uid(judge_config: JudgeConfig, dot_problem: Problem) -> None:
    verifier = Verifier.start(dot_problem, judge_config)
    verifier.wait_ready()
    pid, cgroup, uid = verifier.child.pid, verifier.child.cgroup, verifier.child.uid
    dirs = list(cgroup.dirs.values()) if cgroup else []
    verifier.close()
    deadline = time.monotonic() + 5
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[1][:3]
    assert not any(d.exists() for d in dirs)
    if uid is not None:
        from sandbox.uids import JAIL_UIDS

        assert JAIL_UIDS.is_free(uid)
