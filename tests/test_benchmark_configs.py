"""The configs of ``configs/benchmarks`` (MMAU, MMAR, MMAU-Pro, RUL-MuchoMusic, and the music card that holds them all
with CMI-Bench's tasks) validate, have every listening control on, and run end to end from fixtures in the released
formats (tests/fixtures/mmau, mmar, mmau_pro, cmi_bench) in ONE Ray run: ``music-card.yaml`` localized.

Its MCQ protocols are the benchmark configs' own (a test holds them equal), so the run covers those configs: the
datasets, protocols, conditions, orders, prompts and judges kept; the Music LM replaced by weight-free stand-ins
answering one fixed choice text per benchmark (``simulated_gpu``, one model per protocol, named
``<protocol>.qwen2-audio-7b-instruct``), the two weight-free baselines kept, MMAU-Pro's NV-Embed-v2 judge swapped
for its bag-of-words stand-in (no weights offline). Accuracy and the instruction-following rate (IFR: the share of
responses the published rule maps to a choice) come out for every model × condition. RUL-MuchoMusic runs in the same
run over its fixture in MuChoMusic's released layout (tests/test_rul_muchomusic.py's), by the null model and the text
prior; MuChoMusic runs end to end in tests/test_paper_configs.py.

The CMI-Bench part (tests/fixtures/cmi_bench/data: synthesized clips in the released layout, one ``.m4a`` that
decodes and one that does not, malformed records) scores every task's released rule under every control, with the
model-card table in the report, rendered in headless Chromium at 1280 px without overflow."""

from __future__ import annotations

import copy
import json
import pathlib

import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

import chromium
from evalcore.cli import app
from evalcore.datasets.cmi_bench import TASKS

REPO = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = pathlib.Path(__file__).parent / "fixtures"
CMI = FIXTURES / "cmi_bench"
CONFIGS = sorted((REPO / "configs" / "benchmarks").glob("*.yaml"))
CARD = REPO / "configs" / "benchmarks" / "music-card.yaml"
CONTROLS = {"correct", "random", "silence", "noise", "text_only"}
#: per config: its protocol in the music card, the fixture files, and the choice text its stand-in answers (the
#: right one for exactly one item)
FIXTURE = {
    "mmau-music": ("mmau", {"path": FIXTURES / "mmau" / "mmau-test-mini.json", "audio_root": FIXTURES / "mmau"}, "Piano"),
    "mmar-music": ("mmar", {"path": FIXTURES / "mmar" / "MMAR-meta.jsonl", "audio_root": FIXTURES / "mmar"},
                   "Pentatonic scale"),
    "mmau-pro-music": ("mmau-pro", {"path": FIXTURES / "mmau_pro" / "test.parquet",
                                    "audio_root": FIXTURES / "mmau_pro"}, "Double bass"),
}
#: RUL-MuchoMusic runs in the card with its fixture in MuChoMusic's released layout (tests/test_rul_muchomusic.py's),
#: answered by the text prior and the null model, as its own test set it up
RUL = "rul-muchomusic"
#: the music card's protocols run end to end elsewhere (their data's fixtures live with those tests)
ELSEWHERE = {"muchomusic": "tests/test_paper_configs.py"}
#: the CMI-Bench tasks with fixture files: one or more per released rule
CMI_TASKS = ("GTZAN", "GS_key", "gtzan_beat", "DSing", "MedleyDB", "Guzheng_Tech", "EMO_arousal", "MTG_genre", "SDD")
STAND_IN = "qwen2-audio-7b-instruct"
#: RUL-MuchoMusic's stand-in for the same model: one that answers nothing (the null model)
RUL_STAND_IN = f"{RUL}.{STAND_IN}"


def _yaml(path: pathlib.Path) -> dict:
    return yaml.safe_load(path.read_text())


def test_a_config_per_benchmark() -> None:
    assert {p.stem for p in CONFIGS} == set(FIXTURE) | {RUL, "music-card"}
    for test_file in ELSEWHERE.values():
        assert (REPO / test_file).exists()
    assert {TASKS[t][1] for t in CMI_TASKS} == {rule for _, rule, _ in TASKS.values()}  # every rule has a fixture


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_config_validates_with_every_listening_control(path: pathlib.Path) -> None:
    res = CliRunner().invoke(app, ["validate", "--no-check-paths", str(path)])
    assert res.exit_code == 0, res.output
    for p in _yaml(path)["protocols"]:
        assert set(p["conditions"]) == CONTROLS
        assert (p["kind"] == "mcq" and p["judge"]["kind"].startswith("mcq_")) or p["kind"] in ("mir", "freeform")


