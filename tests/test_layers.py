"""evalcore's layers as a contract: `lint-imports` with the repository's .importlinter (every import, inside
functions too). An import that runs the wrong way fails here as well as in .ci/run."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_import_contracts_hold() -> None:
    exe = Path(sys.executable).parent / "lint-imports"
    proc = subprocess.run([str(exe), "--config", str(REPO / ".importlinter")], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout and "the data flow" in proc.stdout


def _nested_evalcore_imports() -> list[tuple[str, int, str]]:
    """(file, line, source line) of every import of an evalcore module inside a function."""
    found = []
    for path in sorted((REPO / "evalcore").rglob("*.py")):
        text = path.read_text()
        lines = text.splitlines()
        for fn in ast.walk(ast.parse(text)):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
                if any(n == "evalcore" or n.startswith("evalcore.") for n in names):
                    found.append((str(path.relative_to(REPO)), node.lineno, lines[node.lineno - 1]))
    return sorted(set(found))


def test_evalcore_imports_inside_functions_are_only_of_heavy_modules() -> None:
    """An evalcore module is imported inside a function only where it pulls a heavy package in, and says so
    (``# heavy: …``); anything else belongs at the module's top (docs/layers.md)."""
    found = _nested_evalcore_imports()
    assert found, "the walk found no nested import at all: it no longer sees the known heavy ones"
    unmarked = [f"{f}:{n}: {line.strip()}" for f, n, line in found if "# heavy:" not in line]
    assert not unmarked, "imports inside functions without a `# heavy:` reason:\n" + "\n".join(unmarked)


def test_the_graph_with_dynamic_imports_has_no_cycle_and_hides_nothing() -> None:
    """scripts/import_graph.py counts ``import_module`` / ``__import__`` calls too: no two-way pair, no cycle, no
    evalcore module imported by a string, and every computed dynamic import says what it imports (the registry's
    own package; a user's module named in the config)."""
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import import_graph
    finally:
        sys.path.pop(0)
    g = import_graph.walk(REPO / "evalcore")
    assert not [a for a in g["arrows"] if (a[1], a[0]) in g["arrows"]]
    assert import_graph.cycles(g["arrows"]) == []
    assert [(f, n, t) for f, n, t, _ in g["dynamic"] if t] == []  # no import_module("evalcore…")
    computed = {f: why for f, _, t, why in g["dynamic"] if not t}
    assert set(computed) == {"evalcore/core/registry.py", "evalcore/models/isolated.py",
                             "evalcore/models/example_adapter.py", "evalcore/scoring/requests.py"} \
        and all(computed.values()), computed
