"""Helpers shared by tests (importable as `tests.support`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
PROBLEMS = REPO / "problems"
TEST_SEED = "test-seed"  # the hidden-input seed of the library gradings and of every test server
# where tests/conftest.py's `shared_expectation_cache` puts this run's expectation cache
SHARED_CACHE_VARIABLE = "TESTS_SHARED_EXPECTATION_CACHE"


def shared_cache_env() -> dict[str, str]:
    """REMAT_JUDGE_CACHE_DIR for a server, worker or command of this run: the run's shared
    expectation cache (none outside pytest)."""
    import os

    found = os.environ.get(SHARED_CACHE_VARIABLE)
    return {"REMAT_JUDGE_CACHE_DIR": found} if found else {}


def jail_available() -> str | None:
    """Why the real jail cannot run here, or None when it can."""
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (make test installs it when run as root)"
    return None


def jail_processes(zombie_grace_s: float = 30.0) -> list[str]:
    """`ps` lines of processes running as a jail uid that no judge process holds and whose last
    holder gave it back as clean: leftovers of a finished jail (there must be none). Jails of other
    judge processes running now are not counted, nor uids of a judge another test killed mid-job
    (`UidPool.left_clean`: the next `take` of such a uid kills what is left, by design).

    A uid counts only if it was free both before and after the `ps` snapshot. A child's teardown
    runs in the background (`Child.close(wait=False)`): a killed process can still be in the
    snapshot as a zombie, and its uid given back (once /proc holds nothing of it) before the check
    that follows; that uid was not free before the snapshot. (Seen in CI: one `<defunct>` line.)

    A live leftover is reported at once. A zombie (dead, holding only its pid) is reported only if
    its parent has not reaped it within `zombie_grace_s`. A uid goes back clean only once /proc
    holds nothing of it, zombies included (`UidPool.release`; one not reaped in time makes it go
    back not clean, which this check leaves out), so a zombie here is a bug; the grace stays for a
    judge process of older code sharing the host's uids, whose uids went back once their cgroup
    was empty (seen under load: one zombie for about 8 s).
    """
    from sandbox.jail import JAIL_UIDS

    def unheld_and_clean(uids: Iterable[int]) -> set[int]:
        return {uid for uid in uids if JAIL_UIDS.is_free(uid) and JAIL_UIDS.left_clean(uid)}

    deadline = time.monotonic() + zombie_grace_s
    while True:
        free_before = unheld_and_clean(JAIL_UIDS.uids)
        out = subprocess.run(["ps", "-eo", "uid=,pid=,stat=,args="], capture_output=True, text=True, check=True).stdout
        free = unheld_and_clean(free_before)
        found = [line for line in out.splitlines() if line.split() and int(line.split()[0]) in free]
        if not found or any(not line.split()[2].startswith("Z") for line in found):
            return found
        if time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it, from /proc/*/stat."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo += children.get(p, [])
    return found


def memory_contains(pid: int, needles: list[bytes]) -> list[bytes]:
    """Which `needles` occur anywhere in the readable memory of `pid` (as root, via /proc/PID/mem)."""
    found: set[bytes] = set()
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if not perms.startswith("r"):
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            if end - start > 1 << 30:
                continue
            try:
                mem.seek(start)
                chunk = mem.read(end - start)
            except (OSError, ValueError, OverflowError):
                continue
            found.update(n for n in needles if n in chunk)
    return sorted(found)


def start_cli(
    args: list[str], env: dict[str, str], log: Path, *, ready_url: str, timeout_s: float = 60, verify: bool = True
) -> subprocess.Popen[bytes]:
    """Starts `remat-judge ARGS` in a session of its own (output appended to `log`) and waits
    until `ready_url` answers 200.

    Raises:
        AssertionError: the process exited, or did not get ready in `timeout_s` (with its log's tail).
    """
    import sys
    import time

    cli = str(Path(sys.executable).parent / "remat-judge")
    with log.open("ab") as out:  # the child has its own copy of the descriptor
        proc = subprocess.Popen([cli, *args], stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            if httpx.get(ready_url, timeout=1, verify=verify).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    raise AssertionError(f"`remat-judge {args[0]}` did not start: " + log.read_text()[-3000:])


class Server:
    """A real `remat-judge serve` process on a free loopback port, with its own data directory."""

    def __init__(
        self,
        data_dir: Path,
        *,
        workers: int = 2,
        env: dict[str, str | None] | None = None,
        tls: tuple[Path, Path] | None = None,
    ):
        """`tls`: (certificate, key) PEM files: the server speaks HTTPS (`serve --ssl-certfile`)."""
        import os
        import socket

        self.data_dir, self.workers, self.tls = data_dir, workers, tls
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        # anonymous API use (the classroom demo mode) unless a test sets it "false": tests that are
        # not about API keys submit without one
        self.env = {
            **os.environ,
            "REMAT_JUDGE_HIDDEN_SEED": TEST_SEED,
            **shared_cache_env(),
            "REMAT_JUDGE_WAIT_TIMEOUT_S": "90",
            "REMAT_JUDGE_ALLOW_ANONYMOUS_API": "true",
            "REMAT_JUDGE_PROBLEMS_DIR": str(PROBLEMS),
            # each test server has its own cache: warming all the bank's versions in it would only
            # compete with the test's own grading (tests/integration/test_warm_expectations.py
            # turns it on)
            "REMAT_JUDGE_WARM_EXPECTATIONS": "false",
            **(env or {}),
        }
        # a value of None in `env` unsets the variable (a test about building: its own cache)
        self.env = {k: v for k, v in self.env.items() if v is not None}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = data_dir / f"server-{self.port}.log"

    def start(self) -> Server:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        tls = ["--ssl-certfile", str(self.tls[0]), "--ssl-keyfile", str(self.tls[1])] if self.tls else []
        self.proc = start_cli(
            [
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--data-dir",
                str(self.data_dir),
                "--workers",
                str(self.workers),
                *tls,
            ],
            self.env,
            self.log,
            ready_url=f"{self.url}/api/v1/healthz",
            verify=self.tls is None,
        )
        return self

    def stop(self, sig: int = 15) -> None:
        """Sends `sig` (SIGTERM by default; SIGKILL to simulate a crash) to the server's group."""
        import os

        assert self.proc is not None
        os.killpg(self.proc.pid, sig)
        self.proc.wait(30)

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=120, verify=self.tls is None)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def remat_judge(*args: str, env: dict[str, str], timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """Runs the real `remat-judge` command line once and returns what it did."""
    import sys

    cli = str(Path(sys.executable).parent / "remat-judge")
    env = {"REMAT_JUDGE_PROBLEMS_DIR": str(PROBLEMS), **env}  # the repository's, wherever pytest runs
    return subprocess.run([cli, *args], env=env, capture_output=True, text=True, timeout=timeout_s)


class Worker:
    """A real `remat-judge worker` process (distributed mode), with its own log file."""

    def __init__(self, data_dir: Path, env: dict[str, str | None], *, concurrency: int = 1, name: str = "worker"):
        import os

        self.data_dir, self.concurrency = data_dir, concurrency
        self.env = {
            **os.environ,
            "REMAT_JUDGE_PROBLEMS_DIR": str(PROBLEMS),
            "REMAT_JUDGE_WARM_EXPECTATIONS": "false",  # as in Server: the test's grading alone
            **shared_cache_env(),
            **env,
        }
        self.env = {k: v for k, v in self.env.items() if v is not None}  # None unsets, as in Server
        self.metrics_port = free_port()
        self.log = data_dir / f"{name}-{self.metrics_port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Worker:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.proc = start_cli(
            [
                "worker",
                "--concurrency",
                str(self.concurrency),
                "--data-dir",
                str(self.data_dir),
                "--metrics-port",
                str(self.metrics_port),
            ],
            self.env,
            self.log,
            ready_url=f"http://127.0.0.1:{self.metrics_port}/metrics",
        )
        return self

    def metrics(self) -> str:
        return httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).text

    def stop(self, sig: int = 15) -> None:
        """Sends `sig` to the worker's process group (its templates and children too); SIGKILL
        simulates a machine dying mid-job."""
        import os

        assert self.proc is not None
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
        self.proc.wait(150)


def self_signed_certificate(folder: Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> tuple[Path, Path]:
    """A self-signed certificate and its key (PEM files in `folder`) for `hosts`: for a judge
    serving HTTPS in tests (clients skip verification)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])])
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = folder / "judge-cert.pem", folder / "judge-key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str:
    """Debian's Chromium; skips the test without it (fails it under CI=1, where it must run)."""
    import os

    import pytest

    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        reason = "no Chromium (make test installs Debian's chromium when run as root)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return found
