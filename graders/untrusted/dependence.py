"""Which values of an untrusted program carry information about its arguments, and which arguments
of a backward program are only ever used to pick a branch: what decides that a saved residual is
bookkeeping (docs/ARCHITECTURE.md, "Bookkeeping residuals").

A residual is left out of the comparison with the reference and out of every budget only when it
tells the backward pass nothing about the inputs. That is decided on the artifact, never on the
residual's dtype or size (an activation bitcast to int32 and cut into 256-element pieces is an
integer array as small as a loop counter):

- `argument_dependence`: per output of a forward program's `main`, whether the data of any of its
  floating-point arguments flows into it, through any op, call, loop carry or branch, including
  the implicit flows of a data-dependent branch index or loop condition. A `fori_loop` counter
  (constants and `+ 1`), a scan's stacked counters, an `iota` and a PRNG key split from a key
  argument depend on none; a bitcast, a quantization, a comparison, an `argmax` or a mask of an
  activation depend on them.
- `selector_arguments`: per argument of a backward program's `main`, whether every use of it is
  the index of a `case` (or the predicate of an `if`), reached only through data movement
  (reshape, convert, slices, a loop carry, a call). Such a value tells the backward pass which
  branch to take and nothing else: at most log2(branches) bits per element.

Both are one forward pass over each function (callees first, each summarised once as a map from
its arguments to its results), iterative over nested regions with an explicit stack. A loop body
is walked once with a fresh symbol per carried value; which carried values depend on what is then
a fixed point on those symbols alone (at most one round per carried value), so a module is read in
time linear in its ops times the width of the masks. Every value's mask is a Python integer: bit i
is argument i of the function being read, higher bits a loop's carried values.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from graders.untrusted.mesh_ops import MANUAL_COMPUTATION, SHARDING_OPS
from graders.untrusted.ops import ALIASING_OPS, MOVE_OPS
from graders.untrusted.parse import mlir_ir
from graders.untrusted.provenance import callee_of

# Ops whose results hold (some of) their operands' elements as they are: a selector may pass
# through them and still be only a selector. `dynamic_slice` and `gather` move their data operand;
# their indices are a use of their own (`_DATA_OPERAND`).
_MOVING = (
    MOVE_OPS
    | ALIASING_OPS
    | SHARDING_OPS
    | frozenset(
        {
            "stablehlo.slice",
            "stablehlo.reverse",
            "stablehlo.concatenate",
            "stablehlo.get_tuple_element",
            "stablehlo.tuple",
        }
    )
)
_DATA_OPERAND = {"stablehlo.dynamic_slice": 0, "stablehlo.gather": 0}
_BRANCHING = frozenset({"stablehlo.case", "stablehlo.if"})
_RETURNS = frozenset({"stablehlo.return", "func.return", "sdy.return"})


def _bits(mask: int) -> Iterator[int]:
    """The positions of the set bits of `mask`, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


@dataclass
class _Summary:
    """A function read once: per result, the mask of its arguments the result carries; and (for
    the selector reading) the mask of arguments some op uses as more than a branch selector."""

    results: list[int]
    misused: int = 0


@dataclass
class _Loop:
    """A `while` being read: its carried values' initial masks and the symbol bit of each."""

    init: list[int]
    symbols: list[int]


@dataclass
class _Frame:
    """A block being read: its ops, the next one, and (once read) the masks it returns."""

    block: Any
    ops: list[Any]
    index: int = 0
    pending: Any = None  # an op whose regions are being read; finished when the frame resumes
    returned: list[int] = field(default_factory=list)
    used: int = 0  # the masks of every operand any op of the block (or a nested one) reads