def test_music_card_holds_every_benchmark_config_and_task() -> None:
    card = _yaml(CARD)
    protocols = {p["name"]: p for p in card["protocols"]}
    datasets = {d["name"]: d for d in card["datasets"]}
    for stem in [*FIXTURE, RUL]:
        cfg = _yaml(REPO / "configs" / "benchmarks" / f"{stem}.yaml")
        (proto,) = cfg["protocols"]
        (ds,) = cfg["datasets"]
        assert {k: v for k, v in protocols[proto["name"]].items() if k != "datasets"} == proto, stem
        assert protocols[proto["name"]]["datasets"] == [ds["name"]] and datasets[ds["name"]] == ds, stem
    cmi = [d for d in card["datasets"] if d["kind"] == "cmi_bench"]
    assert sorted(t for d in cmi for t in d["params"]["tasks"]) == sorted(TASKS)  # one dataset per released task
    for d in cmi:
        (task,) = d["params"]["tasks"]
        owner = "cmi" if TASKS[task][2] == "mir" else "cmi-captions"
        assert d["name"] in protocols[owner]["datasets"], d["name"]
    assert card["model_card"]["published"] == "configs/benchmarks/music-card-published.csv"


def test_validate_names_the_mmau_pro_judge_whose_package_is_missing(tmp_path: pathlib.Path, monkeypatch) -> None:
    """The music card with MMAU-Pro's published judge (NV-Embed-v2) where torch does not import: validate exits 2
    with one line naming the judge and the command that installs it (the run was all error rows for it)."""
    from evalcore.core.packages import MODELS_EXTRA

    cfg = _localized(tmp_path, dead=False)
    for p in cfg["protocols"]:
        if p["name"] == "mmau-pro":
            p["judge"] = _yaml(CARD)["protocols"][2]["judge"]
            assert p["judge"]["params"]["embedder"] == "nv-embed-v2"
    path = tmp_path / "card.yaml"
    path.write_text(yaml.safe_dump(cfg))
    from evalcore.core import packages

    found = packages.importable
    monkeypatch.setattr(packages, "importable", lambda m: m != "torch" and found(m))  # torch does not import here
    res = CliRunner().invoke(app, ["validate", str(path)])
    assert res.exit_code == 2, res.output
    lines = [ln.strip() for ln in res.stderr.splitlines() if ln.startswith("  ")]
    assert lines == [f"protocols.2.judge.kind: judge of protocol 'mmau-pro' (mcq_mmau_pro) needs torch, which do not "
                     f"import here; install: {MODELS_EXTRA}"], res.stderr
    monkeypatch.undo()
    assert CliRunner().invoke(app, ["validate", str(path)]).exit_code == 0  # with torch: valid


# --------------------------------------------------------------------------- one run: the music card localized


#: the benchmark the card run adds whose every request errors: MMAU-Pro under its published NV-Embed-v2 judge with
#: no weights at the configured path (torch is here, so validate's package check passes: the judge raises at run time)
DEAD = "mmau-pro-nv"


