"""Properties of the real bubblewrap jail, observed from inside by probe submissions."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from graders.pipeline import JudgeConfig, judge_outcome
from graders.verdict import Verdict
from jailside.protocol import SIMULATED_DEVICES_FLAG
from sandbox.jail import JailRequest, child_limits, jail_templates, run_in_jail
from sandbox.jail_limits import JailLimits
from sandbox.supervise import Child
from tests.support import PROBLEMS, REPO, jail_processes

pytestmark = pytest.mark.jail

TRIVIAL_CASE = [{"name": "small", "args": [{"kind": "array", "name": "x", "shape": [4], "dtype": "float32"}]}]


def run_probe(body: str, limits: JailLimits | None = None) -> tuple[dict, object]:
    """Runs a submission whose import executes `body` (which fills the dict `found`) and prints it
    as JSON; returns what it found and the jail outcome."""
    source = (
        "import json, os, sys\nfound = {}\n"
        + textwrap.dedent(body)
        + textwrap.dedent("""
        print("PROBE" + json.dumps(found, default=str))
        import jax.numpy as jnp
        def f(x):
            return jnp.sum(jnp.sin(x))
        """)
    )
    limits = limits or JailLimits()
    outcome = run_in_jail(
        JailRequest(source=source, entry_point="f", cases=TRIVIAL_CASE, cpu_time_limit_s=limits.cpu_time_limit_s),
        limits,
    )
    line = next((ln for ln in outcome.stdout.decode().splitlines() if ln.startswith("PROBE")), None)
    assert line is not None, (outcome.stdout[-2000:], outcome.stderr[-2000:])
    return json.loads(line[len("PROBE") :]), outcome


@pytest.fixture(scope="module", autouse=True)
def _needs_jail(judge_config: JudgeConfig) -> None:
    """Skips (or fails in CI) without bubblewrap, like every jail test."""


def test_runs_as_an_unprivileged_user_without_capabilities() -> None:
    found, outcome = run_probe("""
        found["uid"] = os.getuid(); found["euid"] = os.geteuid(); found["gid"] = os.getgid()
        status = open("/proc/self/status").read()
        found["caps"] = [l for l in status.splitlines() if l.startswith(("CapEff", "CapPrm", "CapBnd", "NoNewPrivs"))]
        """)
    assert found["uid"] != 0 and found["euid"] != 0 and found["gid"] != 0
    caps = dict(line.split(":\t") for line in found["caps"])
    assert caps["CapEff"] == caps["CapPrm"] == "0000000000000000"
    assert caps["NoNewPrivs"].strip() == "1"
    assert judge_outcome(outcome, JailLimits())[0].passed


def test_has_no_network_not_even_to_host_loopback() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    accepted: list[object] = []
    threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True).start()
    try:
        found, _ = run_probe(f"""
            import socket
            for host in ("127.0.0.1", "169.254.169.254", "8.8.8.8"):
                try:
                    s = socket.socket(); s.settimeout(2)
                    s.connect((host, {port} if host == "127.0.0.1" else 80)); found[host] = "connected"
                except OSError as e:
                    found[host] = type(e).__name__
            found["interfaces"] = os.listdir("/sys/class/net") if os.path.exists("/sys/class/net") else []
            """)
    finally:
        listener.close()
    assert accepted == []
    assert all(found[h] != "connected" for h in ("127.0.0.1", "169.254.169.254", "8.8.8.8")), found


def test_sees_no_problems_data_or_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("REMAT_JUDGE_HIDDEN_SEED", "top-secret-seed")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "also-secret")
    targets = [
        str(PROBLEMS / "checkpoint_dot_policy" / "reference.py"),
        str(REPO / "data"),
        str(REPO / "server"),
        "/etc/passwd",
        "/root",
        "/home",
        str(tmp_path),
    ]
    found, _ = run_probe(f"""
        raw = open("/proc/self/environ", "rb").read().split(b"\\0")  # as exec'd, before JAX adds its own
        found["environ"] = dict(kv.decode().split("=", 1) for kv in raw if kv)
        for path in {targets!r}:
            try:
                found[path] = "exists:" + ",".join(os.listdir(path)) if os.path.isdir(path) else open(path).read(50)
            except OSError as e:
                found[path] = type(e).__name__
        found["proc"] = sorted(p for p in os.listdir("/proc") if p.isdigit())
        found["cmdlines"] = [open(f"/proc/{{p}}/cmdline", "rb").read().decode(errors="replace") for p in found["proc"]]
        """)
    env = found["environ"]
    assert "REMAT_JUDGE_HIDDEN_SEED" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert set(env) <= {
        "PATH",
        "HOME",
        "TMPDIR",
        "LANG",
        "JAX_PLATFORMS",
        "JAX_ENABLE_X64",
        "TF_CPP_MIN_LOG_LEVEL",
        "PYTHONUNBUFFERED",
        "XLA_FLAGS",
        "PWD",
    }, env
    assert env["XLA_FLAGS"] == SIMULATED_DEVICES_FLAG  # the devices of every mesh, and nothing else
    runtime_parts = {part for prefix in (sys.base_prefix, sys.prefix) for part in Path(prefix).resolve().parts}
    for path in targets:
        if found[path].startswith("exists:"):  # only directories leading to the mounted Python runtime
            assert set(found[path][len("exists:") :].split(",")) <= runtime_parts, (path, found[path])
        else:
            assert found[path] == "FileNotFoundError", (path, found[path])
    # a private pid namespace: bubblewrap's init and the runner, nothing of the host
    assert len(found["proc"]) <= 3, found["cmdlines"]
    assert not any("remat-judge" in c or "uvicorn" in c or "pytest" in c for c in found["cmdlines"])


def test_filesystem_is_read_only_except_a_size_capped_tmp() -> None:
    limits = JailLimits(file_size_limit_bytes=8 << 20, tmpfs_size_bytes=32 << 20)
    found, outcome = run_probe(
        """
        import signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # see EFBIG instead of dying
        for path in ("/usr/evil", sys.prefix + "/evil", "/judge/evil", "/evil"):
            try:
                open(path, "w").write("x"); found[path] = "written"
            except OSError as e:
                found[path] = type(e).__name__
        open("/tmp/ok", "w").write("fine"); found["tmp"] = open("/tmp/ok").read()
        try:
            with open("/tmp/big", "wb") as f:
                for _ in range(64):
                    f.write(b"\\0" * (1 << 20))
            found["big"] = "written"
        except OSError as e:
            found["big"] = f"{type(e).__name__}:{os.path.getsize('/tmp/big')}"
        try:
            for i in range(8):
                with open(f"/tmp/fill{i}", "wb") as f:
                    for _ in range(7):
                        f.write(b"\\0" * (1 << 20))
            found["fill"] = "written"
        except OSError as e:
            found["fill"] = type(e).__name__
        """,
        limits,
    )
    for path in ("/usr/evil", "/judge/evil", "/evil"):
        assert found[path] in ("OSError", "PermissionError", "FileNotFoundError"), (path, found[path])
    assert found["tmp"] == "fine"
    assert found["big"] == f"OSError:{8 << 20}"  # EFBIG at RLIMIT_FSIZE
    assert found["fill"] == "OSError"  # ENOSPC: the tmpfs is 32 MiB


def test_process_limit_stops_a_fork_bomb_and_nothing_is_left_behind() -> None:
    limits = JailLimits(process_limit=48)
    found, outcome = run_probe(
        """
        import time
        children = 0
        try:
            for _ in range(500):
                if os.fork() == 0:
                    time.sleep(600)
                    os._exit(0)
                children += 1
        except OSError as e:
            found["error"] = type(e).__name__
        found["children"] = children
        """,
        limits,
    )
    assert found["error"] == "BlockingIOError"  # EAGAIN from the pids cgroup or RLIMIT_NPROC
    assert found["children"] < 48
    assert jail_processes() == []  # the sleeping children died with the jail


def test_a_jail_that_never_returns_is_killed_at_the_wall_time_limit() -> None:
    limits = JailLimits(wall_time_limit_s=2.0)
    source = "import time\ndef f(x):\n    time.sleep(60)\n"
    outcome = run_in_jail(JailRequest(source=source, entry_point="f", cases=TRIVIAL_CASE, cpu_time_limit_s=10), limits)
    assert outcome.wall_time_exceeded
    assert outcome.wall_ms < 15_000  # killed near the 2 s limit, not after the 60 s sleep
    check, _ = judge_outcome(outcome, limits)
    assert check.verdict == Verdict.TIME_LIMIT_EXCEEDED
    assert jail_processes() == []


def test_cpu_time_limit_is_enforced_by_the_kernel() -> None:
    limits = JailLimits(wall_time_limit_s=30.0, cpu_time_limit_s=1.0)
    source = "def f(x):\n    while True:\n        pass\n"
    outcome = run_in_jail(JailRequest(source=source, entry_point="f", cases=TRIVIAL_CASE, cpu_time_limit_s=1.0), limits)
    assert outcome.cpu_time_exceeded and not outcome.wall_time_exceeded
    assert outcome.wall_ms < 10_000
    assert judge_outcome(outcome, limits)[0].verdict == Verdict.TIME_LIMIT_EXCEEDED


def test_a_child_has_its_own_cgroup_and_uid_until_it_is_closed() -> None:
    child = Child.start(jail_templates(), child_limits(JailLimits()))
    try:
        if child.cgroup is None:
            pytest.skip("no writable cgroup on this host: RLIMIT fallbacks are in use")
        dirs = list(child.cgroup.dirs.values())
        assert all(d.is_dir() for d in dirs)
        assert child.pid in child.cgroup.pids()  # moved in before its set-up was sent
        uid = child.uid
        assert uid is not None and uid != 0
    finally:
        child.close()
    assert not any(d.exists() for d in dirs)
    from sandbox.uids import JAIL_UIDS

    assert JAIL_UIDS.is_free(uid)  # its uid went back to the pool


def test_the_runtime_stays_importable_under_a_private_tmp() -> None:
    """A child's private /tmp must not hide the interpreter or the virtualenv (a checkout under
    /tmp, as CI's is): modules nobody imported yet still load in the jail."""
    found, outcome = run_probe("""
        import importlib
        for name in ("wave", "jax.scipy.special", "numpy.polynomial"):
            try:
                importlib.import_module(name); found[name] = "ok"
            except Exception as e:
                found[name] = f"{type(e).__name__}: {e}"
        found["prefix"] = os.path.isdir(sys.prefix) and os.path.isdir(sys.base_prefix)
        """)
    assert found == {"wave": "ok", "jax.scipy.special": "ok", "numpy.polynomial": "ok", "prefix": True}, found


@pytest.mark.skipif(os.geteuid() != 0, reason="starting a process as a jail uid needs root")
def test_the_leak_check_finds_a_process_left_on_a_free_jail_uid() -> None:
    """The positive control of `jail_processes`: a process running as a jail uid that no judge holds
    and whose last holder left clean is reported, and is gone from the report once killed."""
    from sandbox.jail import JAIL_UIDS

    uid = next(u for u in reversed(JAIL_UIDS.uids) if JAIL_UIDS.is_free(u) and JAIL_UIDS.left_clean(u))
    leftover = subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "sleep", "60"])
    try:
        deadline = time.monotonic() + 10
        while not any(line.split()[1] == str(leftover.pid) for line in jail_processes()):
            assert time.monotonic() < deadline, "the leftover was not reported"
            time.sleep(0.05)
    finally:
        leftover.kill()
        leftover.wait()
    assert all(line.split()[1] != str(leftover.pid) for line in jail_processes())
