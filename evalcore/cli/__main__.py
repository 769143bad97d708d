"""``python -m evalcore.cli``: the ``evalcore`` command line."""

from evalcore.cli import app

app()