class _Reader:
    """One function's forward pass. `selector` chooses the reading: False for dependence (every
    op's results carry all its operands), True for the selector reading (data movement carries,
    a branch index is a terminal use, anything else marks its operands `misused`)."""

    def __init__(self, functions: dict[str, Any], summaries: dict[str, _Summary], *, selector: bool) -> None:
        self.functions, self.summaries, self.selector = functions, summaries, selector
        self.mask: dict[Any, int] = {}
        self.loops: dict[Any, _Loop] = {}
        self.next_bit = 0
        self.misused = 0
        self.block_returned: dict[Any, list[int]] = {}
        self.block_used: dict[Any, int] = {}

    def of(self, value: Any) -> int:
        return self.mask.get(value, 0)

    def symbol(self) -> int:
        bit = 1 << self.next_bit
        self.next_bit += 1
        return bit

    def read(self, name: str) -> _Summary:
        """Reads function `name` (its callees already summarised) with argument i as bit i."""
        entry = self.functions[name].regions[0].blocks[0]
        for arg in entry.arguments:
            self.mask[arg] = self.symbol()
        frames = [_Frame(entry, list(entry.operations))]
        while frames:
            frame = frames[-1]
            if frame.pending is not None:
                op, frame.pending = frame.pending, None
                frame.used |= self._finish(op)
            if frame.index >= len(frame.ops):
                frames.pop()
                self.block_returned[frame.block] = frame.returned
                self.block_used[frame.block] = frame.used
                if frames:
                    frames[-1].used |= frame.used
                continue
            op = frame.ops[frame.index]
            frame.index += 1
            masks = [self.of(v) for v in op.operands]
            for m in masks:
                frame.used |= m
            if op.operation.name in _RETURNS:
                frame.returned = masks
                if self.selector and frame.block is entry and name == "main":
                    self.misused |= _or(masks)  # a selector returned as a gradient is data
                continue
            if len(op.regions):
                self._enter(op, masks)
                frame.pending = op
                for region in reversed(list(op.regions)):
                    for block in reversed(list(region.blocks)):
                        frames.append(_Frame(block, list(block.operations)))
                continue
            self._plain(op, masks)
        returned = self.block_returned.get(entry, [])
        return _Summary(results=returned, misused=self.misused)

    # -- ops without regions ------------------------------------------------------------------

    def _plain(self, op: Any, masks: list[int]) -> None:
        name = op.operation.name
        callee = callee_of(op)
        if callee is not None:
            summary = self.summaries[callee]
            outs = [_through(m, masks) for m in summary.results]
            self.misused |= _through(summary.misused, masks)
            for result, m in zip(op.results, outs, strict=False):
                self.mask[result] = m
            return
        if self.selector and name in ALIASING_OPS:
            for result, m in zip(op.results, masks, strict=False):
                self.mask[result] = m
            return
        if self.selector and name in _DATA_OPERAND:
            data = _DATA_OPERAND[name]
            self.misused |= _or(m for i, m in enumerate(masks) if i != data)
            carried = masks[data] if data < len(masks) else 0
        else:
            carried = _or(masks)
            if self.selector and name not in _MOVING:
                self.misused |= carried
        for result in op.results:
            self.mask[result] = carried

    # -- ops with regions ---------------------------------------------------------------------

    def _enter(self, op: Any, masks: list[int]) -> None:
        """Sets the masks of the block arguments of `op`'s regions before they are read."""
        name = op.operation.name
        blocks = [b for region in op.regions for b in region.blocks]
        if name == "stablehlo.while":
            symbols = [self.symbol() for _ in masks]
            self.loops[op] = _Loop(init=masks, symbols=symbols)
            for block in blocks:
                for arg, bit in zip(block.arguments, symbols, strict=False):
                    self.mask[arg] = bit
            return
        if name == MANUAL_COMPUTATION:
            for block in blocks:
                for arg, m in zip(block.arguments, masks, strict=False):
                    self.mask[arg] = m
            return
        if self.selector and name in _BRANCHING:
            return  # the index is a selector: its one terminal use
        # a reduction's, sort's or scatter's body: every argument may hold any operand's data
        everything = _or(masks)
        if self.selector:
            self.misused |= everything
        for block in blocks:
            for arg in block.arguments:
                self.mask[arg] = everything

    def _finish(self, op: Any) -> int:
        """Sets the masks of `op`'s results once its regions are read; returns the mask of what
        its regions read, for the block holding it (loop symbols resolved)."""
        name = op.operation.name
        blocks = [b for region in op.regions for b in region.blocks]
        masks = [self.of(v) for v in op.operands]
        used = _or(self.block_used.get(b, 0) for b in blocks)
        if name == "stablehlo.while" and op in self.loops:
            return self._finish_loop(op, blocks, used)
        if name == MANUAL_COMPUTATION or name in _BRANCHING:
            returned = [self.block_returned.get(b, []) for b in blocks]
            implicit = masks[0] if masks and name in _BRANCHING and not self.selector else 0
            for j, result in enumerate(op.results):
                self.mask[result] = implicit | _or(r[j] for r in returned if j < len(r))
            return used
        everything = _or(masks) | used
        if self.selector:
            self.misused |= used
        for result in op.results:
            self.mask[result] = everything
        return used

    def _finish_loop(self, op: Any, blocks: list[Any], used: int) -> int:
        """A `while`: the carried values' masks at the fixed point of init | body(carried), read on
        the symbols alone; the results also carry what the condition reads (the trip count), and
        in the selector reading any use by the condition misuses the value."""
        loop = self.loops[op]
        all_symbols = _or(loop.symbols)
        body = self.block_returned.get(blocks[-1], []) if len(blocks) > 1 else []
        carried = list(loop.init)
        for _ in range(len(carried) + 1):
            grown = [
                c | (_resolve(body[i], loop.symbols, carried, all_symbols) if i < len(body) else 0)
                for i, c in enumerate(carried)
            ]
            if grown == carried:
                break
            carried = grown
        condition = self.block_returned.get(blocks[0], []) if blocks else []
        trips = _resolve(_or(condition), loop.symbols, carried, all_symbols)
        if self.selector:
            self.misused |= trips | _resolve(self.block_used.get(blocks[0], 0), loop.symbols, carried, all_symbols)
            self.misused = _resolve(self.misused, loop.symbols, carried, all_symbols)
            trips = 0
        for result, c in zip(op.results, carried, strict=False):
            self.mask[result] = c | trips
        return _resolve(used, loop.symbols, carried, all_symbols)