def _localized(out: pathlib.Path, dead: bool = True) -> dict:
    """music-card.yaml over the fixtures, its Music LM replaced by stand-ins named as a user names the model they
    stand for (``model: qwen2-audio-7b-instruct`` on each benchmark's); ``dead``: with :data:`DEAD`."""
    from test_rul_muchomusic import FIXTURE as RUL_JSON, write_muchomusic

    cfg = copy.deepcopy(_yaml(CARD))
    rul_data = write_muchomusic(out / "muchomusic-data")
    by_proto = {proto: (files, answer) for proto, files, answer in FIXTURE.values()}
    keep_ds, datasets = set(), []
    for d in cfg["datasets"]:
        if d["kind"] == "cmi_bench":
            if d["params"]["tasks"][0] in CMI_TASKS:
                datasets.append({**d, "params": {**d["params"], "root": str(CMI)}})
                keep_ds.add(d["name"])
            continue
        proto = next((p["name"] for p in cfg["protocols"] if d["name"] in p["datasets"]), None)
        if proto == RUL:
            datasets.append({**d, "params": {"path": str(RUL_JSON), "muchomusic_csv": str(rul_data / "muchomusic.csv"),
                                             "audio_root": str(rul_data)}})
            keep_ds.add(d["name"])
        elif proto in by_proto:
            datasets.append({**d, "params": {**d["params"], **{k: str(v) for k, v in by_proto[proto][0].items()}}})
            keep_ds.add(d["name"])
    small = {"num_cpus": 0.1, "batch_size": 32}
    models = [{**m, "resources": small} for m in cfg["models"] if m["kind"] in ("dsp_listener", "text_prior")]
    baselines = [m["name"] for m in models]
    protocols = []
    for p in cfg["protocols"]:
        if p["name"] in ELSEWHERE:
            continue
        p = {**p, "datasets": [d for d in p["datasets"] if d in keep_ds]}
        if p["name"] in by_proto:  # a stand-in per benchmark, answering its fixed choice text: one model, one column
            name = f"{p['name']}.{STAND_IN}"
            models.append({"name": name, "model": STAND_IN, "kind": "simulated_gpu", "resources": small,
                           "params": {"seconds_per_batch": 0, "answer": by_proto[p["name"]][1]}})
            p["models"] = [name, *baselines]
            p["option_orders"] = 2  # the configs' 3 seeded orders, cut to 2 to keep the run small
        if p.get("judge", {}).get("kind") == "mcq_mmau_pro":
            p["judge"] = {"kind": "mcq_mmau_pro", "params": {"embedder": "bag-of-words"}}
        if p["kind"] in ("mir", "freeform"):
            p["models"] = [STAND_IN, "listener"]  # the text prior's one description says nothing of these tasks
        if p["name"] == RUL:
            p["models"] = [RUL_STAND_IN, "text-prior"]
        protocols.append(p)
    if dead:
        mmau_pro = next(p for p in protocols if p["name"] == "mmau-pro")
        (out / "no-weights").mkdir(exist_ok=True)
        protocols.append({**mmau_pro, "name": DEAD, "models": mmau_pro["models"][:2], "agreement_judge": None,
                          "judge": {"kind": "mcq_mmau_pro", "params": {"embedder": "nv-embed-v2",
                                                                       "model": str(out / "no-weights")}}})
    models.append({"name": STAND_IN, "kind": "simulated_gpu", "resources": small,
                   "params": {"seconds_per_batch": 0, "answer": "C major"}})
    models.append({"name": RUL_STAND_IN, "model": STAND_IN, "kind": "null", "resources": small})
    cfg.update(datasets=datasets, models=models, protocols=protocols, storage={"root": str(out / "run")},
               model_card={"published": str(REPO / cfg["model_card"]["published"])},
               stats={**cfg["stats"], "bootstrap_resamples": 100},
               ray={"progress_bars": False, "decode_num_cpus": 0.5})
    return cfg


@pytest.fixture(scope="module")
def card_run(tmp_path_factory, local_ray):
    """The music card over the fixtures, in one run (module-scoped: every test below reads it)."""
    from evalcore.runconfig.config import parse_config
    from evalcore.pipeline.run import run

    from evalcore.pipeline.outcome import ErrorBudgetExceeded

    tmp = tmp_path_factory.mktemp("card")
    cfg = parse_config(_localized(tmp))
    try:
        run(cfg)
        raise AssertionError("the run's dead benchmark did not end it with exit 4")
    except ErrorBudgetExceeded as e:  # everything is written first (test_a_dead_benchmark_…)
        result, budget = e.result, e
    tables = {n: pq.read_table(f"{cfg.root}/tables/{n}.parquet").to_pandas() for n in ("summary", "per_item", "errors")}
    return {"result": result, "budget": budget, "root": pathlib.Path(cfg.root), **tables}


def _cell(run: dict, protocol: str, model: str, condition: str, metric: str, dataset: str | None = None) -> float:
    s = run["summary"]
    s = s[(s.protocol == protocol) & (s.model == model) & (s.condition == condition) & (s.metric == metric)
          & (s.group == "all") & ((s.dataset == dataset) if dataset else True)]
    assert len(s) == 1, (protocol, model, condition, metric, dataset)
    return float(s.iloc[0]["value"])


