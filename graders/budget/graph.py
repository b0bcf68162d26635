"""The forward program as the optimum of a budget problem sees it: one node per operation, what it
costs to compute (FLOPs) and to keep (bytes), what it reads, and which values the backward pass
needs (docs/ARCHITECTURE.md, "Budget problems")."""

from __future__ import annotations

from dataclasses import dataclass, field


def ancestors(roots: set[int] | frozenset[int], operands: list[tuple[int, ...]]) -> set[int]:
    """`roots` and every node they read, transitively (iterative: linear in the nodes reached)."""
    found: set[int] = set()
    stack = list(roots)
    while stack:
        v = stack.pop()
        if v not in found:
            found.add(v)
            stack.extend(operands[v])
    return found


@dataclass(frozen=True)
class ForwardGraph:
    """A forward program as a DAG, nodes in program order (every operand before its reader).

    Attributes:
        costs: per node, FLOPs of computing it once (0 for an argument or a constant).
        sizes: per node, bytes of keeping it until the backward pass (per device on a mesh).
        operands: per node, the nodes it reads (each before it).
        inputs: the argument nodes: always available in the forward pass, never recomputed; the
            backward pass can read one only if it is saved (its bytes count, as JAX's residuals do).
        needed: the nodes the backward pass reads: the residuals of the same function without any
            checkpoint (what autodiff keeps when it keeps everything it uses).
        labels: per node, how the panel names it (`tanh(...) -> f32[64,32]`).

    Raises:
        ValueError (from `check`): an operand after its reader, a negative cost or size, a needed
            node or an input out of range.
    """

    costs: list[int]
    sizes: list[int]
    operands: list[tuple[int, ...]]
    inputs: frozenset[int]
    needed: frozenset[int]
    labels: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.check()

    def __len__(self) -> int:
        return len(self.costs)

    def check(self) -> None:
        """Raises ValueError when the graph is not a DAG in program order with sane numbers."""
        n = len(self.costs)
        if len(self.sizes) != n or len(self.operands) != n or (self.labels and len(self.labels) != n):
            raise ValueError("costs, sizes, operands and labels must have one entry per node")
        for v, reads in enumerate(self.operands):
            if any(not 0 <= u < v for u in reads):
                raise ValueError(f"node {v} reads a node that is not before it: {reads}")
        if any(c < 0 for c in self.costs) or any(b < 0 for b in self.sizes):
            raise ValueError("costs and sizes must be non-negative")
        if any(not 0 <= v < n for v in self.needed | self.inputs):
            raise ValueError("needed and input nodes must be nodes of the graph")
        if any(self.operands[v] for v in self.inputs):
            raise ValueError("an input reads nothing")

    def recompute_of(self, saved: frozenset[int]) -> int | None:
        """FLOPs the backward pass redoes when `saved` is kept: every needed node not saved is
        recomputed once, with every node it reads that is neither saved nor already recomputed;
        None when that needs an input that is not saved (the policy cannot run).

        Linear in the graph's size (each node visited once, iteratively).
        """
        recomputed: set[int] = set()
        stack = [v for v in self.needed if v not in saved]
        while stack:
            v = stack.pop()
            if v in recomputed:
                continue
            if v in self.inputs:
                return None
            recomputed.add(v)
            stack.extend(u for u in self.operands[v] if u not in saved and u not in recomputed)
        return sum(self.costs[v] for v in recomputed)

    def bytes_of(self, saved: frozenset[int]) -> int:
        """Bytes of keeping `saved`."""
        return sum(self.sizes[v] for v in saved)
