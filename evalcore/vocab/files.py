"""Vocabulary files and genre trees, read into canonical forms."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from evalcore.core import storage
from evalcore.vocab.normalize import normalize

__all__ = ["read_vocab_file", "read_genre_tree"]


def read_vocab_file(path: str | Path) -> dict[str, list[str]]:
    """Vocabulary file → {canonical label: [synonyms]}.

    JSON: a list of labels or an object {label: [synonyms]}. Text: one label per line, optionally
    ``label: synonym, synonym``; blank lines and lines starting with ``#`` are skipped.
    Labels are lowercased; raises ``ValueError`` on a malformed or empty file.
    """
    text = Path(path).read_text(encoding="utf-8")
    out: dict[str, list[str]] = {}
    if Path(path).suffix.lower() == ".json":
        data = json.loads(text)
        if isinstance(data, list) and all(isinstance(x, str) for x in data):
            out = {x.strip().lower(): [] for x in data}
        elif isinstance(data, dict) and all(
                isinstance(v, list) and all(isinstance(s, str) for s in v) for v in data.values()):
            out = {k.strip().lower(): [s.strip() for s in v] for k, v in data.items()}
        else:
            raise ValueError(f"{path}: expected a JSON list of labels or an object label -> [synonyms]")
    else:
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            label, _, rest = line.partition(":")
            out[label.strip().lower()] = [s.strip() for s in rest.split(",") if s.strip()]
    out.pop("", None)
    if not out:
        raise ValueError(f"{path}: no labels")
    return out


def read_genre_tree(uri: str | Path) -> dict[str, str]:
    """Genre tree {genre: top-level genre} in canonical forms, from FMA ``genres.csv`` or a JSON object
    {genre: top-level genre}; local path or ``s3://``. Raises ``ValueError`` on another shape."""
    text = storage.read_bytes(str(uri)).decode("utf-8")
    if str(uri).lower().endswith(".json"):
        data = json.loads(text)
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise ValueError(f"{uri}: expected a JSON object genre -> top-level genre")
        pairs = list(data.items())
    else:
        rows = list(csv.DictReader(io.StringIO(text)))
        if not rows or not {"genre_id", "title", "top_level"} <= set(rows[0]):
            raise ValueError(f"{uri}: expected FMA genres.csv columns genre_id, parent, title, top_level")
        title = {r["genre_id"].strip(): r["title"] for r in rows}
        pairs = [(r["title"], title.get(r["top_level"].strip(), r["title"])) for r in rows]
    return {normalize(g, "genre"): normalize(top, "genre") for g, top in pairs}
