"""`[mesh]` of problem.toml (`graders.problems.mesh_spec`): parsed, checked against the arguments
and every case's dims, each mistake refused with a message that names the field."""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from graders.problems.mesh_spec import AXIS_RE, MeshSpec
from graders.problems.problem import check_package
from graders.problems.spec import DIM_RE, ProblemSpec
from tests.support import PROBLEMS

TOML = """
slug = "fsdp_layer"
title = "FSDP"
difficulty = "hard"
entry_point = "layer"
args = [
  { name = "x", shape = ["B", 64] },
  { name = "params", kind = "list", items = [{ shape = [64, 64] }, { shape = [64] }] },
  { name = "tree", kind = "tree", tree = { Dense_0 = { kernel = { shape = [64, "H"] } } } },
  { name = "train", kind = "static" },
]
cases = [
  { name = "small", dims = { B = 8, H = 16 }, static = { train = true } },
  { name = "large", dims = { B = 32, H = 32 }, static = { train = false } },
]

[mesh]
axes = { data = 2, model = 2 }
axis_types = { model = "explicit" }

[mesh.partition]
x = ["data", []]
"params[0]" = [["data", "model"], []]
"tree['Dense_0']['kernel']" = [[], "model"]
"""


def _raw() -> dict[str, Any]:
    return tomllib.loads(TOML)


def _with_mesh(**mesh: Any) -> dict[str, Any]:
    raw = _raw()
    raw["mesh"] = {"axes": {"data": 2, "model": 2}, **mesh}
    return raw


def test_a_mesh_parses_in_order_with_auto_axes_by_default() -> None:
    spec = ProblemSpec.model_validate(_raw())
    assert spec.mesh is not None
    assert list(spec.mesh.axes) == ["data", "model"]
    assert spec.device_count == 4 and spec.mesh.device_count == 4
    assert spec.mesh.axis_type("data") == "auto" and spec.mesh.axis_type("model") == "explicit"
    assert spec.mesh.plain() == {
        "axes": {"data": 2, "model": 2},
        "axis_types": {"data": "auto", "model": "explicit"},
        "partition": {
            "x": ["data", None],
            "params[0]": [["data", "model"], None],
            "tree['Dense_0']['kernel']": [None, "model"],
        },
    }


def test_no_mesh_is_one_device() -> None:
    raw = _raw()
    del raw["mesh"]
    spec = ProblemSpec.model_validate(raw)
    assert spec.mesh is None and spec.device_count == 1


def test_null_and_an_empty_list_both_mean_not_split() -> None:
    mesh = MeshSpec.model_validate({"axes": {"d": 2}, "partition": {"x": [None, [], "d"]}})
    assert mesh.partition["x"] == [None, None, "d"]


def test_axis_names_follow_the_dimension_names_pattern() -> None:
    assert AXIS_RE == DIM_RE


@pytest.mark.parametrize(
    ("mesh", "says"),
    [
        ({"axes": {"data": 4, "model": 4}}, "16 devices (data=4 x model=4); at most 8"),
        ({"axes": {"data": 0}}, "greater than or equal to 1"),
        ({"axes": {}}, "at least 1 item"),
        ({"axes": {"data-1": 2}}, "should match pattern"),
        (
            {"axes": {"data": 2}, "axis_types": {"model": "auto"}},
            "axis_types: unknown axis 'model' (the mesh has 'data')",
        ),
        ({"axes": {"data": 2}, "axis_types": {"data": "manual"}}, "'auto' or 'explicit'"),
        ({"axes": {"data": 2}, "partition": {"x": ["dta", None]}}, "partition.x: dimension 0: unknown axis 'dta'"),
        ({"axes": {"data": 2}, "partition": {"x": [[None], None]}}, "partition.x.0"),
        (
            {"axes": {"data": 2, "model": 2}, "partition": {"x": ["data", ["model", "data"]]}},
            "partition.x: axis 'data' is used twice",
        ),
        ({"axes": {"data": 2}, "shape": [2]}, "Extra inputs are not permitted"),
    ],
)
def test_a_malformed_mesh_is_refused(mesh: dict[str, Any], says: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(says)):
        MeshSpec.model_validate(mesh)


