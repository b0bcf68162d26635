"""What reading an untrusted program gives: its facts (`ModuleInfo`) or why it was refused
(`ArtifactError`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


class ArtifactError(Exception):
    """An artifact cannot be deserialized, parsed or accepted (a forged or corrupt bundle, a dynamic
    shape, a module past the caps). The message is safe to show to the submission's author."""


@dataclass
class ModuleInfo:
    """What static inspection found in one artifact.

    Attributes:
        op_counts: how many of each op (by full name, e.g. "stablehlo.dot_general").
        disallowed: op names (or `custom_call @target`) outside the allowlist, sorted.
        peak_live_bytes: the most bytes live at once when ops run in program order (see
            `_Frame.peak`); 0 when `disallowed` is not empty (the module is not walked).
        flops: floating-point operations of one run of `main`: 2·(result elements)·(contracted
            size) per `dot_general`/`dot`/`convolution`, one per result element for other
            arithmetic, zero for data movement; callees counted per call, `while` bodies times
            the trip count read from the loop's bound (1 when unknown: see `flops_exact`), the
            costliest branch of a `case`/`if`.
        flops_exact: False when some loop's trip count, or some branch index, is known only at
            run time (`graders.untrusted.flops`).
        residual_flops: of `flops`, those of ops that depend on none of the `cotangents` last
            arguments `inspect_module` was told of (all of them when told of none): in a backward
            program, the forward work it redoes and the derivative factors it computes from the
            residuals alone, the part a checkpoint policy decides.
        recompute_flops, recompute_flops_low: of `residual_flops`, those of ops that repeat an
            operation of the forward program (`inspect_module`'s `forward_ops`; the same op on
            the same types, `graders.untrusted.signature`): the forward work a backward program
            does again; 0 when no forward program was given.
        recomputed: the labels of the costliest recomputed operations (at most 8) by signature
            (`dot_general({residual 0}, {residual 2}) -> f32[32,256]`).
        recomputed_signatures: the FLOPs of every recomputed operation by signature (one entry
            per distinct signature, so bounded by the op cap), to compare with another program's.
        op_signatures: the signatures of a forward program's live ops that compute (empty for a
            backward program).
        flops_low, residual_flops_low: the same with the cheapest branch wherever a branch index
            is known only at run time (equal to `flops` and `residual_flops` when `flops_exact`):
            when only branches are unknown, what runs costs between the two.
        sources: per output of `main`, the op that produces it ("dot_general", "sine", ...) or
            "argument i" (0-based flat input), looking through data movement, calls, scan stacking
            (`dynamic_update_slice`) and loop carries (see `provenance_of`).
        functions: number of functions in the module.
        digest: `normalized_digest` of the artifact (64 hex digits); "" when `disallowed` is not
            empty (the module is not walked).
        program_digest: like `digest`, but blind to names too (`program_digest`): two programs
            that differ only in the names of their functions and variables get the same one. For
            finding identical programs among students (docs/ARCHITECTURE.md, "Insight"), never
            for caching results (a name can matter to an error message).
        largest_value_bytes, largest_value_elements: the bytes and elements of the largest single
            value any op of the module defines (the biggest temporary a backward pass can hold
            besides its inputs).
        memory_kinds: per output of `main`, where the program leaves it: its result attribute
            `mhlo.memory_kind` ("device", or "pinned_host" for a value a checkpoint policy offloads
            to host memory, e.g. `save_and_offload_only_these_names`); "device" when unmarked.
        depends_on_arguments: of a forward program, per output of `main`, whether any argument's
            data flows into it (`graders.untrusted.dependence.argument_dependence`); empty for a
            backward program.
        selector_arguments: of a backward program, per argument of `main`, whether it is used
            only as a branch index (`graders.untrusted.dependence.selector_arguments`); empty
            for a forward program.
    """

    op_counts: Counter[str] = field(default_factory=Counter)
    disallowed: list[str] = field(default_factory=list)
    peak_live_bytes: int = 0
    flops: int = 0
    flops_exact: bool = True
    residual_flops: int = 0
    flops_low: int = 0
    residual_flops_low: int = 0
    recompute_flops: int = 0
    recompute_flops_low: int = 0
    recomputed: dict[str, str] = field(default_factory=dict)
    recomputed_signatures: dict[str, int] = field(default_factory=dict)
    op_signatures: frozenset[str] = frozenset()
    sources: list[str] = field(default_factory=list)
    functions: int = 0
    digest: str = ""
    program_digest: str = ""
    largest_value_bytes: int = 0
    largest_value_elements: int = 0
    memory_kinds: list[str] = field(default_factory=list)
    depends_on_arguments: list[bool] = field(default_factory=list)
    selector_arguments: list[bool] = field(default_factory=list)

    @property
    def n_ops(self) -> int:
        return sum(self.op_counts.values())
