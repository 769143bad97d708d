"""Command blocks of the docs that a newcomer copies: docs/nightly.md's first block (after ``<!-- nightly-demo -->``)
puts the venv's ``bin/`` on PATH before anything else, uses no command but ``evalcore`` after it (no ``xdg-open``,
no bare ``python``), and every ``evalcore`` line parses (its command and options exist: ``--help`` exits 0). The
commands themselves run end to end in tests/test_nightly_demo.py."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from typer.testing import CliRunner

from evalcore.cli import app

REPO = Path(__file__).resolve().parents[1]


def doc_block(doc: str, marker: str) -> list[str]:
    """The command lines (comments and blank lines left out) of the ```bash block after ``<!-- marker -->``."""
    m = re.search(rf"<!-- {re.escape(marker)} -->\n```bash\n(.*?)```", (REPO / "docs" / doc).read_text(), re.S)
    assert m, f"docs/{doc} has no block marked <!-- {marker} -->"
    return [ln.split("  #")[0].strip() for ln in m.group(1).splitlines() if ln.strip() and not ln.startswith("#")]


def test_the_nightly_demo_block_runs_with_the_venvs_path() -> None:
    lines = doc_block("nightly.md", "nightly-demo")
    assert lines[0] == 'export PATH="$PWD/.venv/bin:$PATH"'
    words = [shlex.split(ln) for ln in lines[1:]]
    assert {w[0] for w in words} == {"evalcore"}, lines
    for w in words:
        res = CliRunner().invoke(app, [*w[1:], "--help"])
        assert res.exit_code == 0, (w, res.output)


def _synopsis() -> list[str]:
    """docs/commands.md's synopsis: the ``evalcore …`` lines of its first block, comments cut."""
    m = re.search(r"```text\n(.*?)```", (REPO / "docs" / "commands.md").read_text(), re.S)
    assert m, "docs/commands.md has no synopsis block"
    return [ln.split("  #")[0].strip() for ln in m.group(1).splitlines() if ln.startswith("evalcore ")]


def test_the_commands_synopsis_names_every_command_once_and_only_options_they_have() -> None:
    """Every command and ``score`` subcommand of the CLI is in the synopsis, once (``run`` twice: its two forms);
    each option written there is one the command has; ``score mcq``'s parser and released-format names are its own
    (the page lacked ``score cmi`` and listed ``reproduce`` twice)."""
    import typer

    from evalcore.cli.score.mcq import PARSER_NAMES
    from evalcore.cli.score.released_mcq import RELEASED

    root = typer.main.get_command(app)
    commands: dict = {}
    for name, cmd in root.commands.items():  # type: ignore[attr-defined]
        if hasattr(cmd, "commands"):  # a group (typer's own click)
            commands.update({f"{name} {sub}": c for sub, c in cmd.commands.items()})
        else:
            commands[name] = cmd
    lines = _synopsis()
    named = [next(c for c in sorted(commands, key=len, reverse=True) if ln.startswith(f"evalcore {c} ")
                  or ln == f"evalcore {c}") for ln in lines]
    assert sorted(set(named)) == sorted(commands)
    assert {c: named.count(c) for c in commands if named.count(c) != 1} == {"run": 2}
    for ln, c in zip(lines, named):
        have = {o for p in commands[c].params for o in [*getattr(p, "opts", []), *getattr(p, "secondary_opts", [])]}
        assert set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", ln)) <= have, (c, ln)
    mcq = lines[named.index("score mcq")]
    assert re.search(r"--parser ([\w|-]+)", mcq).group(1).split("|") == list(PARSER_NAMES)
    assert re.search(r"--released ([\w|-]+)", mcq).group(1).split("|") == list(RELEASED)