# per config: (valid items, item error reasons, the stand-in's strict accuracy and IFR with the clip)
EXPECTED = {
    "mmau-music": (3, ["options must be distinct"], 1 / 3, 1 / 3),
    "mmar-music": (4, [], 1 / 4, 1 / 4),
    # bag-of-words: "Double bass" shares no word with the other two items' choices, a tie: unanswered (strictly;
    # the released rule takes the first option shown, right where the answer happens to be shown first)
    "mmau-pro-music": (3, ["2 audio clips"], 1 / 3, 1 / 3),
}


def released_accuracy(rows, stem: str) -> float:
    """The released scorer's accuracy of a cell's per-item rows, computed here by its transcribed steps (MMAU's and
    MMAR's ``string_match``; MMAU-Pro's argmax, exactly, on the stand-in's word counts): mean over orders, then
    items."""
    from test_mmau import published_verdict
    from test_mmau_pro import exact_released_choice

    def right(r) -> float:
        options, answer = list(r.options), int(r.correct_index)
        if stem == "mmau-pro-music":
            return float(exact_released_choice(r.text, options)[0] == answer)
        return float(published_verdict(options[answer], r.text, options))
    return float(rows.assign(_right=[right(r) for r in rows.itertuples()]).groupby("item_id")["_right"].mean().mean())


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("stem", sorted(FIXTURE))
def test_benchmark_runs_end_to_end(card_run: dict, stem: str) -> None:
    c = card_run["result"].counts
    assert c["requests_in"] == c["requests_scored"] + c["requests_errored"]
    protocol = FIXTURE[stem][0]
    n_items, item_errors, strict, ifr = EXPECTED[stem]
    per_item = card_run["per_item"][card_run["per_item"]["protocol"] == protocol]
    assert per_item["item_id"].nunique() == n_items
    assert set(per_item["condition"]) == CONTROLS
    assert set(per_item["option_order"]) == {0, 1}
    # the stand-ins answer differently per benchmark, so the run names each one "<protocol>.<model>"
    models = {m.rsplit(".", 1)[-1]: m for m in per_item["model"].unique()}
    assert set(models) == {STAND_IN, "listener", "text-prior"}
    errors = card_run["errors"]
    (dataset,) = [d["name"] for d in _yaml(REPO / "configs" / "benchmarks" / f"{stem}.yaml")["datasets"]]
    mine = errors[errors["dataset"] == dataset]
    assert len(mine[mine["error_stage"] == "load"]) == len(item_errors)
    assert [r for r in item_errors if not mine["error"].str.contains(r).any()] == []
    for model in models.values():
        for cond in sorted(CONTROLS):
            for metric in ("accuracy", "accuracy_strict", "verdicts_differ", "ifr", "errored"):
                _cell(card_run, protocol, model, cond, metric)  # one value per model × condition
            # the default figure is the released scorer's, item for item; the strict one the option named
            rows = per_item[(per_item["model"] == model) & (per_item["condition"] == cond)]
            assert _cell(card_run, protocol, model, cond, "accuracy") == pytest.approx(released_accuracy(rows, stem))
            named = (rows["parsed_index"] == rows["correct_index"]).astype(float).groupby(rows["item_id"]).mean()
            assert _cell(card_run, protocol, model, cond, "accuracy_strict") == pytest.approx(named.mean())
    stand_in = models[STAND_IN]
    for cond in sorted(CONTROLS):  # one fixed answer whatever it hears: the same under every control
        assert _cell(card_run, protocol, stand_in, cond, "accuracy_strict") == pytest.approx(strict)
        assert _cell(card_run, protocol, stand_in, cond, "ifr") == pytest.approx(ifr)
    # the parse-failure rate per model × condition is in the report's table of the protocol (as IFR = 1 − it),
    # beside both accuracies
    section = card_run["result"].report.split(f"## {protocol} · ", 1)[1].split("\n## ", 1)[0]
    assert "| model | variant | condition | n | accuracy | accuracy_strict | ifr |" in section
    if stem != "mmau-pro-music":
        # the listener answers a letter ("The correct answer is (B).") — a bare letter matches nothing under the
        # word-set rule; the text prior answers the first option's text, as the prompt asks, which the rule reads
        assert _cell(card_run, protocol, models["listener"], "correct", "ifr") == 0.0
        assert _cell(card_run, protocol, models["text-prior"], "correct", "ifr") > 0.0