def _or(masks: Any) -> int:
    out = 0
    for m in masks:
        out |= m
    return out


def _through(summary_mask: int, operands: list[int]) -> int:
    """What a callee's mask over its arguments is over the caller's values: the union of the
    masks of the operands it names."""
    return _or(operands[i] for i in _bits(summary_mask) if i < len(operands))


def _resolve(mask: int, symbols: list[int], carried: list[int], all_symbols: int) -> int:
    """`mask` with each loop symbol replaced by what that carried value holds."""
    if not mask & all_symbols:
        return mask
    out = mask & ~all_symbols
    for k, bit in enumerate(symbols):
        if mask & bit:
            out |= carried[k]
    return out


def _summaries(functions: dict[str, Any], order: list[str], *, selector: bool) -> _Summary:
    summaries: dict[str, _Summary] = {}
    for name in order:
        summaries[name] = _Reader(functions, summaries, selector=selector).read(name)
    return summaries["main"]


def argument_dependence(functions: dict[str, Any], order: list[str]) -> list[bool]:
    """Per output of `main`, whether the data of any of its floating-point (or complex) arguments
    flows into it: the inputs activations are computed from. An integer argument (a PRNG key's
    data, token ids) is not counted: what is computed from it alone holds no activation.

    Args:
        functions: the module's functions by name, already bounded (`ModuleWalker.scan`).
        order: the functions reachable from main, callees first (`ModuleWalker.call_order`).

    Returns:
        One bool per operand of main's return: False only when the value is computed from
        constants, iotas, device indices and integer arguments alone, whatever path it takes.
    """
    main = _summaries(functions, order, selector=False)
    ir = mlir_ir()
    data = 0
    for i, arg in enumerate(functions["main"].regions[0].blocks[0].arguments):
        element = arg.type.maybe_downcast().element_type
        if not isinstance(element, ir.IntegerType):
            data |= 1 << i
    return [bool(m & data) for m in main.results]


def selector_arguments(functions: dict[str, Any], order: list[str]) -> list[bool]:
    """Per argument of `main`, whether the program uses it only to pick branches: every use is a
    `case` index or an `if` predicate, reached through data movement, calls and loop carries.

    Args:
        functions, order: as for `argument_dependence`.

    Returns:
        One bool per argument of main; an argument the program never reads counts as one.
    """
    main = _summaries(functions, order, selector=True)
    n_args = len(functions["main"].regions[0].blocks[0].arguments)
    return [not (main.misused >> i) & 1 for i in range(n_args)]
