"""FLOPs of what an untrusted program really executes, counted statically.

The count is the one the recompute check judges (docs/ARCHITECTURE.md, "Two axes of a policy"),
so it must not depend on how a correct policy is spelt. Three things a compiler removes before
anything runs are left out of it:

- **dead code**: an op none of whose results reaches a returned value (a backward pass that
  computes a value and never uses it spends nothing on it once XLA has compiled it);
- **a branch that is never taken**: a `case` whose index, or an `if` whose predicate, is a
  constant (`lax.cond` on a static Python flag) runs that one branch; with an index known only at
  run time the costliest branch counts (and the cheapest for a lower bound, `Cost.low`) and the
  figure is marked inexact;
- **arithmetic on known constants**: a `select` whose predicate is a constant is the operand it
  picks; a product with a known zero is zero, a sum with a known zero is the other term, a product
  with a known one is the other factor (`jnp.where` on a static flag differentiates both sides,
  and the side not taken gets a zero cotangent).

What is known of a value is a splat constant or nothing. Facts flow forward through each block, into
called functions (walked once per pattern of constant arguments, at most `MAX_CONTEXTS`) and into
regions; liveness flows backward from each block's returned values. Loop bodies count times the trip
count a scan or fori_loop fixes (`trip_count`); a loop whose count cannot be read counts once, inexact.

The walk splits a backward program's FLOPs: an op none of whose inputs depends on a cotangent works
on the residuals alone (`residual_flops`: forward work redone, or a factor such as cos(z) from a
saved z), which a policy decides; the cotangent's own arithmetic is the same for every policy.
Dependence flows through calls, branches and loop-carried values (to a fixed point, at most
`MAX_LOOP_PASSES` walks of a body, then all count as depending). A `shard_map` body counts once per
device it runs on (`mesh_ops.manual_devices`), so a mesh program's FLOPs are the whole mesh's.

Dependence on a cotangent is linearity (`graders.untrusted.linearity`): a value computed from one by
anything but a linear map is MIXED, forward work with the cotangent mixed in, and counts with the
residual work. Of the residual work, the ops that repeat an operation of the forward program
(`forward`: its live ops' signatures, `graders.untrusted.signature`) are recomputation
(`Cost.recompute`), counted per signature so a message can name the costliest.

Every walk is iterative (generators driven from one explicit stack), visits each op once per function
context, and runs only on a module `ModuleWalker.scan` has bounded (ops, depths, sizable types).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Generator, Mapping
from typing import Any, cast

from graders.artifact_limits import ReadLimits
from graders.untrusted.cost import Cost, scaled
from graders.untrusted.flop_walk import Count, Plan, Request, Walk, loop_plan
from graders.untrusted.fold import (
    MIXED,
    PASS_FACT_OPS,
    SIGN,
    TAINTED,
    Fact,
    constant_of,
    convert_fact,
    fact_at,
    fold,
    set_facts,
    splat_value,
)
from graders.untrusted.linearity import cotangent_fact, joined_fact
from graders.untrusted.mesh_ops import MANUAL_COMPUTATION, manual_devices
from graders.untrusted.ops import op_flops
from graders.untrusted.parse import mlir_ir
from graders.untrusted.provenance import callee_of
from graders.untrusted.result import ArtifactError
from graders.untrusted.signature import op_signature, recompute_label

MAX_CONTEXTS = 8  # constant-argument patterns walked per function before constants are dropped


class FlopCounter:
    """Counts the FLOPs of `main` of a bounded module (see the module docstring for the rules).

    Args:
        functions: the module's functions by name (already scanned: every callee exists, no
            recursion, caps checked).
        size: (bytes, elements) of a type (`_Types.size`).
        limits: the caps; the walk's stack is refused past (max_depth + 2)·(max_call_depth + 1)
            frames, more than any module `ModuleWalker.scan` accepts can need.
        forward: the signatures (`graders.untrusted.signature.op_signature`) of the forward
            program's live ops, when this is its backward program: ops that repeat one are
            recomputation (`Cost.recompute`). None for a forward program, whose own
            live signatures are collected in `signatures` instead.
        mesh_axes: the problem's mesh (axis name -> size), for `mesh_ops.manual_devices`.
    """

    def __init__(
        self,
        functions: dict[str, Any],
        size: Any,
        limits: ReadLimits,
        forward: frozenset[str] | None = None,
        mesh_axes: Mapping[str, int] | None = None,
    ) -> None:
        self.ir, self.mesh_axes, self.functions = mlir_ir(), dict(mesh_axes or {}), functions
        self.size, self.forward = size, forward
        self.signatures: set[str] = set()  # live ops' signatures (a forward program's)
        self.labels: dict[str, str] = {}  # a recomputed signature's label, first seen
        self.main_block = functions["main"].regions[0].blocks[0]
        self.main_costs: dict[int, int] = {}  # FLOPs of each live op of main's block, by position
        self.n_residuals = 0
        # a block per region level, two per call: the deepest program the scan lets through
        self.max_frames = (limits.max_depth + 2) * (limits.max_call_depth + 1)
        self.memo: dict[tuple[str, tuple[Fact, ...]], Count] = {}
        self.contexts: Counter[str] = Counter()

    def count_main(self, cotangents: int = 0) -> tuple[Cost, bool, Counter[str]]:
        """(the FLOPs of one run of `main`, split by whether they depend on its last `cotangents`
        arguments; exact; the recompute FLOPs by op signature, named in `labels`). Raises
        ArtifactError past the stack cap."""
        n_args = len(self.main_block.arguments)
        n_cot = max(0, min(cotangents, n_args))
        self.n_residuals = n_args - n_cot
        facts: tuple[Fact, ...] = (None,) * (n_args - n_cot) + (TAINTED,) * n_cot
        count = self._drive(("function", "main", facts, None))
        return count.cost, count.exact, count.recomputed

    # -- the driver ------------------------------------------------------------------------------

    def _drive(self, request: Request) -> Count:
        """Runs walk generators from one explicit stack: a step that needs a block or a function
        yields a request and is resumed with its count (memoised per function context)."""
        stack: list[tuple[Walk, tuple[str, tuple[Fact, ...]] | None]] = []
        answer: Count | None = None
        pending: Request | None = request
        while True:
            if pending is not None:
                kind, target, facts, shared = pending
                pending = None
                key = None
                if kind == "function":
                    key = self._context(target, facts)
                    found = self.memo.get(key)
                    if found is not None:
                        answer = found
                        continue
                    walk = self._function(target, key[1])
                else:
                    walk = self._block(target, facts, shared if shared is not None else {})
                if len(stack) >= self.max_frames:
                    raise ArtifactError("the program nests calls and regions too deeply to count its FLOPs")
                stack.append((walk, key))
                answer = None
            if not stack:
                assert answer is not None
                return answer
            walk, key = stack[-1]
            try:
                pending = walk.send(answer) if answer is not None else next(walk)
                answer = None
            except StopIteration as stop:
                stack.pop()
                answer = cast(Count, stop.value)
                if key is not None:
                    self.memo[key] = answer

    def _context(self, name: str, facts: tuple[Fact, ...]) -> tuple[str, tuple[Fact, ...]]:
        """The memo key a call is walked under: its facts, or past `MAX_CONTEXTS` patterns of one
        function, only which arguments depend on a cotangent (and past twice that, all of them)."""
        key = (name, facts)
        if key in self.memo:
            return key
        if self.contexts[name] >= 2 * MAX_CONTEXTS:
            return (name, (TAINTED,) * len(facts))
        if self.contexts[name] >= MAX_CONTEXTS:
            key = (name, tuple(f if f is TAINTED or f is MIXED or f is SIGN else None for f in facts))
            if key in self.memo:
                return key
        self.contexts[name] += 1
        return key

    def _function(self, name: str, facts: tuple[Fact, ...]) -> Walk:
        block = self.functions[name].regions[0].blocks[0]
        return (yield ("block", block, facts, {}))

    # -- one block --------------------------------------------------------------------------------

    def _block(self, block: Any, arg_facts: tuple[Fact, ...], facts: dict[Any, Fact]) -> Walk:
        """Forward: facts and a plan per op (regions and callees walked as they come). Backward:
        liveness from the returned values; live, unfolded ops are counted."""
        for arg, fact in zip(block.arguments, arg_facts, strict=False):
            facts[arg] = fact
        ops = list(block.operations)
        body, terminator = (ops[:-1], ops[-1]) if ops else ([], None)
        plans: list[Plan] = []
        for op in body:
            plan = yield from self._plan(op, facts)
            plans.append(plan)
        roots = list(terminator.operands) if terminator is not None else []
        live: set[Any] = set(roots)
        defined: set[Any] = set(block.arguments)
        cost, exact = Cost(), True
        recomputed: Counter[str] = Counter()
        in_main = block == self.main_block
        for position, op, plan in zip(range(len(body) - 1, -1, -1), reversed(body), reversed(plans), strict=True):
            results = list(op.results)
            defined.update(results)
            if results and not any(r in live for r in results):
                continue  # dead: nothing returned depends on it
            if plan.folded:
                continue
            if plan.alias is not None:
                for r, k in zip(results, plan.alias, strict=True):
                    if r in live and k is not None:
                        live.add(op.operands[k])
                continue
            operands = list(op.operands)
            reads = operands if plan.used_operands is None else [operands[i] for i in plan.used_operands]
            live.update(reads)
            live.update(plan.external)
            cost = cost + plan.cost
            if in_main:
                self.main_costs[position] = plan.cost.high
            exact = exact and plan.exact
            recomputed.update(plan.recomputed)
            if plan.signature is not None:
                self.signatures.add(plan.signature)
        return Count(
            cost=cost,
            exact=exact,
            recomputed=recomputed,
            results=[facts.get(v) for v in roots],
            external=live - defined,
            used_args=frozenset(i for i, arg in enumerate(block.arguments) if arg in live),
        )

    def _plan(self, op: Any, facts: dict[Any, Fact]) -> Generator[Request, Count, Plan]:
        name = op.operation.name
        ins = [facts.get(v) for v in op.operands]
        results = list(op.results)
        callee = callee_of(op)
        if callee is not None:
            count = yield ("function", callee, tuple(ins), None)
            set_facts(facts, results, count.results)
            return Plan(
                cost=count.cost, exact=count.exact, used_operands=sorted(count.used_args), recomputed=count.recomputed
            )
        if name in ("stablehlo.case", "stablehlo.if"):
            return (yield from self._branches(op, ins, facts))
        if name == "stablehlo.while":
            return (yield from self._loop(op, ins, facts))
        if name == MANUAL_COMPUTATION:
            return (yield from self._manual(op, ins, facts))
        consts = [constant_of(f) for f in ins]
        folded = fold(self.ir, op, name, consts)
        if folded is not None:
            value_or_alias, is_alias = folded
            if is_alias:
                alias = cast(list[int | None], value_or_alias)
                set_facts(facts, results, [ins[k] if k is not None else None for k in alias])
                return Plan(alias=alias)
            fact = cast(Fact, value_or_alias)
            set_facts(facts, results, [fact] * len(results))
            return Plan(folded=True)
        flops = op_flops(op, self.size)
        if any(f is TAINTED or f is MIXED or f is SIGN for f in ins):
            fact = cotangent_fact(op, name, ins)  # MIXED: forward work with a cotangent mixed in
            set_facts(facts, results, [fact] * len(results))
            return self._costed(op, flops, residual=fact is MIXED)
        if name == "stablehlo.constant":
            set_facts(facts, results, [splat_value(self.ir, op)])
        elif name in PASS_FACT_OPS and ins:
            set_facts(facts, results, [ins[0]])
        elif name == "stablehlo.convert" and ins:
            set_facts(facts, results, [convert_fact(self.ir, consts[0], results[0].type)])
        return self._costed(op, flops, residual=True)

    def _costed(self, op: Any, flops: int, *, residual: bool) -> Plan:
        """The plan of an op that computes: its FLOPs in every figure it belongs to. In a backward
        program, an op with a forward signature is recomputation when it depends on no cotangent
        (`Cost.recompute`, by signature in `Plan.recomputed`); in a forward program the
        signature is kept for `signatures`."""
        if not flops or (self.forward is not None and not residual):
            # cotangent work is never recomputation: no signature to read for it
            return Plan(cost=Cost.of(flops, residual=residual))
        signature = op_signature(op)
        if self.forward is None:
            return Plan(cost=Cost.of(flops, residual=residual), signature=signature)
        recompute = signature in self.forward
        plan = Plan(cost=Cost.of(flops, residual=True, recompute=recompute))
        if recompute:
            plan.recomputed = Counter({signature: flops})
            if signature not in self.labels:
                self.labels[signature] = recompute_label(op, self.main_block, self.n_residuals)
        return plan

    def _branches(self, op: Any, ins: list[Fact], facts: dict[Any, Fact]) -> Generator[Request, Count, Plan]:
        """A `case` (index operand) or `if` (predicate): the branch a constant selects, else the
        costliest, inexact. StableHLO runs the last branch of a `case` for an index out of range."""
        blocks = [b for region in op.regions for b in region.blocks]
        results = list(op.results)
        if not blocks:
            return Plan()
        index = constant_of(ins[0]) if ins else None
        if index is not None and math.isfinite(index):
            if op.operation.name == "stablehlo.if":
                chosen = 0 if index else min(1, len(blocks) - 1)
            else:
                chosen = int(index) if 0 <= index < len(blocks) else len(blocks) - 1
            count = yield ("block", blocks[chosen], (), facts)
            set_facts(facts, results, count.results)
            return Plan(cost=count.cost, exact=count.exact, external=count.external, recomputed=count.recomputed)
        counts = []
        for block in blocks:
            counts.append((yield ("block", block, (), facts)))
        # a branch a cotangent picks is no linear map: MIXED, like any result a MIXED branch gives
        by_index = bool(ins) and (ins[0] is TAINTED or ins[0] is MIXED or ins[0] is SIGN)
        joined = [joined_fact(by_index, [fact_at(c.results, j) for c in counts]) for j in range(len(results))]
        set_facts(facts, results, joined)
        return Plan(
            cost=Cost.either([c.cost for c in counts]),
            exact=False,
            external=set().union(*(c.external for c in counts)),
            recomputed=max(counts, key=lambda c: c.cost.recompute).recomputed,
        )

    def _manual(self, op: Any, ins: list[Fact], facts: dict[Any, Fact]) -> Generator[Request, Count, Plan]:
        """A `shard_map` body: its block once, on the operands' facts, times the devices it runs on
        (`manual_devices`; raises ArtifactError), so its FLOPs add up to the whole mesh's."""
        blocks = [b for region in op.regions for b in region.blocks]
        if not blocks:
            return Plan()
        count = yield ("block", blocks[0], tuple(ins), facts)
        set_facts(facts, list(op.results), count.results)
        n = manual_devices(op, self.mesh_axes)
        return Plan(
            cost=count.cost.times(n), exact=count.exact, external=count.external, recomputed=scaled(count.recomputed, n)
        )

    def _loop(self, op: Any, ins: list[Fact], facts: dict[Any, Fact]) -> Generator[Request, Count, Plan]:
        return (yield from loop_plan(op, ins, facts))
