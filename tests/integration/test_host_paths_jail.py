"""Flax submissions through the real jail and verifier: no check message, residual note, stderr or
stdout of the report names a host path (JAX names a value Flax made by the file it was made in,
`flax/core/axes_scan.py`, installed under the judge's virtualenv)."""

from __future__ import annotations

import re

import pytest

from graders.config import JudgeConfig
from graders.pipeline import grade
from graders.problems.problem import ProblemRepository
from graders.verdict import Verdict, VerdictReport
from tests.support import PROBLEMS, jail_processes

SLUG = "linen_scan_remat"  # nn.scan over nn.remat: its saved values are made inside Flax
# an absolute path ("/" then at least two segments; not a URL's "//", not a Flax scope "/Dense_0")
HOST_PATH = re.compile(r"(?:^|(?<=[\s\"'(`]))/(?:[\w.+@%~-]+/)+[\w.+@%~-]+")


def _shown(report: VerdictReport) -> list[str]:
    """Every text of `report` a student or API caller reads."""
    texts = [c.message for c in report.checks] + [report.stdout, report.stderr]
    if report.residuals is not None:
        texts += [f.note or "" for f in report.residuals.submitted + report.residuals.expected]
    return texts


@pytest.mark.jail
@pytest.mark.parametrize("folder,name", [("right", "named_submodule.py"), ("wrong", "no_remat.py")])
def test_a_value_flax_made_is_named_relative_to_flax(folder: str, name: str, judge_config: JudgeConfig) -> None:
    problem = ProblemRepository(PROBLEMS).working(SLUG)
    report = grade((PROBLEMS / SLUG / folder / name).read_text(), problem, judge_config)
    assert report.verdict == (Verdict.ACCEPTED if folder == "right" else Verdict.WRONG_POLICY)
    assert report.residuals is not None
    notes = [f.note or "" for f in report.residuals.submitted]
    assert any(" from flax/core/" in n for n in notes), notes  # where Flax made it, relative to Flax
    leaks = [m.group(0) for text in _shown(report) for m in HOST_PATH.finditer(text)]
    assert leaks == []
    if folder == "wrong":  # the residuals message lists the notes too
        assert " from flax/core/" in next(c.message for c in report.checks if c.name == "residuals")
    assert jail_processes() == []


SOURCE = """
import warnings
import flax.linen as nn

def linen_scan_remat(params, x):
    warnings.warn_explicit("a library's warning", UserWarning, filename=nn.__file__, lineno=9)
    print("flax is at", nn.__file__)
    raise ValueError(f"boom in {nn.__file__}")
"""


@pytest.mark.jail
def test_an_error_and_output_naming_flax_files_name_no_host_path(judge_config: JudgeConfig) -> None:
    problem = ProblemRepository(PROBLEMS).working(SLUG)
    report = grade(SOURCE, problem, judge_config)
    assert report.verdict == Verdict.RUNTIME_ERROR
    assert "boom in flax/linen/__init__.py" in report.checks[0].message
    assert "flax/linen/__init__.py:9: UserWarning" in report.stderr
    assert "flax is at flax/linen/__init__.py" in report.stdout
    assert [m.group(0) for text in _shown(report) for m in HOST_PATH.finditer(text)] == []
    assert jail_processes() == []
