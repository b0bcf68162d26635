"""sandbox/bundle.py: the strict parser of the untrusted result bundle, against what the runner writes."""

from __future__ import annotations

import base64
import copy
import json
import pickle
from typing import Any

import pytest
from pydantic import ValidationError

from graders.untrusted.parse import deserialize, exported_avals
from jailside.runner import BUNDLE_FORMAT as RUNNER_BUNDLE_FORMAT
from jailside.runner import run_request
from sandbox.bundle import BUNDLE_FORMAT, Bundle, BundleError, parse_bundle

LIMIT = 1 << 20
TINY_SOURCE = "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sum(jnp.sin(x) ** 2)\n"
TINY_REQUEST = {
    "source": TINY_SOURCE,
    "entry_point": "f",
    "cpu_time_limit_s": 10,
    "cases": [{"name": "small", "args": [{"kind": "array", "name": "x", "shape": [4], "dtype": "float32"}]}],
}


@pytest.fixture(scope="module")
def runner_bundle() -> dict[str, Any]:
    """What the runner writes for a tiny problem (in-process, no jail)."""
    return run_request(copy.deepcopy(TINY_REQUEST))


@pytest.fixture
def bundle_dict(runner_bundle: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(runner_bundle)


def encode(d: Any) -> bytes:
    return json.dumps(d).encode("utf-8")


def test_runner_and_parser_agree_on_the_format_string() -> None:
    assert RUNNER_BUNDLE_FORMAT == BUNDLE_FORMAT == "remat-judge-bundle/1"


def test_parses_a_bundle_written_by_the_runner(runner_bundle: dict[str, Any]) -> None:
    bundle = parse_bundle(encode(runner_bundle), limit_bytes=LIMIT)
    assert isinstance(bundle, Bundle)
    assert bundle.status == "ok" and bundle.error is None
    assert [c.name for c in bundle.cases] == ["small"]
    case = bundle.cases[0]
    assert case.n_primal_outputs == 1
    assert case.fwd == base64.b64decode(runner_bundle["cases"][0]["fwd"])
    fwd = deserialize(case.fwd)  # the decoded bytes are the artifact
    assert [(a.shape, a.dtype) for a in exported_avals(fwd.in_avals)] == [((4,), "float32")]
    assert case.residual_notes and all(n.dtype == "float32" for n in case.residual_notes)


def test_parses_a_runner_failure_bundle() -> None:
    request = dict(TINY_REQUEST, source="def f(x:\n")
    raw = run_request(request)
    bundle = parse_bundle(encode(raw), limit_bytes=LIMIT)
    assert bundle.status == "compile_error"
    assert bundle.error is not None and bundle.error.kind == "SyntaxError"
    assert bundle.cases == []


def test_rejects_empty_bytes() -> None:
    with pytest.raises(BundleError, match="without writing a result"):
        parse_bundle(b"", limit_bytes=LIMIT)


@pytest.mark.parametrize(
    "data",
    [b"not json", b"{", b"\xff\xfe\x00", b"[" * 100_000, b"null", b"[]", b'"ok"'],
    ids=["text", "truncated", "binary", "deeply-nested", "null", "list", "string"],
)
def test_rejects_non_json_or_non_object(data: bytes) -> None:
    with pytest.raises(BundleError, match="malformed"):
        parse_bundle(data, limit_bytes=LIMIT)


def test_rejects_data_over_the_limit_and_accepts_data_at_it(runner_bundle: dict[str, Any]) -> None:
    data = encode(runner_bundle)
    assert parse_bundle(data, limit_bytes=len(data)).status == "ok"
    with pytest.raises(BundleError, match=f"{len(data)} bytes, more than the {len(data) - 1} allowed"):
        parse_bundle(data, limit_bytes=len(data) - 1)


def test_oversize_garbage_is_rejected_by_size_before_parsing() -> None:
    with pytest.raises(BundleError, match="more than the 100 allowed"):
        parse_bundle(b"{" * 101, limit_bytes=100)


def test_rejects_unknown_top_level_field(bundle_dict: dict[str, Any]) -> None:
    bundle_dict["verdict"] = "ACCEPTED"
    with pytest.raises(BundleError, match=r"verdict: Extra inputs are not permitted"):
        parse_bundle(encode(bundle_dict), limit_bytes=LIMIT)


def test_rejects_unknown_field_in_a_case(bundle_dict: dict[str, Any]) -> None:
    bundle_dict["cases"][0]["residual_bytes"] = 0
    with pytest.raises(BundleError, match=r"cases\.0\.residual_bytes"):
        parse_bundle(encode(bundle_dict), limit_bytes=LIMIT)


@pytest.mark.parametrize(
    "bad",
    ["not base64!", "AAA", "AA\nAA", 1234, None, "é"],
    ids=["symbols", "bad-padding", "newline", "number", "null", "non-ascii"],
)
def test_rejects_artifact_that_is_not_a_base64_string(bundle_dict: dict[str, Any], bad: Any) -> None:
    bundle_dict["cases"][0]["fwd"] = bad
    with pytest.raises(BundleError, match=r"cases\.0\.fwd"):
        parse_bundle(encode(bundle_dict), limit_bytes=LIMIT)


@pytest.mark.parametrize("fmt", ["remat-judge-bundle/2", "", "REMAT-JUDGE-BUNDLE/1", None])
def test_rejects_wrong_format_string(bundle_dict: dict[str, Any], fmt: Any) -> None:
    bundle_dict["format"] = fmt
    with pytest.raises(BundleError, match="format"):
        parse_bundle(encode(bundle_dict), limit_bytes=LIMIT)


def test_rejects_missing_format(bundle_dict: dict[str, Any]) -> None:
    del bundle_dict["format"]
    with pytest.raises(BundleError, match="format"):
        parse_bundle(encode(bundle_dict), limit_bytes=LIMIT)


def test_rejects_unknown_status(bundle_dict: dict[str, Any]) -> None:
    bundle_dict["status"] = "accepted"
    with pytest.raises(BundleError, match="status"):
        parse_bundle(encode(bundle_dict), limit_bytes=LIMIT)


@pytest.mark.parametrize("value", [True, "1", 1.0, -1, 1025], ids=["bool", "string", "float", "negative", "huge"])
def test_strict_types_for_n_primal_outputs(bundle_dict: dict[str, Any], value: Any) -> None:
    bundle_dict["cases"][0]["n_primal_outputs"] = value
    with pytest.raises(BundleError, match="n_primal_outputs"):
        parse_bundle(encode(bundle_dict), limit_bytes=LIMIT)


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_rejects_a_pickled_bundle(runner_bundle: dict[str, Any], protocol: int) -> None:
    with pytest.raises(BundleError, match="malformed"):
        parse_bundle(pickle.dumps(runner_bundle, protocol=protocol), limit_bytes=LIMIT)


def test_parsed_bundle_is_immutable(runner_bundle: dict[str, Any]) -> None:
    bundle = parse_bundle(encode(runner_bundle), limit_bytes=LIMIT)
    with pytest.raises(ValidationError, match="frozen"):
        bundle.status = "compile_error"  # type: ignore[misc]
