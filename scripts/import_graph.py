"""The figures of docs/layers.md: evalcore's package-level import graph, counted over every import (inside
functions too).

A node is the first name under ``evalcore`` (``evalcore/config.py`` → ``config``, ``evalcore/metrics/bleu.py`` →
``metrics``). Prints the arrows, the two-way pairs, the groups of packages in a cycle, the import statements of
evalcore modules nested in a function, and the files over 500 lines.

    python scripts/import_graph.py [SRC_DIR]    # default: the evalcore package next to this script
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def _node(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "evalcore" and len(parts) > 1 else None


def _module_name(path: Path, src: Path) -> str:
    rel = path.relative_to(src.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(stmt: ast.AST, module: str, is_pkg: bool) -> list[str]:
    if isinstance(stmt, ast.Import):
        return [a.name for a in stmt.names]
    if isinstance(stmt, ast.ImportFrom):
        if stmt.level:  # relative: resolve against this module's package
            base = module.split(".")[: len(module.split(".")) - stmt.level + (1 if is_pkg else 0)]
            target = ".".join(base + ([stmt.module] if stmt.module else []))
        else:
            target = stmt.module or ""
        # ``from evalcore import config`` names the submodule
        return [f"{target}.{a.name}" if target == "evalcore" else target for a in stmt.names]
    return []


def walk(src: Path) -> dict:
    """Arrows, lazy imports and long files of the package at ``src``."""
    arrows: set[tuple[str, str]] = set()
    lazy = 0
    long_files = []
    for path in sorted(src.rglob("*.py")):
        text = path.read_text()
        if text.count("\n") > 500:
            long_files.append((str(path.relative_to(src.parent)), text.count("\n")))
        module = _module_name(path, src)
        me = _node(module + ".x" if module == "evalcore" else module)
        tree = ast.parse(text)
        in_function: set[int] = set()
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                in_function.update(id(n) for n in ast.walk(fn) if n is not fn)
        for stmt in ast.walk(tree):
            targets = [t for t in _imported(stmt, module, path.name == "__init__.py") if _node(t)]
            if not targets:
                continue
            if id(stmt) in in_function:
                lazy += 1
            for t in targets:
                if me and _node(t) != me:
                    arrows.add((me, _node(t)))
    return {"arrows": arrows, "lazy": lazy, "long_files": long_files}


def cycles(arrows: set[tuple[str, str]]) -> list[set[str]]:
    """Strongly connected groups of more than one node (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for a, b in arrows:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main() -> None:
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "evalcore"
    g = walk(src)
    pairs = sorted({tuple(sorted(a)) for a in g["arrows"] if (a[1], a[0]) in g["arrows"]})
    print(f"package-level arrows: {len(g['arrows'])}")
    print(f"two-way pairs: {len(pairs)} {' '.join(f'{a}<->{b}' for a, b in pairs)}")
    print(f"groups in a cycle: {[sorted(c) for c in cycles(g['arrows'])]}")
    print(f"imports of evalcore modules inside functions: {g['lazy']}")
    print(f"files over 500 lines: {g['long_files'] or 'none'}")


if __name__ == "__main__":
    main()