#: dataset of each CMI task in the card → (the rule's primary figure, item errors at load)
CMI_EXPECTED = {"cmi-gtzan": ("accuracy", 1), "cmi-gs-key": ("key_weighted_score", 1), "cmi-gtzan-beat": ("f_measure", 0),
                "cmi-dsing": ("word_accuracy", 1), "cmi-medleydb": ("melody_accuracy", 0),
                "cmi-guzheng-tech": ("frame_f1_micro", 0), "cmi-emo-arousal": ("r2", 0), "cmi-mtg-genre": ("roc_auc", 0)}


@pytest.mark.ray
@pytest.mark.slow
def test_music_card_scores_every_cmi_task_under_every_control(card_run: dict) -> None:
    c = card_run["result"].counts
    assert c["items_in"] == c["items_valid"] + c["items_errored"]
    assert c["requests_in"] == c["requests_scored"] + c["requests_errored"]
    s, per_item, errors = card_run["summary"], card_run["per_item"], card_run["errors"]
    models = {STAND_IN, "listener"}
    for ds, (metric, load_errors) in CMI_EXPECTED.items():
        rows = per_item[per_item["dataset"] == ds]
        assert set(rows["condition"]) == CONTROLS and set(rows["model"]) == models, ds
        for model in models:
            for cond in CONTROLS:
                v = s[(s.dataset == ds) & (s.model == model) & (s.condition == cond) & (s.metric == metric)
                      & (s.group == "all") & (s.kind == "value")]
                assert len(v) == 1, (ds, model, cond, metric)
            diffs = s[(s.dataset == ds) & (s.model == model) & (s.kind == "paired_diff") & (s.metric == metric)]
            assert set(diffs["condition"]) == {f"correct-{x}" for x in CONTROLS - {"correct"}}, (ds, model)
        loads = errors[(errors.dataset == ds) & (errors.error_stage == "load")]
        assert len(loads) == load_errors and set(loads["error_class"]) <= {"input"}, ds
    # the stand-in answers "C major" to every question, whatever it hears: the key of the first GS-key item
    key = [_cell(card_run, "cmi", STAND_IN, cond, "key_weighted_score", "cmi-gs-key") for cond in sorted(CONTROLS)]
    assert key == [0.5] * 5
    # the .m4a that does not decode: an input error of the decode stage under every control that plays it
    m4a = errors[(errors.dataset == "cmi-dsing") & (errors.error_stage == "decode")]
    assert len(m4a) and set(m4a["error_class"]) == {"input"} and m4a["error"].str.contains("corrupt").all()
    assert set(m4a["condition"]) >= {"correct", "silence", "noise"}
    text_only = per_item[(per_item.dataset == "cmi-dsing") & (per_item.condition == "text_only")]
    assert text_only["item_id"].nunique() == 2  # nothing is decoded without audio: the broken .m4a item scores too
    caps = s[(s.protocol == "cmi-captions") & (s.metric == "meteor") & (s.kind == "value") & (s.group == "all")]
    assert len(caps) == len(models) * len(CONTROLS)
    # the rules scored in the stream: every whole mir request without error carries its rule's columns as committed
    from evalcore.pipeline.commit import load_committed

    mir = [r for r in load_committed(str(card_run["root"])).rows if r["protocol"] == "cmi" and r["error"] is None]
    assert mir and all(json.loads(r["scores"])["mir_rule"] == r["category"] for r in mir)


def _card_rows(report: str) -> tuple[list[str], list[list[str]]]:
    """The model card's header and rows (cells split), from report.md."""
    card = report.split("## Model card", 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in card.splitlines() if ln.startswith("| ")]
    split = [[c.strip() for c in ln.strip("|").split(" | ")] for ln in lines]
    return split[0], split[1:]  # the separator line starts "|-": not read


