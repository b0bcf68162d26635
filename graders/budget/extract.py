"""A forward program's `ForwardGraph`, read from its StableHLO (`jax.export`) in one bounded pass:
the reference's forward program with every checkpoint removed, whose residuals are what the
backward pass needs (docs/ARCHITECTURE.md, "Budget problems").

A node per argument of `main` and per op of `main`'s block, in program order. An op's cost is the
FLOPs the artifact reader counts for it (`graders.untrusted.flops`: a loop times its trip count, a
call its callee's, dead and folded ops nothing), its size the bytes of its results. A loop, a
branch or a call is one node: a policy saves its results or recomputes all of it, so a scan's
layers cannot be split (no nested remat in this model). Every value an op's regions read from
`main`'s block is an operand.

Only the forward pass proper costs anything: a node the primal outputs do not depend on is a
derivative factor JAX computes for the backward pass (`1 - tanh(z)**2` without a checkpoint), which
the judge's recompute figure never counts (`graders.untrusted.flops`: recomputation repeats an op of
the submission's forward program, and a checkpointed forward has none of these), so its cost is 0.
Measured on a 6-layer tanh chain: the optimum then equals the judge's figure of the names policy
that saves the same values (4,743,168 FLOPs saving nothing; 2,646,016 saving two pre-activations).
"""

from __future__ import annotations

from typing import Any

from graders.artifact_limits import ReadLimits
from graders.budget.graph import ForwardGraph, ancestors
from graders.untrusted.flops import FlopCounter
from graders.untrusted.parse import ir_context, parse_module
from graders.untrusted.reader import module_functions
from graders.untrusted.result import ArtifactError, ModuleInfo
from graders.untrusted.signature import short_type
from graders.untrusted.walker import ModuleWalker

MAX_NESTED_OPS = 1_000_000  # ops inside one op's regions visited for the values they read


def _region_reads(op: Any, index: dict[Any, int]) -> set[int]:
    """Nodes of `main`'s block read by the ops inside `op`'s regions (iterative, bounded)."""
    found: set[int] = set()
    stack = [inner for region in op.regions for block in region.blocks for inner in block.operations]
    seen = 0
    while stack:
        inner = stack.pop()
        seen += 1
        if seen > MAX_NESTED_OPS:
            raise ArtifactError("an op's regions hold too many ops to read")
        found.update(index[v] for v in inner.operands if v in index)
        stack.extend(x for region in inner.regions for block in region.blocks for x in block.operations)
    return found


def forward_graph(
    exported: Any, n_out: int, *, limits: ReadLimits = ReadLimits(), arg_names: list[str] | None = None
) -> ForwardGraph:
    """The `ForwardGraph` of a forward program whose results are `n_out` primal outputs and then
    its residuals (the residuals are the needed nodes). Labels read as the residual listings do:
    `argument ws[0] f32[6,20]` (with `arg_names`, the input leaves' names in order) and
    `dot_general f32[4,20]` (the op, short, and its results' types).

    Raises:
        ArtifactError: as `inspect_module` does for a module it cannot read.
    """
    with ir_context():
        module = parse_module(exported)
        functions = module_functions(module, ModuleInfo(), limits, mesh=False)
        walker = ModuleWalker(functions, limits, frozenset(), ModuleInfo(), mesh=False)
        walker.scan()
        counter = FlopCounter(functions, walker.types.size, limits)
        counter.count_main()
        block = counter.main_block
        index: dict[Any, int] = {}
        costs: list[int] = []
        sizes: list[int] = []
        operands: list[tuple[int, ...]] = []
        labels: list[str] = []
        for k, arg in enumerate(block.arguments):
            index[arg] = k
            costs.append(0)
            sizes.append(walker.types.size(arg.type)[0])
            operands.append(())
            name = arg_names[k] if arg_names is not None and k < len(arg_names) else str(k)
            labels.append(f"argument {name} {short_type(arg.type)}")
        ops = list(block.operations)
        for position, op in enumerate(ops[:-1]):
            node = len(costs)
            reads = {index[v] for v in op.operands if v in index} | _region_reads(op, index)
            costs.append(counter.main_costs.get(position, 0))
            sizes.append(sum(walker.types.size(r.type)[0] for r in op.results))
            operands.append(tuple(sorted(reads)))
            labels.append(f"{op.operation.name.split('.', 1)[-1]} " + ", ".join(short_type(r.type) for r in op.results))
            for r in op.results:
                index[r] = node
        returned = list(ops[-1].operands)
        needed = frozenset(index[v] for v in returned[n_out:] if v in index)
        primal = ancestors({index[v] for v in returned[:n_out] if v in index}, operands)
        return ForwardGraph(
            costs=[c if v in primal else 0 for v, c in enumerate(costs)],
            sizes=sizes,
            operands=operands,
            inputs=frozenset(range(len(block.arguments))),
            needed=needed,
            labels=labels,
        )
