"""`problem.toml`, as typed models validated strictly (`ProblemSpec`: entry point, arguments with
their generators, test cases, tolerances, the memory rule, scoring, limits, what the verifier
allows), and `ProblemError` for a package that is not right. The generators and the models' base
are in `graders.problems.generators`."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal, Union

from pydantic import (
    Field,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from graders.problems.generators import Generator, NormalGenerator, RandomBitsGenerator, StrictModel, kind_or
from graders.problems.memory_rule import MemoryRule
from graders.problems.mesh_spec import MeshSpec, check_mesh

SLUG_RE = r"^[a-z][a-z0-9_]{1,63}$"


DIM_RE = r"^[A-Za-z_][A-Za-z0-9_]*$"


INTEGER_DTYPES = ("uint32", "int32")  # argument leaves that are not differentiated


class ProblemError(Exception):
    """A problem package is missing or invalid; the message names the file and the field."""


Dim = Annotated[int, Field(ge=0, le=1 << 20)] | Annotated[str, Field(pattern=DIM_RE)]


class ArraySpec(StrictModel):
    """One array argument (or one item of a list argument).

    Attributes:
        shape: sizes, each an int or a dimension name bound by every case's `dims`.
        dtype: a float dtype name, e.g. "float32", or "uint32"/"int32" for an integer leaf (an RNG
            key's data, a step count): not differentiated, no gradient or finite-difference check
            on it, and what is saved from it is matched exactly.
        generator: how hidden inputs are drawn; an integer leaf takes `{ kind = "random_bits" }`
            and only it.
    """

    shape: list[Dim]
    dtype: Literal["float16", "bfloat16", "float32", "float64", "uint32", "int32"] = "float32"
    generator: Generator = NormalGenerator()

    @model_validator(mode="after")
    def _generator_fits_dtype(self) -> ArraySpec:
        integer = self.dtype in INTEGER_DTYPES
        if integer and not isinstance(self.generator, RandomBitsGenerator):
            raise ValueError(
                f'an {self.dtype} leaf takes generator = {{ kind = "random_bits" }} '
                f"(its values are bits, e.g. an RNG key's data), not {self.generator.kind!r}"
            )
        if not integer and isinstance(self.generator, RandomBitsGenerator):
            raise ValueError(f'the "random_bits" generator is for uint32 and int32 leaves, not {self.dtype}')
        return self


class ArrayArg(ArraySpec):
    """A positional argument that is one array."""

    name: Annotated[str, Field(pattern=DIM_RE)]
    kind: Literal["array"] = "array"


class ListArg(StrictModel):
    """A positional argument that is a Python list of arrays (e.g. `params = [W1, W2, W3]`)."""

    name: Annotated[str, Field(pattern=DIM_RE)]
    kind: Literal["list"]
    items: Annotated[list[ArraySpec], Field(min_length=1, max_length=64)]


TREE_KEY_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
MAX_TREE_LEAVES = 256
MAX_TREE_DEPTH = 16
LEAF_KEYS = frozenset({"shape", "dtype", "generator"})

# A parsed tree: dicts (JAX flattens them in sorted key order) and lists of subtrees, leaves ArraySpec.
TreeNode = Union["ArraySpec", dict[str, "TreeNode"], list["TreeNode"]]


def parse_tree(raw: object, name: str) -> TreeNode:
    """Validates a `tree` argument's nested tables and arrays of tables into a `TreeNode`.

    A table with a `shape` key is a leaf (an array spec: `shape`, `dtype`, `generator`); any other
    table is a dict node, an array a list node. Iterative, bounded by `MAX_TREE_DEPTH` and
    `MAX_TREE_LEAVES`.

    Raises:
        ValueError: naming the path (`params['Dense_0']['kernel']`) of the first fault: an empty
            subtree (JAX flattens it to nothing, so it would hold no argument), a key that is not a
            plain name, a leaf that is not an array spec, too deep or too many leaves.
    """
    root: list[TreeNode] = [None]  # type: ignore[list-item]  # filled below
    stack: list[tuple[object, str, int, object, object]] = [(raw, name, 0, root, 0)]
    leaves = 0
    while stack:
        node, path, depth, parent, slot = stack.pop()
        if depth > MAX_TREE_DEPTH:
            raise ValueError(f"{path}: a tree may nest at most {MAX_TREE_DEPTH} levels")
        parsed: TreeNode
        if isinstance(node, dict) and "shape" in node:
            try:
                parsed = ArraySpec.model_validate(node)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first.get("loc", ()))
                raise ValueError(f"{path}: not an array spec ({where}: {first.get('msg')})") from None
            leaves += 1
            if leaves > MAX_TREE_LEAVES:
                raise ValueError(f"{name}: a tree may hold at most {MAX_TREE_LEAVES} arrays")
        elif isinstance(node, dict):
            if not node:
                raise ValueError(f"{path}: an empty table holds no array (JAX flattens it to nothing)")
            stray = sorted(set(node) & LEAF_KEYS)
            if stray:
                raise ValueError(f"{path}: {stray[0]!r} without 'shape' (an array spec needs a shape)")
            parsed = {}
            for key in sorted(node):
                if not isinstance(key, str) or not TREE_KEY_RE.match(key):
                    raise ValueError(f"{path}: key {str(key)[:40]!r} is not a plain name (letters, digits, _ . -)")
                stack.append((node[key], f"{path}[{key!r}]", depth + 1, parsed, key))
        elif isinstance(node, list):
            if not node:
                raise ValueError(f"{path}: an empty array holds no array (JAX flattens it to nothing)")
            parsed = [None] * len(node)  # type: ignore[list-item]  # filled as the stack unwinds
            for i, item in enumerate(node):
                stack.append((item, f"{path}[{i}]", depth + 1, parsed, i))
        else:
            raise ValueError(f"{path}: expected a table (an array spec or a subtree) or an array of them")
        parent[slot] = parsed  # type: ignore[index]  # a dict by key or a list by position
    return root[0]


def tree_leaves(node: TreeNode, name: str) -> list[tuple[str, ArraySpec]]:
    """(path, spec) of every leaf of a parsed tree in JAX's flatten order (dict keys sorted, lists
    in order), e.g. `params['Dense_0']['bias']` before `params['Dense_0']['kernel']`."""
    out: list[tuple[str, ArraySpec]] = []
    stack: list[tuple[TreeNode, str]] = [(node, name)]
    while stack:
        current, path = stack.pop()
        if isinstance(current, dict):
            stack.extend((current[k], f"{path}[{k!r}]") for k in reversed(sorted(current)))
        elif isinstance(current, list):
            stack.extend((current[i], f"{path}[{i}]") for i in reversed(range(len(current))))
        else:
            out.append((path, current))
    return out


class TreeArg(StrictModel):
    """A positional argument that is a pytree of arrays: the nested dicts and lists a framework's
    parameters take (`params['Dense_0']['kernel']`, stacked `[L, ...]` leaves for scanned layers).
    In problem.toml, `tree` is a table of tables: a table with a `shape` is a leaf, any other a
    subtree; an array of tables is a list. Leaves are passed, drawn and named in JAX's flatten
    order (`tree_leaves`)."""

    name: Annotated[str, Field(pattern=DIM_RE)]
    kind: Literal["tree"]
    tree: Any

    @field_validator("tree", mode="before")
    @classmethod
    def _parse(cls, raw: object, info: ValidationInfo) -> TreeNode:
        return parse_tree(raw, str(info.data.get("name", "tree")))

    def leaves(self) -> list[tuple[str, ArraySpec]]:
        """(path, spec) per array leaf, in JAX's flatten order."""
        return tree_leaves(self.tree, self.name)