@pytest.mark.ray
@pytest.mark.slow
def test_model_card_in_the_report_and_in_chromium(card_run: dict, tmp_path: pathlib.Path) -> None:
    """The card as a report prints it: one column per model as the user named them (each benchmark's stand-in is
    qwen2-audio-7b-instruct), then published reference columns with their sources, whatever models ran; rows
    grouped MCQ / MIR / captioning, each naming its task and its benchmark's own metric; in headless Chromium at
    1280 px the card starts within the first two screens, and the page does not overflow sideways."""
    from cdp import Chromium

    header, rows = _card_rows(card_run["result"].report)
    assert header == ["benchmark", "task", "metric", "listener", STAND_IN, "text-prior",
                      f"{STAND_IN} (published)", "salmonn (published)"]
    groups = [r[0] for r in rows if r[0].startswith("**")]
    assert groups == ["**Multiple-choice benchmarks**", "**MIR tasks (CMI-Bench)**", "**Captioning**"]
    body = [r for r in rows if not r[0].startswith("**")]
    assert all(r[1] for r in body), [r for r in body if not r[1]]  # every row names its task
    by = {r[0]: r for r in body}
    assert {"mmau-test-mini (mmau)", "mmar-music (mmar)", "cmi-sdd (cmi-captions)", RUL,
            f"mmau-pro-music ({DEAD})"} | {f"{ds} (cmi)" for ds in CMI_EXPECTED} <= set(by)
    for ds, (metric, _) in CMI_EXPECTED.items():  # each task's own published figure (lyrics: WER)
        want = {"word_accuracy": "wer", "roc_auc": "roc_auc ‡"}.get(metric, metric)  # ‡: the tagging stand-in
        assert by[f"{ds} (cmi)"][2] == want, ds
    assert by["cmi-gtzan (cmi)"][1] == "GTZAN · classification" and by["cmi-dsing (cmi)"][1].startswith("DSing")
    gtzan = by["cmi-gtzan (cmi)"]
    assert gtzan[6] == "0.624 [1]" and gtzan[7] == "0.303 [1]"  # the released scorer on the released outputs
    assert gtzan[4].endswith("?")  # two items: too few to say whether the stand-in listened
    assert by["mmar-music (mmar)"][6:8] == ["0.243 [2]", "0.296 [2]"]  # MMAR's leaderboard, its Music column
    card = card_run["result"].report.split("## Model card", 1)[1].split("\n## ", 1)[0]
    assert "[1] CMI-Bench's released evaluate.py (4c15f410)" in card and "[2] MMAR's README leaderboard" in card
    assert "‡ Scored with a stand-in, not the published scorer's model" in card
    meta = json.loads((card_run["root"] / "run.json").read_text())
    assert meta["model_card"]["published"].endswith("music-card-published.csv")
    assert meta["model_card"]["columns"][f"mmar.{STAND_IN}"] == STAND_IN
    page = card_run["root"] / "report.html"
    scroll, client = chromium.widths(page, tmp_path)
    assert scroll <= client, f"the page overflows a 1280 px window: {scroll} > {client}"
    with Chromium(tmp_path / "profile", 1280, 900) as browser:
        tab = browser.page(page.as_uri())
        tab.wait("document.readyState === 'complete'")
        top, screen = tab.eval("(() => { const h = [...document.querySelectorAll('h2')].find(e => e.textContent === "
                               "'Model card'); return [h.getBoundingClientRect().top + scrollY, innerHeight]; })()")
        assert top < 2 * screen, f"the card starts at {top} px, below the first two screens of {screen} px"
        first = tab.eval("(() => { const f = document.querySelector('figure'); return f.getBoundingClientRect().top "
                         "+ scrollY; })()")
        assert first > top  # no plot between the verdict and the card
        assert tab.eval("document.querySelector('details figure') !== null")  # every difference, behind a toggle


@pytest.mark.ray
@pytest.mark.slow
def test_a_dead_benchmark_ends_the_run_with_exit_4_and_reads_as_no_score(card_run: dict) -> None:
    """MMAU-Pro under NV-Embed-v2 without its weights: every request errors (a judge that raises), the run exits 4
    naming the benchmark and its top reason, its card cells read "—, all N errored", never a number."""
    from evalcore.core.errors import ExitCode
    from evalcore.pipeline.outcome import RunUnscored

    budget = card_run["budget"]
    assert isinstance(budget, RunUnscored) and budget.benchmark == (DEAD, "mmau-pro-music")
    assert ExitCode.UNSCORED == 4
    msg = str(budget)
    assert msg.startswith(f"error budget exceeded: benchmark {DEAD} · mmau-pro-music errored on 60 of 60 of its "
                          "requests (every one of its requests: it has no score)") and "top reasons: judge/" in msg
    _, rows = _card_rows(card_run["result"].report)
    dead = next(r for r in rows if r[0] == f"mmau-pro-music ({DEAD})")
    # 3 items × 2 option orders under the correct audio, for each of the two models asked; the text prior was not
    assert dead[2] == "accuracy" and dead[3] == dead[4] == "—, all 6 errored" and dead[5] == "—"
    assert not [r for r in rows if any("0.000 [0.000, 0.000]" in c for c in r[3:6]) and r[0].endswith(f"({DEAD})")]
    report = card_run["result"].report
    assert f"⚠ **No score on {DEAD} · mmau-pro-music**: every one of its 60 requests errored" in report
    meta = json.loads((card_run["root"] / "run.json").read_text())
    (b,) = [b for b in meta["benchmarks"] if b["protocol"] == DEAD]
    assert b["requests_in"] == b["requests_errored"] == 60 and b["figures"][0] == "accuracy"


