"""A cache or marker write that fails (a full disk) leaves no temporary file behind
(`graders.atomic_files.replace_atomically`): the result cache and a reference's recorded failure
stay best effort (logged, not raised), the publication marker and the expectation cache raise as
before."""

from __future__ import annotations

import errno
import io
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from graders import atomic_files
from graders.atomic_files import replace_atomically
from graders.problems.publication import MARKER, mark_published, published_version
from graders.reference import expectation_files
from graders.reference.expectation import Expectations
from graders.reference.expectation_files import save_expectations
from graders.reference.failures import ReferenceCheckError, record_failure, recorded_failure
from graders.verdict import Verdict
from graders.verifier.client import ResultCache
from graders.verifier.events import Result

RESULT = Result(
    verdict=Verdict.ACCEPTED, score=1.0, checks=[], residuals=None, problem_version="v1", jax_version="0", verify_ms=1.0
)


def _no_space(*_: Any, **__: Any) -> Any:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class _FullDiskFile(io.FileIO):
    """A file on a full disk: it is created, and part of a write goes in before ENOSPC."""

    def write(self, data: Any) -> int:
        super().write(bytes(data)[:1])
        _no_space()
        return 0


def _leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".tmp") or p.name.startswith(".tmp")]


@pytest.fixture(params=["write", "rename"])
def full_disk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """The disk fills up while the temporary file is written, or before it is renamed into place
    (`monkeypatch.undo()` frees it)."""
    if request.param == "write":
        monkeypatch.setattr(atomic_files.os, "fdopen", lambda fd, mode: _FullDiskFile(fd, "wb", closefd=True))
    else:
        monkeypatch.setattr(atomic_files.os, "replace", _no_space)
    return monkeypatch


def test_a_failed_replacement_raises_keeps_the_old_file_and_removes_its_temporary_file(
    tmp_path: Path, full_disk: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "entry.json"
    target.write_bytes(b"old")
    with pytest.raises(OSError) as raised:
        replace_atomically(target, b"new")
    assert raised.value.errno == errno.ENOSPC
    assert target.read_bytes() == b"old"
    assert sorted(tmp_path.iterdir()) == [target]
    full_disk.undo()
    replace_atomically(target, b"new", mode=0o600)
    assert target.read_bytes() == b"new" and stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(tmp_path.iterdir()) == [target]


def test_a_result_cache_write_that_fails_is_logged_and_leaves_no_temporary_file(
    tmp_path: Path, full_disk: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    cache = ResultCache(tmp_path / "results")
    key = "ab" + "0" * 62
    cache.put(key, RESULT)  # best effort: logged, not raised
    assert "cannot store a verifier result" in caplog.text
    assert _leftovers(tmp_path) == []
    assert cache.get(key) is None
    full_disk.undo()
    cache.put(key, RESULT)  # the disk has room again: stored
    assert cache.get(key) == RESULT
    assert _leftovers(tmp_path) == []


def test_a_reference_failure_record_that_fails_is_logged_and_leaves_no_temporary_file(
    tmp_path: Path, full_disk: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "cache" / "entry"
    record_failure(directory, ReferenceCheckError("deterministic", "differs"))  # best effort: logged
    assert "cannot record the reference failure" in caplog.text
    assert _leftovers(tmp_path) == []
    assert recorded_failure(directory) is None
    full_disk.undo()
    record_failure(directory, ReferenceCheckError("deterministic", "differs"))
    assert (found := recorded_failure(directory)) is not None and found.failures == [("deterministic", "differs")]


def test_a_publication_marker_that_fails_raises_and_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mark_published(tmp_path, "aaaaaaaaaaaa")
    monkeypatch.setattr(atomic_files.os, "replace", _no_space)
    with pytest.raises(OSError) as raised:
        mark_published(tmp_path, "bbbbbbbbbbbb")
    assert raised.value.errno == errno.ENOSPC
    assert published_version(tmp_path) == "aaaaaaaaaaaa"  # the old marker stays
    assert sorted(p.name for p in tmp_path.iterdir()) == [MARKER]


def test_an_expectation_cache_write_that_fails_raises_and_leaves_no_temporary_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(expectation_files, "_write_arrays", _no_space)
    directory = tmp_path / "expectations" / "entry"
    with pytest.raises(OSError):
        save_expectations(Expectations("slug", "v1", "0", [], []), directory)
    assert list((tmp_path / "expectations").iterdir()) == []
