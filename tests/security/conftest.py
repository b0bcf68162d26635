"""Fixtures of the attack suite: host-side bait the attacks aim at, and the "unharmed" checks."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import secrets
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from graders.pipeline import JudgeConfig
from tests.support import REPO


class Bait:
    """Things on the host that an attack would reach if containment failed.

    Attributes:
        secret: a value put in this process's environment and in a canary file.
        canary: a file in the host's /tmp holding the secret.
        tcp_port: a TCP listener on host loopback; `tcp_hits` counts connections it accepted.
        unix_path: a Unix socket file on the host; `abstract_name`: an abstract Unix socket name.
    """

    def __init__(self, root: Path):
        self.secret = "remat-secret-" + secrets.token_hex(8)
        self.canary = root / "canary.txt"
        self.canary.write_text(self.secret)
        self.tcp_hits = 0
        self._sockets: list[socket.socket] = []
        tcp = socket.socket()
        tcp.bind(("127.0.0.1", 0))
        tcp.listen(16)
        self.tcp_port = tcp.getsockname()[1]
        self.unix_path = str(root / "bait.sock")
        unix = socket.socket(socket.AF_UNIX)
        unix.bind(self.unix_path)
        unix.listen(16)
        self.abstract_name = "remat-bait-" + secrets.token_hex(6)
        abstract = socket.socket(socket.AF_UNIX)
        abstract.bind("\0" + self.abstract_name)
        abstract.listen(16)
        for s in (tcp, unix, abstract):
            self._sockets.append(s)
            threading.Thread(target=self._accept, args=(s,), daemon=True).start()

    def _accept(self, s: socket.socket) -> None:
        while True:
            try:
                conn, _ = s.accept()
            except OSError:
                return
            self.tcp_hits += 1
            conn.close()

    def close(self) -> None:
        for s in self._sockets:
            s.close()


@pytest.fixture(scope="session")
def bait(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bait]:
    root = tmp_path_factory.mktemp("bait")
    found = Bait(root)
    os.environ["REMAT_JUDGE_HIDDEN_SEED"] = found.secret  # what a server's environment would hold
    yield found
    found.close()
    os.environ.pop("REMAT_JUDGE_HIDDEN_SEED", None)


def snapshot(paths: list[Path]) -> dict[str, str]:
    """Path -> sha256 of every file under `paths` (symlinks recorded by target, never followed)."""
    out: dict[str, str] = {}
    for root in paths:
        if not root.exists():
            continue
        for path in [root] if root.is_file() else sorted(root.rglob("*")):
            if "__pycache__" in path.parts:
                continue
            if path.is_symlink():
                out[str(path)] = "link:" + os.readlink(path)
            elif path.is_file():
                out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="session")
def judge_config(judge_config: JudgeConfig, tmp_path_factory: pytest.TempPathFactory) -> JudgeConfig:
    """The suite's judge configuration (tests/conftest.py) with a reference cache of the attacks'
    own: the cache is watched (`watched`), so no other xdist worker may write into it while an
    attack runs."""
    return dataclasses.replace(judge_config, cache_dir=tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="session")
def watched(bait: Bait, judge_config: JudgeConfig) -> list[Path]:
    """Host files no submission may change: the code, the problems, the judge's cache, the bait."""
    return [
        REPO / "problems",
        REPO / "graders",
        REPO / "sandbox",
        REPO / "server",
        judge_config.cache_dir,
        bait.canary.parent,
    ]
