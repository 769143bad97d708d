"""The caption condition's descriptions from an earlier run: the answers one model gave, with the whole clip, to a
free-form protocol (e.g. "Describe this piece of music."), by the recording each answer was about.

The run's ``tables/per_item.parquet`` holds the answers (``text``; its scored rows) and ``items/`` the recording of
each item (audio URI and excerpt): a description is found for this run's item that plays the same recording — the
same URI and excerpt, else (a dataset whose clips each run writes under its own root, as the synthetic demo does) the
same file name and excerpt where that name is one recording's in both runs. Where the earlier run answered one clip
several times (several describe questions, option orders), the first answer in item order is the clip's. Nothing
here calls a model.
"""

from __future__ import annotations

from typing import Any

from evalcore.core import storage
from evalcore.kinds.base import kinds_where


class CaptionsUnavailable(ValueError):
    """The earlier run gives no descriptions as configured (one line: which part is missing)."""


def _table(root: str, *parts: str) -> Any:
    path = storage.join(root, *parts)
    try:
        return storage.read_parquet(path).to_pandas()
    except (OSError, ValueError) as e:
        raise CaptionsUnavailable(f"cannot read {path} ({type(e).__name__}): is it a finished evalcore run?") from None


def captions_of_run(root: str, model: str, protocol: str | None = None, variant: str | None = None
                    ) -> dict[tuple, str]:
    """(audio URI, excerpt start, excerpt end) → the description ``model`` gave of that recording in the run at
    ``root``, under the correct audio; :class:`CaptionsUnavailable` when the run has no such answers."""
    per_item = _table(root, "tables", "per_item.parquet")
    free = per_item[per_item["protocol_kind"].isin(kinds_where("text_metrics")) & (per_item["condition"] == "correct")]
    if protocol is None:
        names = sorted(set(free["protocol"]))
        if len(names) != 1:
            raise CaptionsUnavailable(f"the run at {root} has {len(names)} free-form protocol instances "
                                      f"({', '.join(names) or 'none'}): name one as captions.protocol")
        protocol = names[0]
    rows = free[(free["protocol"] == protocol) & (free["model"] == model)]
    if variant is not None:
        rows = rows[rows["variant"] == variant]
    rows = rows[rows["text"].map(lambda t: isinstance(t, str) and bool(t.strip()))]
    if rows.empty:
        raise CaptionsUnavailable(f"the run at {root} holds no answer of model {model!r} to free-form protocol "
                                  f"{protocol!r}" + (f" (variant {variant!r})" if variant else "")
                                  + " with the correct audio")
    if variant is None:
        rows = rows[rows["variant"] == rows["variant"].iloc[0]]
    items = _table(root, "items", "part-00000.parquet")
    where = {(r["dataset"], r["item_id"]): recording(r) for r in items.to_dict("records")}
    out: dict[tuple, str] = {}
    for r in rows.sort_values(["dataset", "item_id", "option_order"]).itertuples():
        key = where.get((r.dataset, r.item_id))
        if key is not None:
            out.setdefault(key, r.text.strip())
    return out


def _seconds(v: Any) -> float | None:
    return None if v is None or v != v else float(v)


def recording(item: dict) -> tuple:
    """The recording an item plays: (audio URI, excerpt start, excerpt end), seconds as floats or None."""
    return (item.get("audio_uri"), _seconds(item.get("excerpt_start")), _seconds(item.get("excerpt_end")))


def _name(key: tuple) -> tuple:
    uri = key[0] if isinstance(key[0], str) else ""
    return (uri.rstrip("/").rsplit("/", 1)[-1], key[1], key[2])


def lookup(captions: dict[tuple, str], keys: list[tuple]) -> dict[tuple, str]:
    """The description of each recording in ``keys`` (this run's items): by URI and excerpt, else by file name and
    excerpt where the name is one recording's in ``captions`` and in ``keys``."""
    out = {k: captions[k] for k in keys if k in captions}
    by_name: dict[tuple, list[tuple]] = {}
    for k in captions:
        by_name.setdefault(_name(k), []).append(k)
    mine: dict[tuple, set[tuple]] = {}
    for k in keys:
        mine.setdefault(_name(k), set()).add(k)
    for k in keys:
        theirs = by_name.get(_name(k), [])
        if k not in out and len(theirs) == 1 and len(mine[_name(k)]) == 1:
            out[k] = captions[theirs[0]]
    return out