@pytest.mark.ray
@pytest.mark.slow
def test_the_item_browser_of_the_card_run(card_run: dict) -> None:
    """items.html is written for the card run, whose items include ones that failed to load (issue 50's point 2:
    fixed by fe3ea62, held here), every link of report.html to it resolves to the page, and ``evalcore browse``
    writes it again (exit 0)."""
    import re

    from evalcore.cli import app as cli

    root = card_run["root"]
    assert (root / "items.html").is_file() and (card_run["errors"]["error_stage"] == "load").any()
    links = re.findall(r'href="(items\.html[^"#]*)', (root / "report.html").read_text())
    assert len(links) > 50 and set(links) == {"items.html"}
    res = CliRunner().invoke(cli, ["browse", str(root), "--quiet"])
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == (root / "items.html").resolve().as_uri()


@pytest.mark.ray
@pytest.mark.slow
def test_published_and_strict_figures_in_the_card_the_report_and_the_browser(card_run: dict,
                                                                              tmp_path: pathlib.Path) -> None:
    """The MCQ rows of the model card carry the strict figure and the count beside the published one; the report
    says per model how much of the published figure rests on the quirks; every count's link opens exactly the items
    whose two verdicts differ (computed here from per_item.parquet), each with its note."""
    import re
    import urllib.parse

    from cdp import Chromium

    report, per_item, s = card_run["result"].report, card_run["per_item"], card_run["summary"]
    _, rows = _card_rows(report)
    for label in ("mmau-test-mini (mmau)", "mmar-music (mmar)", "rul-muchomusic"):
        row = next(r for r in rows if r[0] == label)
        assert row[2] == "accuracy" and all(" · strict " in c and " differ" in c for c in row[3:6] if c != "—"), label
    section = report.split("## Published rule and strict reading", 1)[1].split("\n## ", 1)[0]
    assert "rul-muchomusic" in section and "the two verdicts agree on all" in section  # RUL: no departure
    differ = per_item[per_item["correct_strict"].notna() & (per_item["correct"] != per_item["correct_strict"])]
    assert len(differ) and set(differ["protocol"]) <= {"mmar", "mmau-pro"}  # the same-words rule, the ties
    links = sorted(set(re.findall(r'href="items\.html#(sel=verdicts[^"]+)"', (card_run["root"] / "report.html")
                                  .read_text())))
    cells = {tuple(k) for k in differ[["protocol", "dataset", "model", "variant", "condition"]].values}
    assert len(links) >= len(cells)  # each cell linked at least once (report section, table, card)
    with Chromium(tmp_path / "profile", 1280, 900) as chromium:
        page = chromium.page((card_run["root"] / "items.html").as_uri())
        page.wait("document.body.dataset.state !== undefined")
        for state in links:
            state = state.replace("&amp;", "&")
            key = urllib.parse.unquote(dict(kv.split("=", 1) for kv in state.split("&"))["sel"]).split(":", 1)[1]
            p, d, m, v, c = key.split("|")
            want = differ[(differ.protocol == p) & (differ.dataset == d) & (differ.model == m) & (differ.variant == v)
                          & (differ.condition == c)]["item_id"].nunique()
            page.eval(f"location.hash = {json.dumps(state)}")
            page.wait(f"document.body.dataset.state === {json.dumps(state)}")
            assert int(page.eval("document.body.dataset.total")) == want > 0, state
            notes = page.eval("[...document.querySelectorAll('article.item p.changed')].map(x => x.textContent)")
            assert len(notes) == min(want, 25) and all("published rule: right · strict reading: wrong" in n
                                                       for n in notes), notes[:2]
            assert page.eval("document.querySelectorAll('td .vdnote').length") >= len(notes)


