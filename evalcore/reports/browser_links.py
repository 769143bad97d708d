"""Links into a run's item browser (``items.html``, beside ``report.html``): the page keeps its filters in the URL's
hash, so a link names the items it opens on. Used by the report (the verdict, each listening difference, the items
a published rule and the strict reading judge differently) and the nightly dashboard (each flagged comparison)."""

from __future__ import annotations

from urllib.parse import quote, urlencode

PAGE = "items.html"


def items_href(page: str = PAGE, **state: str | int | None) -> str:
    """``items.html#p=mcq&m=listener…``: the browser with these filters (``p`` protocol, ``d`` dataset, ``t``
    task, ``m`` model, ``v`` variant, ``c`` condition, ``o`` outcome, ``ev`` evidence of not listening, ``pair``
    the control of a paired difference, ``sel`` a selection, ``sort``); empty values are left out."""
    kept = {k: str(v) for k, v in state.items() if v not in (None, "")}
    return page + ("#" + urlencode(kept, quote_via=quote) if kept else "")


def difference_href(protocol: str, dataset: str, model: str, variant: str | None, contrast: str,
                    page: str = PAGE) -> str:
    """The items behind a paired difference ``correct-<control>``: the model's items of that protocol instance,
    dataset and variant scored under both conditions (as many as the difference's n)."""
    control = str(contrast).split("-", 1)[1] if "-" in str(contrast) else str(contrast)
    return items_href(page, p=protocol, d=dataset, m=model, v=variant, pair=control)


def evidence_href(model: str, page: str = PAGE) -> str:
    """A model's items with evidence of not listening, the most first."""
    return items_href(page, m=model, ev=1, sort="evidence")


def selection_href(page: str, name: str, entry: int) -> str:
    """The items of entry ``entry`` of the selection ``browser/sel-<name>.js`` (e.g. the nightly's changed items)."""
    return items_href(page, sel=f"{name}:{entry}")


#: the selection (``browser/sel-verdicts.js``) of the items whose published and strict verdicts differ: one entry
#: per cell, found by :func:`verdicts_key`
VERDICTS = "verdicts"


def verdicts_key(protocol: str, dataset: str, model: str, variant: str | None, condition: str) -> str:
    """The key of a cell's entry in the :data:`VERDICTS` selection."""
    return "|".join(str(x) for x in (protocol, dataset, model, variant or "default", condition))


def verdicts_href(protocol: str, dataset: str, model: str, variant: str | None, condition: str,
                  page: str = PAGE) -> str:
    """Exactly the items of one cell (protocol instance, dataset, model, variant, condition) whose verdict by the
    published rule differs from evalcore's strict reading, that model's answers under that condition shown."""
    key = verdicts_key(protocol, dataset, model, variant, condition)
    return items_href(page, sel=f"{VERDICTS}:{key}", m=model, v=variant, c=condition)
