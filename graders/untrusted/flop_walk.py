"""The steps of the FLOP counter's walk (`graders.untrusted.flops`): what a walked block or function
counts (`Count`), what one op costs and reads (`Plan`), the requests a walk step yields, and the
plan of a `while` loop."""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from graders.untrusted.cost import Cost, scaled
from graders.untrusted.fold import MIXED, SIGN, TAINTED, Fact, fact_at, set_facts, trip_count
from graders.untrusted.linearity import carried_fact

MAX_LOOP_PASSES = 4  # walks of a loop body to settle which carried values depend on a cotangent


@dataclass
class Count:
    """A walked block or function: FLOPs of one run, whether exact, the facts of what it returns,
    and the values from outside it that its live ops read (for a function: argument indices)."""

    cost: Cost
    exact: bool
    results: list[Fact]
    external: set[Any] = field(default_factory=set)
    used_args: frozenset[int] = frozenset()
    recomputed: Counter[str] = field(default_factory=Counter)  # recompute FLOPs by op signature


@dataclass
class Plan:
    """What one op costs and reads, decided on the forward pass.

    `alias[j]` is the operand result j is (a folded `select`, `x + 0`, `x * 1`, an
    optimization_barrier); `folded` ops are constants and read nothing; otherwise the op reads all
    its operands and the outside values its counted regions read (`external`).
    """

    cost: Cost = Cost()
    exact: bool = True
    alias: list[int | None] | None = None
    folded: bool = False
    external: set[Any] = field(default_factory=set)
    used_operands: list[int] | None = None  # a call: only the arguments its callee reads
    recomputed: Counter[str] = field(default_factory=Counter)  # recompute FLOPs by op signature
    signature: str | None = None  # what the op computes, where the forward's are collected


# A walk step asks for a block or a function and is sent back its Count.
Request = tuple[str, Any, tuple[Fact, ...], dict[Any, Fact] | None]
Walk = Generator[Request, Count, Count]


def loop_plan(op: Any, ins: list[Fact], facts: dict[Any, Fact]) -> Generator[Request, Count, Plan]:
    """A `while`: condition and body once each, times the trip count when the loop fixes it.
    Carried values are not known; which depend on a cotangent is settled by walking the body
    again while its results add some (at most `MAX_LOOP_PASSES` walks, then all do)."""
    blocks = [b for region in op.regions for b in region.blocks]
    carried: list[Fact] = [f if f is MIXED else TAINTED if f is TAINTED or f is SIGN else None for f in ins]
    counts: list[Count] = []
    for attempt in range(MAX_LOOP_PASSES + 1):
        if attempt == MAX_LOOP_PASSES:
            carried = [MIXED if f is MIXED else TAINTED for f in carried]
        counts = []
        for block in blocks:
            counts.append(
                (yield ("block", block, tuple(fact_at(carried, i) for i in range(len(block.arguments))), facts))
            )
        body = counts[-1] if len(counts) > 1 else None
        grown: list[Fact] = [
            carried_fact(f, fact_at(body.results, i) if body is not None else None) for i, f in enumerate(carried)
        ]
        if grown == carried or attempt == MAX_LOOP_PASSES:
            break
        carried = grown
    set_facts(facts, list(op.results), carried)
    trips = trip_count(op, facts)
    times = trips if trips is not None else 1
    once = Cost()
    recomputed: Counter[str] = Counter()
    for count in counts:
        once = once + count.cost
        recomputed.update(count.recomputed)
    exact = trips is not None and all(c.exact for c in counts)
    external: set[Any] = set().union(*(c.external for c in counts))
    return Plan(cost=once.times(times), exact=exact, external=external, recomputed=scaled(recomputed, times))
