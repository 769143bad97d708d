"""The item browser of a run (``items.html``, :mod:`evalcore.reports.browser`) from what the run committed: the
requests as the run formed and played them (the responses shards named by the commit markers, each request's latest
attempt), their scores (``tables/per_item.parquet``), their error rows (``tables/errors.parquet``), the items and
item errors, and each request's clip rebuilt as its model heard it (:mod:`evalcore.pipeline.clips`).

:func:`items_page` is the run's last step after the reports (a failure there is a warning, never the run's);
:func:`write_browser` is ``evalcore browse RUN_ROOT``: the page of a finished run, local, copied elsewhere or on
``s3://``, written again (clips already there are kept).
"""

from __future__ import annotations

import json
import logging

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from evalcore.pipeline.paraphrases import PATH as PARAPHRASES
from evalcore.core import storage
from evalcore.runconfig.config import RunConfig
from evalcore.core.errors import bounded
from evalcore.pipeline import commit
from evalcore.pipeline.clips import Spec, rebuild
from evalcore.pipeline.resources import audio_spec, chunk_window, uses_audio
from evalcore.pipeline.resume import resume_config
from evalcore.reports import browser
from evalcore.scoring.requests import PER_ITEM_FIELDS
from evalcore.core.schema import SCORE_KEY

log = logging.getLogger("evalcore")

#: the committed responses' columns the page reads (one row per chunk)
COLUMNS = ["request_id", "chunk_index", "dataset", "item_id", "protocol", "protocol_kind", "task", "model",
           "condition", "variant", "option_order", "question", "options", "correct_index", "audio_uri",
           "audio_item_id", "excerpt_start", "excerpt_end", "seed", "audio_seconds", "text", "error", "error_stage",
           "error_class"]
#: per_item columns that are not metrics
NOT_METRICS = set(SCORE_KEY) | set(PER_ITEM_FIELDS) | {"labels", "options", "chunk_extracted", "chunk_parsed"}


def committed_requests(root: str) -> pd.DataFrame:
    """One row per committed request (its latest attempt): chunk 0's fields, the chunks' texts joined in order
    (as the scoring stage joins them) and their seconds summed (``audio_seconds``)."""
    parts = []
    for m in commit.shard_markers(root, index=False):
        fs, path = storage.resolve(storage.join(root, m["files"]["responses"]))
        names = set(pq.read_schema(path, filesystem=fs).names)
        t = pq.read_table(path, filesystem=fs, columns=[c for c in COLUMNS if c in names])
        parts.append(t.append_column("_attempt", pa.array([int(m.get("attempt", 0))] * t.num_rows, pa.int32())))
    if not parts:
        return pd.DataFrame(columns=COLUMNS)
    df = pa.concat_tables(parts, promote_options="default").to_pandas()
    for c in COLUMNS:
        if c not in df.columns:
            df[c] = None
    df = df[df["_attempt"] == df.groupby("request_id")["_attempt"].transform("max")]
    df = df.sort_values(["request_id", "chunk_index"], kind="stable")
    first = df.drop_duplicates("request_id", keep="first").set_index("request_id")
    n = df.groupby("request_id", sort=False).size()
    if (n > 1).any():
        many = df[df["request_id"].isin(n[n > 1].index)]
        first.loc[n[n > 1].index, "text"] = many.groupby("request_id", sort=False)["text"].agg(
            lambda s: "\n".join(t or "" for t in s))
        first["audio_seconds"] = df.groupby("request_id", sort=False)["audio_seconds"].sum(min_count=1)
    kind = first["protocol_kind"]
    first["protocol_kind"] = kind.where(kind.notna() & (kind != ""), first["protocol"])  # runs before instances
    return first.drop(columns=["_attempt", "chunk_index"]).reset_index()


def requests_table(root: str) -> tuple[pd.DataFrame, list[str]]:
    """The run's requests with their judged fields and scores (``per_item``) and their error rows
    (``errors.parquet``, which holds every stage's); returns them and the per-item metric columns."""
    req = committed_requests(root)
    tables = storage.join(root, "tables")
    per_item = storage.read_parquet(storage.join(tables, "per_item.parquet")).to_pandas()
    metrics = [c for c in per_item.columns if c not in NOT_METRICS and pd.api.types.is_numeric_dtype(per_item[c])]
    judged = [c for c in ("parsed_index", "extracted", "reference", "labels", "category", "difficulty", "judge")
              if c in per_item.columns]
    req = req.merge(per_item[["request_id", *judged, *metrics]], on="request_id", how="left")
    errors = storage.read_parquet(storage.join(tables, "errors.parquet")).to_pandas()
    errors = errors[errors["table"] == "requests"].drop_duplicates("request_id").set_index("request_id")
    for c in ("error", "error_stage", "error_class"):
        got = req["request_id"].map(errors[c])
        req[c] = got.where(req["request_id"].isin(errors.index), req[c])
    return req, metrics


