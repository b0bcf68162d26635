"""Real PostgreSQL and Redis servers for tests, on free loopback ports, in temporary folders.

Fixtures (imported by tests/conftest.py):

- `postgres_server` (session): one PostgreSQL cluster (initdb, trust authentication on
  127.0.0.1 only, fsync off); `.url_for(name)` creates a fresh database and returns its URL.
- `postgres_url` (function): a fresh database of that cluster for one test.
- `redis_server` (session): one shared redis-server without persistence; `redis_url`
  (function) flushes it (and starts it again if a test stopped it) and returns its URL.
- `redis_factory` (function): `redis_factory()` starts a private redis-server for tests that
  stop and start it (outages); every one is stopped when the test ends.

A missing binary skips the tests that need it, with the reason; under CI (CI=1) it fails them.
The binaries are looked up on PATH, then in /usr/lib/postgresql/*/bin. Run as root, PostgreSQL
runs as the `postgres` user (it refuses to run as root) in a 0700 folder that user owns.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

__all__ = [
    "PostgresServer",
    "RedisServer",
    "postgres_server",
    "postgres_url",
    "redis_factory",
    "redis_server",
    "redis_url",
]

START_TIMEOUT_S = 60.0


def _unavailable(reason: str) -> None:
    """Skips the test with `reason`, or fails it under CI (CI=1), where every service must run."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_binary(name: str) -> str | None:
    """`name` on PATH, else the newest /usr/lib/postgresql/<version>/bin/`name`."""
    found = shutil.which(name)
    if found is None:
        candidates = sorted(
            glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: [int(x) for x in re.findall(r"\d+", p)]
        )
        found = candidates[-1] if candidates else None
    return found


