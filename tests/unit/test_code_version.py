"""The judging code's digest, part of every cached verifier result's key."""

from __future__ import annotations

from pathlib import Path

from graders.verifier.code_version import JUDGING_PACKAGES, judging_code_digest


def _tree(root: Path, check_source: str) -> Path:
    for package in JUDGING_PACKAGES:
        (root / package).mkdir(parents=True, exist_ok=True)
        (root / package / "__init__.py").write_text("")
    (root / "graders" / "checks.py").write_text(check_source)
    (root / "graders" / "notes.txt").write_text("not code")
    return root


def test_a_changed_check_changes_the_digest_and_nothing_else_does(tmp_path: Path) -> None:
    a = judging_code_digest(_tree(tmp_path / "a", "BOUND = 1.25\n"))
    same = judging_code_digest(_tree(tmp_path / "same", "BOUND = 1.25\n"))
    changed = judging_code_digest(_tree(tmp_path / "changed", "BOUND = 1.50\n"))
    assert a == same  # the digest is of paths and contents, not of where the checkout lives
    assert changed != a
    (tmp_path / "same" / "graders" / "notes.txt").write_text("edited")
    assert judging_code_digest.__wrapped__(tmp_path / "same") == same  # only .py files count


def test_the_checkout_has_a_digest() -> None:
    digest = judging_code_digest()
    assert len(digest) == 64 and int(digest, 16) >= 0