class StaticArg(StrictModel):
    """A positional argument passed as a Python value (a bool, int, float or str), set per case."""

    name: Annotated[str, Field(pattern=DIM_RE)]
    kind: Literal["static"]


Arg = Annotated[
    Annotated[ArrayArg, Tag("array")]
    | Annotated[ListArg, Tag("list")]
    | Annotated[TreeArg, Tag("tree")]
    | Annotated[StaticArg, Tag("static")],
    kind_or("array"),
]


class CaseSpec(StrictModel):
    """A test case: sizes for the named dimensions and values for the static arguments."""

    name: Annotated[str, Field(pattern=DIM_RE)]
    dims: dict[Annotated[str, Field(pattern=DIM_RE)], Annotated[int, Field(ge=0, le=1 << 20)]] = {}
    static: dict[str, bool | int | float | str] = {}


class Tolerance(StrictModel):
    """|submitted - expected| <= atol * max(1, max|expected|) + rtol * |expected|, elementwise."""

    rtol: Annotated[float, Field(ge=0)] = 1e-4
    atol: Annotated[float, Field(ge=0)] = 1e-5


class Scoring(StrictModel):
    """Weights of the three parts of a score; they must sum to 1."""

    value: Annotated[float, Field(ge=0)] = 0.34
    gradient: Annotated[float, Field(ge=0)] = 0.33
    policy: Annotated[float, Field(ge=0)] = 0.33

    @model_validator(mode="after")
    def _sums_to_one(self) -> Scoring:
        total = self.value + self.gradient + self.policy
        if not math.isclose(total, 1.0, abs_tol=1e-6):
            raise ValueError(f"scoring weights must sum to 1, they sum to {total}")
        return self


