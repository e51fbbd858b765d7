#!/usr/bin/env python3
"""Find import circles among ptojax's modules (imports run when a module is first imported).

Usage: python3 tools/check_cycles.py [REPO_ROOT]
Prints each circle as ``a -> b -> a`` and exits 1 if there is one, 0 otherwise.

The graph has an edge from a module to every ptojax module it imports at module level (statements
outside function bodies: those run at import time). ``from .pkg import name`` is an edge to
``pkg.name`` where that is a module, else to ``pkg`` (its ``__init__``). Standard library only, so
that CI runs it before anything is installed; the circles are the strongly connected components of
the graph (Tarjan's algorithm).
"""
from __future__ import annotations

import ast
import pathlib
import sys


def modules(root: pathlib.Path) -> dict[str, pathlib.Path]:
    """Every module of the package, by dotted name (a package by its own name, for ``__init__``)."""
    found = {}
    for path in sorted((root / "ptojax").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _import_time(body):
    """The statements of a module body that run at import time, nested blocks included."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        yield node
        for field in ("body", "orelse", "finalbody", "handlers"):
            yield from _import_time(getattr(node, field, ()) or ())


def imports(name: str, path: pathlib.Path, known) -> set[str]:
    """The ptojax modules that module ``name`` (at ``path``) imports at import time."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in _import_time(ast.parse(path.read_text(), str(path)).body):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                target = f"{module}.{alias.name}"
                found.add(target if target in known else module)
    return {m for m in found if m in known and m != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _circle(component: list[str], graph) -> list[str]:
    """One circle through the first module of a component, for the message."""
    start, members = component[0], set(component)
    paths, seen = [[start]], {start}
    while paths:
        path = paths.pop(0)
        for w in sorted(graph[path[-1]] & members):
            if w == start:
                return path + [start]
            if w not in seen:
                seen.add(w)
                paths.append(path + [w])
    return component


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    known = modules(root)
    graph = {name: imports(name, path, known) for name, path in known.items()}
    found = cycles(graph)
    for component in found:
        print(" -> ".join(_circle(component, graph)))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
