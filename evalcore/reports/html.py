"""Self-contained HTML pages: matplotlib figures embedded as ``data:`` PNGs, Markdown bodies rendered with
markdown-it-py, one small stylesheet. Used by the run report and the nightly dashboard; nothing is fetched
when a page is opened (no scripts, fonts or images from elsewhere)."""

from __future__ import annotations

import base64
import html
import io
import re
from typing import Any

#: a break opportunity after these in table cells (identifiers such as recall_micro_with_errors, paths, URIs)
_BREAK_AFTER = re.compile(r"([_/=,:·]|\.(?!\d))(?=\S)")
_LONG = re.compile(r"[^\s<>]{24}(?=[^\s<>])")
_CELL = re.compile(r"(<t([dh])[^>]*>)(.*?)(</t[dh]>)", re.S)
#: a confidence interval in a cell (``[0.544, 0.701]``, ``[−0.61, +0.40]``): kept on one line
_CI = re.compile(r"\[[^\[\]\s<>,]{1,16}, [^\[\]\s<>,]{1,16}\]")
#: a header breaks between the words of an identifier only before the underscore that joins them (recall / _micro)
_HEAD_BREAK = re.compile(r"(?<=[^\s_<>])(?=_[^\s_<>])")

_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 72rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.9rem; max-width: 100%; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.5rem; text-align: left; overflow-wrap: break-word; }
th { background: #f3f3f3; }
caption { text-align: left; color: #555; font-size: 0.85rem; padding: 0.2rem 0; }
pre { overflow-x: auto; max-width: 100%; }
img { max-width: 100%; }
tr.flag td, td.flag { background: #fde2e2; } tr.gain td, td.gain { background: #e3f4e6; }
tr.flag td:first-child { font-weight: 600; }
details { margin: 0.3rem 0; } summary { cursor: pointer; }
.table-box { max-width: 100%; overflow-x: auto; }
.table-box th:first-child, .table-box td:first-child { position: sticky; left: 0; background: #fff; }
.table-box th:first-child { background: #f3f3f3; }
.table-box tr.flag td:first-child { background: #fde2e2; } .table-box tr.gain td:first-child { background: #e3f4e6; }
.warn { color: #8a6100; }
figure { margin: 1rem 0; }
figure img { max-width: 100%; }
figcaption { color: #555; font-size: 0.9rem; }
.ci { white-space: nowrap; }
.verdict-yes { color: #176f2c; } .verdict-no { color: #a11d1d; } .verdict-unclear { color: #8a6100; }
"""


def figure_data_uri(fig: Any, dpi: int = 110) -> str:
    """A matplotlib figure as a ``data:image/png;base64,…`` URI; the figure is closed afterwards."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    finally:
        plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def figure_html(fig: Any, caption: str, alt: str | None = None) -> str:
    """A ``<figure>`` holding ``fig`` embedded and its caption."""
    text = html.escape(caption)
    return (f'<figure><img src="{figure_data_uri(fig)}" alt="{html.escape(alt or caption)}">'
            f"<figcaption>{text}</figcaption></figure>")


def breakable(escaped: str) -> str:
    """Escaped cell text with ``<wbr>`` break opportunities after ``_ / = , : ·`` (and ``.`` not before a digit)
    and inside any run of 24 characters without one, so a table can always wrap to the page's width (no column
    pushed out of view); a confidence interval (``[0.544, 0.701]``) is kept whole on one line."""
    out = []
    for part in re.split(r"(<[^>]+>|&[a-z#0-9]+;|" + _CI.pattern + ")", escaped):  # never inside a tag, entity, CI
        if part.startswith("<") or (part.startswith("&") and part.endswith(";")):
            out.append(part)
        elif _CI.fullmatch(part):
            out.append(f'<span class="ci">{part}</span>')
        else:
            out.append(_LONG.sub(r"\g<0><wbr>", _BREAK_AFTER.sub(r"\1<wbr>", part)))
    return "".join(out)


def header_breakable(escaped: str) -> str:
    """Escaped header text that breaks only between words: at a space, or before the underscore joining the words
    of an identifier (``recall<wbr>_micro``), never inside a word nor after an underscore."""
    return "".join(part if part.startswith("<") or part.startswith("&") else _HEAD_BREAK.sub("<wbr>", part)
                   for part in re.split(r"(<[^>]+>|&[a-z#0-9]+;)", escaped))


def wrap_tables(body_html: str) -> str:
    """Every table of rendered HTML made to fit the page: :func:`breakable` cells and :func:`header_breakable`
    headers, and the table in a box that scrolls sideways on its own (first column kept in view) when it has more
    columns than the page can show."""
    body_html = _CELL.sub(lambda m: m.group(1) + (header_breakable if m.group(2) == "h" else breakable)(m.group(3))
                          + m.group(4), body_html)
    return re.sub(r"<table(?=[\s>])", '<div class="table-box"><table', body_html).replace("</table>", "</table></div>")


def markdown_html(text: str) -> str:
    """Markdown (with GitHub-style tables) as HTML; raw HTML in ``text`` is escaped, not passed through. Table
    cells get break opportunities (:func:`breakable`)."""
    from markdown_it import MarkdownIt

    return wrap_tables(MarkdownIt("commonmark", {"html": False}).enable("table").render(text))


def page(title: str, body_html: str) -> str:
    """A complete HTML document around ``body_html``."""
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head>\n"
            f"<body>\n{body_html}\n</body></html>\n")
