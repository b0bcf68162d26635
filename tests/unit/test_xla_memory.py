"""XLA's per-device figures beside the judge's count (`graders.verifier.xla_memory`)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from graders.verifier.xla_memory import describe, held_bytes, parted, residual_bytes, xla_memory


class _Compiled:
    def __init__(self, stats: Any):
        self.stats = stats

    def memory_analysis(self) -> Any:
        if isinstance(self.stats, Exception):
            raise self.stats
        return self.stats


# fsdp_regather's reference, rectangular case, as jax 0.10.2 compiles it for one of 4 CPU devices
FWD = SimpleNamespace(
    argument_size_in_bytes=26_368,
    output_size_in_bytes=34_872,
    alias_size_in_bytes=0,
    temp_size_in_bytes=97_280,
    host_argument_size_in_bytes=0,
    host_output_size_in_bytes=0,
    host_alias_size_in_bytes=0,
    host_temp_size_in_bytes=0,
    peak_memory_in_bytes=61_240,
)


def test_the_figures_are_read_per_field_and_a_missing_analysis_is_nothing() -> None:
    got = xla_memory(_Compiled(FWD))
    assert got["output"] == 34_872 and got["temp"] == 97_280 and got["peak"] == 61_240
    assert xla_memory(_Compiled(None)) == {}
    assert xla_memory(_Compiled(NotImplementedError("no analysis on this backend"))) == {}


def test_the_residuals_by_xlas_count_part_from_the_judges_by_the_output_table() -> None:
    fwd = xla_memory(_Compiled(FWD))
    counted = residual_bytes(fwd, primal_output_bytes=1_280)  # y, f32[8,40] per device
    assert counted == 33_592  # the judge counts 33,536: 7 outputs, 8 bytes of table each
    assert "table of 7 pointers" in parted(33_536, counted, fwd, outputs=7)
    assert parted(33_536, 33_536, fwd, outputs=7) == ""
    assert "bytes fewer" in parted(33_536 + 4_096, counted, {**fwd, "alias": 4_096}, outputs=7)
    assert "layout of the buffers" in parted(30_000, counted, fwd, outputs=7)
    assert residual_bytes({}, 0) is None


def test_what_a_device_holds_and_how_it_is_said() -> None:
    bwd = {"argument": 34_816, "output": 26_400, "temp": 100_352, "alias": 0}
    assert held_bytes(bwd) == 161_568 and held_bytes({}) is None
    side = {"fwd": xla_memory(_Compiled(FWD)), "bwd": bwd, "residual_bytes": 33_592, "parted": "why"}
    text = describe(side)
    assert text.startswith("residuals 33,592 B") and "backward pass 161,568 B" in text and text.endswith("; why")
    assert describe({}) == ""