class ProblemLimits(StrictModel):
    """Per-problem jail limits (units in the names); unset fields use the deployment's defaults."""

    wall_time_limit_s: Annotated[float, Field(gt=0, le=600)] | None = None
    cpu_time_limit_s: Annotated[float, Field(gt=0, le=600)] | None = None
    memory_limit_mib: Annotated[int, Field(ge=512, le=65536)] | None = None


class VerifySpec(StrictModel):
    """How hard the verifier looks.

    Attributes:
        inputs_per_case: fresh hidden inputs (each with its own random cotangent) per case.
        allowed_custom_calls: custom_call targets this problem permits (none by default).
    """

    inputs_per_case: Annotated[int, Field(ge=1, le=20)] = 3
    allowed_custom_calls: list[str] = []


class ProblemSpec(StrictModel):
    """`problem.toml`."""

    slug: Annotated[str, Field(pattern=SLUG_RE)]
    title: Annotated[str, Field(min_length=1, max_length=200)]
    difficulty: Literal["easy", "medium", "hard"]
    tags: list[Annotated[str, Field(min_length=1, max_length=60)]] = []
    order: Annotated[int, Field(ge=0, le=100_000)] | None = None  # place in the course list (lowest first)
    entry_point: Annotated[str, Field(pattern=DIM_RE)]
    args: Annotated[list[Arg], Field(min_length=1, max_length=32)]
    cases: Annotated[list[CaseSpec], Field(min_length=1, max_length=16)]
    tolerance: dict[Literal["float16", "bfloat16", "float32", "float64"], Tolerance] = {}
    memory: MemoryRule = MemoryRule()
    scoring: Scoring = Scoring()
    limits: ProblemLimits = ProblemLimits()
    verify: VerifySpec = VerifySpec()
    mesh: MeshSpec | None = None  # devices and partitions (graders.problems.mesh_spec)

    @field_validator("args")
    @classmethod
    def _unique_arg_names(cls, args: list[Arg]) -> list[Arg]:
        names = [a.name for a in args]
        if len(set(names)) != len(names):
            raise ValueError(f"argument names must be unique, got {names}")
        return args

    @field_validator("cases")
    @classmethod
    def _cases_bind_everything(cls, cases: list[CaseSpec], info: ValidationInfo) -> list[CaseSpec]:
        names = [c.name for c in cases]
        if len(set(names)) != len(names):
            raise ValueError(f"case names must be unique, got {names}")
        args = info.data.get("args")
        if args is None:  # args failed validation; that error is reported already
            return cases
        needed = {d for spec in array_specs(args) for d in spec.shape if isinstance(d, str)}
        statics = {a.name for a in args if isinstance(a, StaticArg)}
        for case in cases:
            missing = needed - set(case.dims)
            if missing:
                raise ValueError(f"case {case.name!r} does not give dims {sorted(missing)}")
            if set(case.static) != statics:
                raise ValueError(
                    f"case {case.name!r} must give static values for exactly {sorted(statics)}, "
                    f"it gives {sorted(case.static)}"
                )
        return cases

    @model_validator(mode="after")
    def _mesh_fits_args_and_cases(self) -> ProblemSpec:
        if self.mesh is not None:
            check_mesh(self.mesh, partitionable_shapes(self.args), {c.name: c.dims for c in self.cases})
            if self.memory.rule == "budget":
                raise ValueError("a budget problem on a mesh is not supported yet: its optimum counts one device")
            if self.memory.bounds_peak:
                # the judge's static peak counts the partitioned program's global arrays; per device
                # only XLA's compiled figures exist, reported beside it (graders/verifier/xla_memory.py)
                raise ValueError(
                    "a problem on a mesh cannot bound the backward pass's peak (rule at_most or "
                    "bound_bwd_peak): there the peak is reported per device by XLA, not judged; use "
                    'rule = "exact"'
                )
        return self

    @model_validator(mode="after")
    def _a_budget_per_case(self) -> ProblemSpec:
        if self.memory.rule == "budget":
            names = {c.name for c in self.cases}
            if set(self.memory.budgets) != names:
                raise ValueError(
                    f"memory.budgets must give every case a budget and name no other: cases {sorted(names)}, "
                    f"budgets {sorted(self.memory.budgets)}"
                )
        return self

    @property
    def device_count(self) -> int:
        """How many devices a case runs on: the mesh's, or 1 without a `[mesh]`."""
        return 1 if self.mesh is None else self.mesh.device_count

    @property
    def mesh_plain(self) -> dict[str, Any] | None:
        """The mesh as the plain JSON the jail and the exporter take (`MeshSpec.plain()`), or None."""
        return None if self.mesh is None else self.mesh.plain()

    @property
    def mesh_axes(self) -> dict[str, int] | None:
        """The mesh's axis sizes in order (`inspect_module`'s `mesh_axes`), or None without a mesh."""
        return None if self.mesh is None else dict(self.mesh.axes)

    def tolerance_for(self, dtype: str) -> Tolerance:
        """The tolerance for outputs of `dtype` (the default Tolerance when unset)."""
        # (not `.get(dtype)`: the keys are the float dtypes' Literal names, `dtype` any name)
        for name, tolerance in self.tolerance.items():
            if name == dtype:
                return tolerance
        return Tolerance()


def array_specs(args: list[Arg]) -> list[ArraySpec]:
    """The array specs of `args` in the order the exported programs take them: an array argument,
    the items of a list argument, the leaves of a tree argument (JAX's flatten order); static
    arguments have none."""
    out: list[ArraySpec] = []
    for a in args:
        if isinstance(a, ArrayArg):
            out.append(a)
        elif isinstance(a, ListArg):
            out.extend(a.items)
        elif isinstance(a, TreeArg):
            out.extend(spec for _, spec in a.leaves())
    return out


def partitionable_shapes(args: list[Arg]) -> dict[str, list[Dim] | None]:
    """What `[mesh.partition]` may name -> its shape: an array argument by name, a list's items
    (`params[0]`) and a tree's leaves (`params['Dense_0']['kernel']`) by path; a static, list or
    tree argument's own name -> None (no single array)."""
    out: dict[str, list[Dim] | None] = {}
    for a in args:
        out[a.name] = a.shape if isinstance(a, ArrayArg) else None
        if isinstance(a, ListArg):
            out.update((f"{a.name}[{i}]", item.shape) for i, item in enumerate(a.items))
        elif isinstance(a, TreeArg):
            out.update((path, leaf.shape) for path, leaf in a.leaves())
    return out