DATA_MODEL = {"data": 2, "model": 2}
MODEL_PIPE = {"model": 2, "pipe": 3}


@pytest.mark.parametrize(
    ("axes", "partition", "says"),
    [
        (
            DATA_MODEL,
            {"y": ["data", None]},
            "mesh.partition.y: no array argument of that name (arrays: 'x', 'params[0]'",
        ),
        (
            DATA_MODEL,
            {"params": [None, None]},
            "mesh.partition.params: not one array (a static, list or tree argument)",
        ),
        (DATA_MODEL, {"train": []}, "mesh.partition.train: not one array"),
        (DATA_MODEL, {"x": ["data"]}, "mesh.partition.x: 1 entries for an argument of rank 2 (shape ['B', 64])"),
        (DATA_MODEL, {"params[1]": [None, None]}, "mesh.partition.params[1]: 2 entries for an argument of rank 1"),
        (
            MODEL_PIPE,
            {"params[1]": [["model", "pipe"]]},
            "mesh.partition.params[1]: case 'small': dimension 0 (64) is not divisible by 6 (model=2 x pipe=3)",
        ),
        (
            MODEL_PIPE,
            {"tree['Dense_0']['kernel']": [None, ["pipe", "model"]]},
            "mesh.partition.tree['Dense_0']['kernel']: case 'small': dimension 1 (H = 16) is not divisible "
            "by 6 (pipe=3 x model=2)",
        ),
        (
            MODEL_PIPE,
            {"x": ["pipe", None]},
            "mesh.partition.x: case 'small': dimension 0 (B = 8) is not divisible by 3 (pipe=3)",
        ),
    ],
)
def test_a_partition_that_does_not_fit_the_arguments_is_refused(
    axes: dict[str, int], partition: dict[str, Any], says: str
) -> None:
    raw = _with_mesh(partition=partition)
    raw["mesh"]["axes"] = axes
    with pytest.raises(ValidationError, match=re.escape(says)):
        ProblemSpec.model_validate(raw)


def test_every_case_is_checked_not_only_the_first() -> None:
    raw = _with_mesh(partition={"x": [["data", "model"], None]})
    raw["cases"][1]["dims"]["B"] = 6
    with pytest.raises(ValidationError, match=re.escape("case 'large': dimension 0 (B = 6) is not divisible by 4")):
        ProblemSpec.model_validate(raw)


def test_an_unsplit_or_evenly_split_dimension_of_any_size_passes() -> None:
    raw = _with_mesh(partition={"x": [None, ["data", "model"]]})
    raw["cases"][0]["dims"]["B"] = 7
    assert ProblemSpec.model_validate(raw).device_count == 4


def test_a_package_with_a_mesh_passes_the_static_checks(tmp_path: Path) -> None:
    """Meshes are graded: a [mesh] whose partition fits the arguments is a valid package."""
    package = tmp_path / "remat_sin_sin"
    shutil.copytree(PROBLEMS / "remat_sin_sin", package, ignore=shutil.ignore_patterns(".published"))
    toml = package / "problem.toml"
    toml.write_text(toml.read_text() + "\n[mesh]\naxes = { data = 2 }\n")
    assert check_package(package).spec.device_count == 2


@pytest.mark.parametrize("memory", [{"rule": "at_most"}, {"rule": "exact", "bound_bwd_peak": True}])
def test_a_peak_bound_on_a_mesh_is_refused(memory: dict[str, Any]) -> None:
    """The static peak adds up a partitioned program's global arrays: no device's figure."""
    raw = _raw()
    raw["memory"] = memory
    with pytest.raises(ValidationError, match="cannot bound the backward pass's peak"):
        ProblemSpec.model_validate(raw)
    del raw["mesh"]
    assert ProblemSpec.model_validate(raw).memory.bounds_peak  # one device: bounded as before
