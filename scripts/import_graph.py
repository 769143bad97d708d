"""The figures of docs/layers.md: evalcore's package-level import graph, counted over every import (inside
functions too, and dynamic ones).

A node is the first name under ``evalcore`` (``evalcore/runconfig/config.py`` → ``config``,
``evalcore/textmetrics/registered/bleu.py`` → ``textmetrics``). An arrow is an ``import`` / ``from … import``
statement or a dynamic import: a call of ``importlib.import_module`` or ``__import__`` whose target is written as a
string (``"evalcore.x"``, or an f-string that begins with one). A dynamic import whose target is computed (a
variable) cannot be drawn: each must say on its line what it imports (``# dynamic: …``), and the walk lists them.
Imports under ``if TYPE_CHECKING:`` are for type checkers only (no module is loaded at run time): counted apart,
not arrows. Prints the arrows, the two-way pairs, the groups of packages in a cycle, the dynamic and type-only
imports, the import statements of evalcore modules nested in a function, and the files over 500 lines.

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


_DYNAMIC = {"import_module", "__import__"}


def _dynamic_target(call: ast.Call) -> str | None:
    """The module a dynamic import names when it is written as a string (the literal head of an f-string); "" when
    it is computed; None when ``call`` is no dynamic import."""
    fn = call.func
    name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else None
    if name not in _DYNAMIC or not call.args:
        return None
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        head = str(arg.values[0].value)
        return head.rstrip(".") if head.count(".") >= 2 or not head.endswith(".") else ""
    return ""


def _type_only(tree: ast.AST) -> set[int]:
    """ids of the nodes under ``if TYPE_CHECKING:``."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                out.update(id(n) for n in ast.walk(stmt))
    return out


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
    """Arrows, dynamic, type-only and lazy imports and long files of the package at ``src``."""
    arrows: set[tuple[str, str]] = set()
    dynamic: list[tuple[str, int, str, str]] = []  # (file, line, target or "", the line's `# dynamic:` reason)
    type_only: list[tuple[str, str]] = []  # (importing node, imported module)
    lazy = 0
    long_files = []
    for path in sorted(src.rglob("*.py")):
        text = path.read_text()
        lines = text.splitlines()
        rel = str(path.relative_to(src.parent))
        if text.count("\n") > 500:
            long_files.append((rel, text.count("\n")))
        module = _module_name(path, src)
        me = _node(module + ".x" if module == "evalcore" else module)
        tree = ast.parse(text)
        in_function: set[int] = set()
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                in_function.update(id(n) for n in ast.walk(fn) if n is not fn)
        typing_only = _type_only(tree)
        for stmt in ast.walk(tree):
            if isinstance(stmt, ast.Call) and (target := _dynamic_target(stmt)) is not None:
                line = lines[stmt.lineno - 1]
                reason = line.split("# dynamic:", 1)[1].strip() if "# dynamic:" in line else ""
                if not reason and stmt.lineno > 1 and "# dynamic:" in lines[stmt.lineno - 2]:
                    reason = lines[stmt.lineno - 2].split("# dynamic:", 1)[1].strip()
                dynamic.append((rel, stmt.lineno, target, reason))
                targets = [target] if _node(target) else []
            else:
                targets = [t for t in _imported(stmt, module, path.name == "__init__.py") if _node(t)]
            if not targets:
                continue
            if id(stmt) in typing_only:
                type_only += [(me or "evalcore", t) for t in targets]
                continue
            if id(stmt) in in_function and not isinstance(stmt, ast.Call):
                lazy += 1
            for t in targets:
                if me and _node(t) != me:
                    arrows.add((me, _node(t)))
    return {"arrows": arrows, "lazy": lazy, "long_files": long_files, "dynamic": dynamic, "type_only": type_only}


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
    named = [(f, n, t) for f, n, t, _ in g["dynamic"] if _node(t)]
    computed = [(f, n, why) for f, n, t, why in g["dynamic"] if not t]
    print(f"dynamic imports of evalcore modules named by a string (arrows above): {len(named)} "
          f"{' '.join(f'{f}:{n}->{t}' for f, n, t in named)}")
    print(f"dynamic imports of a computed module: {len(computed)}")
    for f, n, why in computed:
        print(f"  {f}:{n}: {why or 'NO `# dynamic:` REASON (hidden)'}")
    print(f"type-only imports (if TYPE_CHECKING, not arrows): {len(g['type_only'])} "
          f"{' '.join(sorted({f'{a}->{_node(t)}' for a, t in g['type_only'] if _node(t) != a}))}")
    print(f"imports of evalcore modules inside functions: {g['lazy']}")
    print(f"files over 500 lines: {g['long_files'] or 'none'}")


if __name__ == "__main__":
    main()