def _wait(ready: Callable[[], bool], *, timeout_s: float, what: str, log: Path, alive: Callable[[], bool]) -> None:
    """Polls `ready` until it is true; raises RuntimeError with the end of `log` on timeout or when
    `alive` turns false."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():
            return
        if not alive():
            failure = "exited before it answered"
            break
        time.sleep(0.05)
    else:
        failure = f"did not answer within {timeout_s:.0f} s"
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"
    raise RuntimeError(f"{what} {failure}; its log ends:\n{tail}")


class PostgresServer:
    """A PostgreSQL cluster of its own: `initdb` into a temporary folder, `pg_ctl start` on a free
    port of 127.0.0.1 (socket in the same folder), superuser `remat`, trust authentication.

    Attributes:
        port: the TCP port it listens on (127.0.0.1 only).
        root: the folder holding the cluster (`data/`), its socket and its log (`server.log`).
    """

    SUPERUSER = "remat"

    def __init__(self, bin_dir: Path):
        self.bin_dir = bin_dir
        self.port = free_port()
        self._as_user = os.geteuid() == 0
        self.root = Path(tempfile.mkdtemp(prefix="remat-pg-", dir="/tmp"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._names = itertools.count(1)
        if self._as_user:
            owner = pwd.getpwnam("postgres")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
        os.chmod(self.root, 0o700)

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Runs a PostgreSQL program (as `postgres` when we are root); raises RuntimeError with its output."""
        done = subprocess.run(
            [str(self.bin_dir / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            cwd=self.root,
            **self._identity(),
            env={**os.environ, "LC_ALL": "C"},
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed ({done.returncode}): {done.stdout}{done.stderr}")
        return done

    def _identity(self) -> dict[str, object]:
        """subprocess arguments that run a program as `postgres` (only when we are root)."""
        if not self._as_user:
            return {}
        return {"user": "postgres", "group": "postgres", "extra_groups": []}

    def start(self) -> PostgresServer:
        """Creates the cluster (first call only), starts the server and waits until it answers.

        Raises:
            RuntimeError: initdb or pg_ctl failed, or the server did not answer in time.
        """
        if not self.data.exists():
            self._run(
                "initdb",
                "-D",
                str(self.data),
                "-U",
                self.SUPERUSER,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", self._options, "-w", "-t", "60", "start")
        _wait(
            self._answers,
            timeout_s=START_TIMEOUT_S,
            what=f"PostgreSQL on port {self.port}",
            log=self.log,
            alive=lambda: True,
        )
        return self

    @property
    def _options(self) -> str:
        return (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            f"-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )

    def restart(self, mode: str = "fast") -> None:
        """`pg_ctl restart -m MODE` (fast: sessions are cut, as an operator's restart does); the
        server's output goes to its log, as at start (else pg_ctl's pipe never closes)."""
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-o",
            self._options,
            "-m",
            mode,
            "-w",
            "-t",
            "60",
            "restart",
        )

    def down(self, mode: str = "fast") -> None:
        """Stops the server (`pg_ctl stop -m MODE`), keeping the cluster; `start()` brings it back."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def _answers(self) -> bool:
        import psycopg

        try:
            with psycopg.connect(self._dsn("postgres"), connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def _dsn(self, dbname: str) -> str:
        return f"postgresql://{self.SUPERUSER}@127.0.0.1:{self.port}/{dbname}"

    def url_for(self, name: str | None = None) -> str:
        """Creates a new, empty database and returns its URL, `postgresql://remat@127.0.0.1:PORT/NAME`.

        Args:
            name: a base for the database's name (made unique and lowercase; letters, digits, `_`).
        """
        import psycopg

        base = re.sub(r"[^a-z0-9_]+", "_", (name or "db").lower()).strip("_")[:40] or "db"
        dbname = f"t{next(self._names)}_{base}"
        with psycopg.connect(self._dsn("postgres"), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{dbname}"')
        return self._dsn(dbname)

    def stop(self) -> None:
        """Stops the server at once (no checkpoint: the cluster is thrown away) and removes its folder."""
        try:
            if (self.data / "postmaster.pid").exists():
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


class RedisServer:
    """A redis-server on a fixed free port of 127.0.0.1, without persistence (`--save ""`,
    `--appendonly no`): stopping it loses every key, as an outage of a cache-only Redis does.

    Attributes:
        port: its TCP port (the same across `stop()` and `start()`).
        url: `redis://127.0.0.1:PORT/0`.
    """

    def __init__(self, binary: str, workdir: Path):
        self.binary, self.workdir = binary, workdir
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.log = workdir / f"redis-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> RedisServer:
        """Starts the server (again, on the same port) and waits until it answers PING.

        Raises:
            RuntimeError: it exited or did not answer within START_TIMEOUT_S.
        """
        if self.running:
            return self
        self.workdir.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    self.binary,
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    str(self.workdir),
                    "--daemonize",
                    "no",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _wait(
            self.ping,
            timeout_s=START_TIMEOUT_S,
            what=f"redis-server on port {self.port}",
            log=self.log,
            alive=lambda: self.running,
        )
        return self

    def ping(self) -> bool:
        """Whether the server answers PING now."""
        import redis

        client = redis.Redis.from_url(self.url, socket_timeout=1, socket_connect_timeout=1)
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()

    def flush(self) -> None:
        """Deletes every key (FLUSHALL)."""
        import redis

        with redis.Redis.from_url(self.url, socket_timeout=5) as client:
            client.flushall()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Sends `sig` (SIGTERM: a clean shutdown; SIGKILL: a crash) and waits for the exit."""
        if not self.running:
            return
        assert self.proc is not None
        self.proc.send_signal(sig)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(15)


def _postgres_bin_dir() -> Path | str:
    """The folder of initdb, pg_ctl and postgres; or why PostgreSQL cannot run here."""
    # symlinks resolved: pg_ctl runs the `postgres` next to its real location
    found = {name: find_binary(name) for name in ("initdb", "pg_ctl", "postgres")}
    found = {name: os.path.realpath(path) if path else None for name, path in found.items()}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        return (
            f"PostgreSQL is not installed ({', '.join(missing)} not on PATH nor in /usr/lib/postgresql/*/bin; "
            f"`make test` installs it when run as root)"
        )
    folders = {Path(path).parent for path in found.values() if path}
    if len(folders) != 1:
        return f"initdb, pg_ctl and postgres are in different folders: {sorted(map(str, folders))}"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root, PostgreSQL needs a `postgres` user to run as (the Debian package makes it)"
    return folders.pop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server for the whole session (see `PostgresServer`)."""
    bin_dir = _postgres_bin_dir()
    if isinstance(bin_dir, str):
        _unavailable(bin_dir)
    server = PostgresServer(bin_dir)  # type: ignore[arg-type]
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer, request: pytest.FixtureRequest) -> str:
    """A fresh, empty database for this test: `postgresql://remat@127.0.0.1:PORT/NAME`."""
    return postgres_server.url_for(request.node.name)


def _redis_binary() -> str:
    found = find_binary("redis-server")
    if found is None:
        _unavailable("redis-server is not installed (`make test` installs it when run as root)")
    return found  # type: ignore[return-value]


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server shared by the session's tests (use `redis_url` to get it flushed)."""
    server = RedisServer(_redis_binary(), tmp_path_factory.mktemp("redis"))
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The shared redis-server's URL, running and empty for this test."""
    redis_server.start()
    redis_server.flush()
    return redis_server.url


@pytest.fixture
def redis_factory(tmp_path: Path) -> Iterator[Callable[[], RedisServer]]:
    """`redis_factory()` starts a redis-server of this test's own (which it may stop and start);
    all are stopped when the test ends."""
    binary = _redis_binary()
    started: list[RedisServer] = []

    def make() -> RedisServer:
        server = RedisServer(binary, tmp_path / f"redis{len(started)}")
        started.append(server)
        return server.start()

    try:
        yield make
    finally:
        for server in started:
            server.stop()