@pytest.mark.ray
@pytest.mark.slow
def test_rul_muchomusic_config_runs_in_the_card(card_run: dict) -> None:
    """The RUL-MuchoMusic config's protocol (released prompt, judge, one order per fold) over its fixture in
    MuChoMusic's released layout (question 2050 has no clip there), by the null model and the text prior."""
    per_item, errors, s = card_run["per_item"], card_run["errors"], card_run["summary"]
    loads = errors[(errors.dataset == RUL) & (errors.error_stage == "load")]
    assert sorted(loads["item_id"]) == [f"2050-f{k}" for k in range(4)]          # question 2050 has no clip
    rul = per_item[per_item.protocol == RUL]
    assert len(rul) == 12 * 2 * 5 and set(rul["condition"]) == CONTROLS           # items × models × conditions
    fails = s[(s.protocol == RUL) & (s.metric == "parse_failure_rate") & (s.group == "all")].set_index(
        ["model", "condition"])["value"]
    assert len(fails) == 10 and (fails.loc[RUL_STAND_IN] == 1.0).all() and (fails.loc["text-prior"] == 0.0).all()
    assert ((s.protocol == RUL) & (s.metric == "perceptual_index") & (s.condition == "text_only")).sum() == 2
    assert "perceptual_index" in card_run["result"].report and "parse_failure_rate" in card_run["result"].report


def test_the_card_run_gives_the_recorded_summary(card_run: dict) -> None:
    """Every benchmark's figures, under every control, as recorded in tests/fixtures/golden_card/ (from this run's
    root: ``PYTHONPATH=. python tests/test_demo_golden.py RUN_ROOT tests/fixtures/golden_card summary``)."""
    from test_demo_golden import differences, load, snapshot

    want = load(GOLDEN_CARD, ("summary",))
    got = snapshot(str(card_run["root"]))
    assert got["counts"] == want["counts"]
    assert differences(got["summary"], want["summary"]) == []


GOLDEN_CARD = pathlib.Path(__file__).resolve().parent / "fixtures" / "golden_card"


def test_the_audio_required_subset_of_mmau_reads_back_through_its_own_loader(card_run: dict, tmp_path) -> None:
    """The MMAU items no answer without audio got right (text_only, or the text prior), by hand from per_item,
    equal the run's marks; ``evalcore subset`` writes them as MMAU's released JSON, which MMAU's loader reads back."""
    from typer.testing import CliRunner

    from evalcore.cli import app
    from evalcore.datasets.mmau import MMAU

    per_item, root = card_run["per_item"], card_run["root"]
    rows = per_item[(per_item["protocol"] == "mmau")]
    blind = rows[(rows["condition"] == "text_only") | (rows["model"] == "text-prior")]
    answerable = set(blind.loc[blind["correct"] == 1.0, "item_id"])
    needed = set(rows["item_id"]) - answerable
    marks = pq.read_table(root / "tables" / "answerable_without_audio.parquet").to_pandas()
    mine = marks[marks["protocol"] == "mmau"]
    assert set(mine.loc[~mine["answerable_without_audio"], "item_id"]) == needed and needed
    dataset = rows["dataset"].iloc[0]
    out = tmp_path / "mmau-audio-required.json"
    res = CliRunner().invoke(app, ["subset", str(root), "--benchmark", f"mmau/{dataset}", "--out", str(out)])
    assert res.exit_code == 0, res.output
    back = list(MMAU(str(out), audio_root=str(FIXTURES / "mmau")).items(None))
    assert {b["item_id"] for b in back} == needed
    assert json.loads(out.read_text())[0].keys() == json.loads((FIXTURES / "mmau" / "mmau-test-mini.json")
                                                               .read_text())[0].keys()
    # the model card says each model's listening profile in one line, per column (a stand-in's entries are one)
    card = card_run["result"].report.split("## Model card", 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in card.splitlines() if ln.startswith("* **")]
    assert [ln.split("**")[1] for ln in lines] == ["listener", STAND_IN, "text-prior"]
    assert f"mmau · {dataset}: accuracy_strict" in lines[0] and "on audio-required items" in lines[0]