def model_specs(cfg: RunConfig, root: str) -> dict[str, Spec | str]:
    """model → how its decode stage prepared audio (from the run's config, as the run read it); a model whose
    spec cannot be read now (its checkpoint moved) falls back on the spec an earlier write of the page recorded."""
    saved: dict = {}
    uri = storage.join(root, "browser", "specs.json")
    if storage.exists(uri):
        saved = json.loads(storage.read_text(uri))
    specs: dict[str, Spec | str] = {}
    for m in cfg.models:
        try:
            sr, window = audio_spec(m)
            specs[m.name] = Spec(int(sr), chunk_window(m, window), m.long_audio, uses_audio(m))
        except Exception as e:  # noqa: BLE001 - e.g. a checkpoint's processor config that is gone
            specs[m.name] = Spec(**saved[m.name]) if m.name in saved else (
                f"the model's sample rate cannot be read ({bounded(f'{type(e).__name__}: {e}', 200)})")
    return specs


def write_browser(root: str, cfg: RunConfig | None = None) -> str:
    """Write (or refresh) ``items.html`` and ``browser/`` of the finished run at ``root``; returns the page's URI.
    ``cfg``: the run's config (default: its own ``config.yaml``, rooted at ``root``)."""
    for name in ("config.yaml", "run.json", "tables/per_item.parquet"):
        if not storage.exists(storage.join(root, name)):
            raise FileNotFoundError(f"{storage.join(root, name)} not found")
    cfg = cfg or resume_config(root)
    out = storage.RunStorage(root)
    meta = json.loads(storage.read_text(storage.join(root, "run.json")))
    req, metrics = requests_table(root)
    specs = model_specs(cfg, root)
    clips = rebuild(req, specs, root, old_root=meta.get("root"), out=out)
    req = pd.concat([req, clips], axis=1)
    partner = (req["condition"] == "random") & req["clip"].notna() & req["audio_item_id"].notna()
    req.loc[partner, "clip_note"] = "the audio of " + req.loc[partner, "audio_item_id"].astype(str)
    out.write_text(storage.join(root, "browser", "specs.json"),
                   json.dumps({k: v.__dict__ for k, v in specs.items() if isinstance(v, Spec)}, indent=1))
    loaded = commit.load_items(root)
    items = loaded[0].table.to_pandas() if loaded is not None else pd.DataFrame(columns=["dataset", "item_id"])
    item_errors = loaded[1] if loaded is not None else []
    counts = meta.get("counts") or {}
    line = (f"{counts.get('items_in', len(items))} items, {counts.get('requests_in', len(req))} requests "
            f"({counts.get('requests_errored', 0)} errored) · created {meta.get('created', '')}")
    inp = browser.BrowserInput(requests=req, items=items, item_errors=item_errors, metric_columns=metrics,
                               specs={k: v.line() if isinstance(v, Spec) else v for k, v in specs.items()},
                               name=str(meta.get("name") or cfg.name), line=line, paraphrases=_paraphrases(root))
    return browser.write(root, inp, out)


def _paraphrases(root: str) -> dict[tuple[str, str], list[tuple[str, str, list[str]]]]:
    """The run's paraphrases (``paraphrases/``) as the page shows them: per item, each paraphrase condition's
    question and options (a paraphrase the paraphraser failed to give: its error, no options)."""
    path = storage.join(root, *PARAPHRASES)
    if not storage.exists(path):
        return {}
    out: dict[tuple[str, str], list[tuple[str, str, list[str]]]] = {}
    for r in storage.read_parquet(path).to_pandas().sort_values(["dataset", "item_id", "paraphrase"]).itertuples():
        failed = isinstance(r.error, str)
        out.setdefault((r.dataset, r.item_id), []).append(
            (f"paraphrase_{r.paraphrase}", r.error if failed else r.question, [] if failed else list(r.options)))
    return out


def items_page(cfg: RunConfig) -> str | None:
    """The run's item browser, after its reports; a failure is logged as a warning (the run stands)."""
    try:
        return write_browser(cfg.root, cfg)
    except Exception as e:  # noqa: BLE001 - the page is a view of the run, never a reason for it to fail
        log.warning("WARNING: items.html was not written (%s); `evalcore browse %s` writes it",
                    bounded(f"{type(e).__name__}: {e}", 300), cfg.root)
        log.debug("items.html", exc_info=True)
        return None
