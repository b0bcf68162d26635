"""`graders.verifier.collectives`: the collectives of compiled HLO text and the bytes a device
receives, on lines in the forms XLA 0.10.2's CPU compiler prints (copied from a compiled FSDP
backward pass on 4 simulated devices, and a 2x2 mesh's one-axis group)."""

from __future__ import annotations

from graders.verifier.collectives import communication

GATHER = "replica_groups=mesh['axis_0'=4,'axis_1'=1] {'axis_0'}"  # the group of all 4 devices
PAIR = "replica_groups=mesh['axis_0'=2,'axis_1'=2] {'axis_1'}"  # a group of the 2 devices along axis_1
FSDP_BWD = """
HloModule jit_call, entry_computation_layout={(f32[8,64]{1,0})->f32[16,64]{1,0}}

ENTRY %main.1 (param.2: f32[16,64], param.5: f32[64,64]) -> (f32[16,64]) {
  %param.2 = f32[16,64]{1,0} parameter(0)
  %all-gather.1 = f32[64,64]{1,0} all-gather(%param.2), channel_id=2, GATHER, dimensions={0}
  %param.5 = f32[64,64]{1,0} parameter(1)
  %reduce-scatter = f32[16,64]{1,0} reduce-scatter(%param.5), channel_id=3, replica_groups={{0,1,2,3}}, dimensions={0}
  ROOT %all-reduce.2 = f32[64,64]{1,0} all-reduce(%param.5), channel_id=4, PAIR
}
""".replace("GATHER", GATHER).replace("PAIR", PAIR)


def test_each_collective_is_counted_with_the_bytes_a_device_receives() -> None:
    found = communication(FSDP_BWD, devices=4)
    assert found.counts == {"all-gather": 1, "reduce-scatter": 1, "all-reduce": 1}
    gathered = 64 * 64 * 4 * 3 // 4  # the result, less the device's own quarter
    scattered = 64 * 64 * 4 * 3 // 4  # the operand, less the quarter it keeps
    reduced = 2 * 64 * 64 * 4 // 2  # a ring over the group of 2 of the 'axis_1' axis: 2 x operand x 1/2
    assert found.received_bytes == gathered + scattered + reduced
    assert (
        found.describe()
        == f"1 all-gather, 1 all-reduce, 1 reduce-scatter: {found.received_bytes:,} bytes received per device"
    )


def test_a_program_without_collectives_communicates_nothing() -> None:
    found = communication("ENTRY %main { ROOT %add = f32[4]{0} add(%a, %b) }", devices=4)
    assert found.counts == {} and found.received_bytes == 0 and found.describe() == "no collective"
