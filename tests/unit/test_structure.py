"""The shape of the code, checked on its syntax trees (docs/ARCHITECTURE.md, "The map"): no
import cycle, counting imports inside functions and type-checking imports, between modules nor
between the server's packages; an import inside a function only with its reason
(a start-up or a jail kept light), the CLI's commands and the verifier child's entry point aside;
no private name imported across modules; no module over 400 lines or function over 60
(migrations aside); no two modules of one name (the CLI's command groups aside); comments that
say what and why, not which issue."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from tests.support import REPO

PACKAGES = ("server", "graders", "sandbox", "jailside")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def _modules() -> Iterator[tuple[str, Path]]:
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if "migrations" in path.parts and "versions" in path.parts:
                continue
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            yield name, path


MODULES = dict(_modules())


def _imports(name: str, tree: ast.Module) -> Iterator[tuple[str, list[str], int]]:
    """(imported module, names, line) of every first-party import, at any depth, type-checking
    imports too: an annotation that names a type from a floor above is an edge the wrong way, which
    an outside reader of the imports (pydeps, grimp) counts as one."""
    package = name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PACKAGES:
                    yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            if base.split(".")[0] in PACKAGES:
                yield base, [a.name for a in node.names], node.lineno


TREES = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in MODULES.items()}


def _target(module: str, names: list[str]) -> list[str]:
    """The modules an import statement depends on: `from pkg import mod` names a module too."""
    found = [f"{module}.{n}" for n in names if f"{module}.{n}" in MODULES]
    return found or ([module] if module in MODULES else [])


def _module_graph() -> dict[str, set[str]]:
    """Each module and the first-party modules it imports, inside functions and for type checking too."""
    graph = {
        name: {t for module, names, _ in _imports(name, tree) for t in _target(module, names) if t != name}
        for name, tree in TREES.items()
    }
    # a package's __init__ that imports its own modules is not a cycle with them
    for name in graph:
        graph[name] = {t for t in graph[name] if not name.startswith(t + ".") or MODULES[t].name != "__init__.py"}
    return graph


GRAPH = _module_graph()


def _cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The cycles a depth-first walk of `graph` meets, each as a path back to its start."""
    state: dict[str, int] = {}
    cycles: list[list[str]] = []
    for root in graph:
        if state.get(root):
            continue
        stack: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        path = [root]
        state[root] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                state[node] = 2
            elif state.get(child) == 1:
                cycles.append(path[path.index(child) :] + [child])
            elif not state.get(child):
                state[child] = 1
                path.append(child)
                stack.append((child, iter(sorted(graph.get(child, ())))))
    return cycles


def _server_package(module: str) -> str | None:
    """The server package a module is in (`server.web` for `server.web.rendering`); a module at the
    top of the server (`server.services`, `server.deps`) is a package of its own. None outside
    the server, and for `server` itself."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "server" and len(parts) > 1 else None


def _package_graph(graph: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
    """Each server package and the other server packages its modules import."""
    packages: dict[str, set[str]] = {}
    for name, targets in graph.items():
        if (source := _server_package(name)) is not None:
            found = {_server_package(t) for t in targets} - {None, source}
            packages.setdefault(source, set()).update(p for p in found if p is not None)
    return packages


def test_no_import_cycle_even_through_imports_inside_functions() -> None:
    assert _cycles(GRAPH) == []


def test_no_import_cycle_between_the_servers_packages() -> None:
    """Two packages whose modules import each other are one floor, even with no module cycle
    (docs/ARCHITECTURE.md, "The server's floors"; pyproject.toml's layers say which way)."""
    packages = _package_graph(GRAPH)
    assert {"server.services", "server.deps", "server.web", "server.submissions"} <= packages.keys()
    assert _cycles(packages) == []


def test_a_cycle_of_packages_without_a_cycle_of_modules_is_found() -> None:
    """The positive control: a.x imports b.y and b.z imports a.w, which no module cycle shows."""
    graph = {"server.a.x": {"server.b.y"}, "server.b.y": set(), "server.b.z": {"server.a.w"}, "server.a.w": set()}
    assert _cycles(graph) == []
    assert _cycles(_package_graph(graph)) == [["server.a", "server.b", "server.a"]]


def test_an_import_for_type_checking_only_is_an_edge() -> None:
    """The positive control: the container naming LTI's service in an annotation depends on it."""
    tree = ast.parse(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from server.lti.service import LtiService\n"
    )
    assert [module for module, _, _ in _imports("server.services", tree)] == ["server.lti.service"]


def test_no_private_name_is_imported_from_another_module() -> None:
    found = [
        f"{name}:{line} imports {n} from {module}"
        for name, tree in TREES.items()
        for module, names, line in _imports(name, tree)
        for n in names
        if n.startswith("_") and not n.startswith("__")
    ]
    assert found == []


def test_modules_and_functions_stay_small() -> None:
    long_modules = [
        f"{name}: {n} lines"
        for name, path in MODULES.items()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    long_functions = [
        f"{name}.{node.name}: {node.end_lineno - node.lineno + 1} lines"
        for name, tree in TREES.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long_modules == [] and long_functions == []


def test_no_two_modules_share_a_name() -> None:
    seen: dict[str, list[str]] = {}
    for name, path in MODULES.items():
        if path.name != "__init__.py" and not name.startswith("server.cli.") and "migrations" not in path.parts:
            seen.setdefault(path.name, []).append(name)
    assert {k: v for k, v in seen.items() if len(v) > 1} == {}


def test_comments_say_what_not_which_issue() -> None:
    issue = re.compile(r"\b[Ii]ssues? ?#?\d+")
    roots = [REPO / p for p in (*PACKAGES, "tests", "bench")]
    found = [
        f"{path.relative_to(REPO)}:{i}"
        for root in roots
        for path in sorted(root.rglob("*.py"))
        if path != Path(__file__)
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if issue.search(line)
    ]
    assert found == []


def test_an_import_inside_a_function_says_why() -> None:
    """A comment on the import's line or just above its group of imports gives the reason."""
    found = []
    for name, tree in TREES.items():
        if name.startswith("server.cli") or name == "graders.verifier.main":
            continue
        src = MODULES[name].read_text(encoding="utf-8").splitlines()
        inside = {
            n.lineno
            for fn in ast.walk(tree)
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
            for n in ast.walk(fn)
            if isinstance(n, ast.Import | ast.ImportFrom)
        }
        for line in sorted(inside):
            above = line - 1
            while above >= 1 and (above in inside or not src[above - 1].strip()):
                above -= 1
            reasons = [src[k - 1] for k in range(above, line + 1) if k >= 1]
            if not any(r.strip().startswith("#") or "  # " in r for r in reasons):
                found.append(f"{name}:{line}: {src[line - 1].strip()}")
    assert found == []
