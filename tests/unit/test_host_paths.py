"""No host path reaches a student or API caller: residual notes, the jail's error message and its
captured output name a library's file relative to the library (`jailside.paths.local_paths`),
on the trusted side too, whatever the jail sent."""

from __future__ import annotations

import json
import re

import pytest

from graders.checks.described import describe_residuals
from graders.pipeline import _text, judge_outcome
from graders.verdict import Verdict
from jailside.paths import local_paths
from sandbox.jail import JailOutcome
from sandbox.jail_limits import JailLimits

# an absolute path anywhere (not the "//" of a URL): what must never be left
HOST_PATH = re.compile(r"(?:^|(?<=[\s\"'(]))/(?:[\w.+@%~-]+/)+[\w.+@%~-]+")


@pytest.mark.parametrize(
    "frame,local",
    [
        ("/work/main/.venv/lib/python3.11/site-packages/flax/linen/linear.py:287:8", "flax/linen/linear.py:287:8"),
        ("/usr/lib/python3/dist-packages/numpy/_core/numeric.py:12", "numpy/_core/numeric.py:12"),
        ("/usr/lib/python3.11/functools.py:45:3", "functools.py:45:3"),
        ("/usr/local/lib/python3.12/json/decoder.py:7", "json/decoder.py:7"),
        ("/root/.local/lib/python3.11/site-packages/equinox/_module.py:9:2", "equinox/_module.py:9:2"),
        ("/root/work/models/block.py:3:1", "block.py:3:1"),
        (
            "/home/alice/.venv/lib/python3.11/site-packages/flax/core/axes_scan.py:200:14",
            "flax/core/axes_scan.py:200:14",
        ),
    ],
)
def test_a_frame_outside_the_submission_is_named_relative_to_its_library(frame: str, local: str) -> None:
    assert (
        local_paths(f"output of dot_general from {frame} (__call__)")
        == f"output of dot_general from {local} (__call__)"
    )


def test_what_is_not_a_host_path_is_left_as_it_is() -> None:
    for text in (
        "output of sin from submission.py:17:68 (f)",
        'For parameter "kernel" in "/remat(scan(layers))/Dense_0", the initializer ...',
        "the scope /layers/Dense_0 has 3/4 of a / b (https://flax.readthedocs.io/en/latest/api.html)",
        "from the argument params['Dense_0']['kernel']",
    ):
        assert local_paths(text) == text


def test_paths_in_tracebacks_urls_and_lists_are_rewritten() -> None:
    text = (
        '  File "/work/main/jailside/export.py", line 3, in f\n'
        "see file:///tmp/build/report.html; PATH=/usr/bin:/home/a/bin\n"
        "/opt/conda/lib/python3.11/site-packages/jax/_src/api.py:12: UserWarning: x"
    )
    assert local_paths(text) == (
        '  File "export.py", line 3, in f\nsee report.html; PATH=bin:bin\njax/_src/api.py:12: UserWarning: x'
    )


def _avals(*shapes: list[int]) -> list[object]:
    return [type("A", (), {"shape": s, "dtype": "float32"})() for s in shapes]


def test_a_forged_note_carries_no_host_path_into_the_residuals() -> None:
    """Notes come out of the jail: the trusted side rewrites them whatever the jail sent."""
    notes = [
        {
            "shape": [4],
            "dtype": "float32",
            "note": "output of sin from /srv/judge/.venv/lib/python3.11/site-packages/"
            "flax/linen/linear.py:287:8 (__call__)",
        },
        {
            "shape": [8],
            "dtype": "float32",
            "note": "output of cos from /root/secret/dir/model.py:3 (f) and /etc/passwd",
        },
    ]
    facts = describe_residuals(_avals([4], [8]), notes, sources=["sine", "cosine"])
    assert [f.note for f in facts] == [
        "output of sin from flax/linen/linear.py:287:8 (__call__)",
        "output of cos from model.py:3 (f) and passwd",
    ]


def test_the_jails_error_message_and_output_name_no_host_path() -> None:
    """A forged (or an exception's) message naming a host path fails with that path rewritten."""
    bundle = {
        "format": "remat-judge-bundle/1",
        "status": "runtime_error",
        "error": {
            "kind": "ValueError",
            "message": "ValueError while tracing: boom in /srv/j/.venv/lib/python3.11/site-packages/flax/__init__.py",
            "traceback": "",
        },
        "cases": [],
    }
    outcome = JailOutcome(bundle=json.dumps(bundle).encode(), exit_code=0)
    check, parsed = judge_outcome(outcome, JailLimits())
    assert parsed is None and check.verdict == Verdict.RUNTIME_ERROR
    assert check.message == "ValueError while tracing: boom in flax/__init__.py"
    stderr = b"/work/main/.venv/lib/python3.11/site-packages/flax/linen/module.py:9: DeprecationWarning: old\n"
    assert _text(stderr) == "flax/linen/module.py:9: DeprecationWarning: old\n"
    assert not HOST_PATH.search(_text(stderr))
