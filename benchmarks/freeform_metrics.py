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

    .venv/bin/python benchmarks/freeform_metrics.py [--n 70011] [--plain-n 5000] [--workers N]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

from evalcore.metrics import text_profiles as tp
from evalcore.metrics.wordnet import ensure_wordnet

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "musicqa" / "EvalMusicQA.json"


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=70_011)
    ap.add_argument("--plain-n", type=int, default=5_000, help="pairs for the plain loop (extrapolated)")
    ap.add_argument("--workers", type=int, default=None, help="processes for the fast path (default: CPUs)")
    args = ap.parse_args()
    if not DATA.is_file():
        print(f"real MusicQA data not found at {DATA}", file=sys.stderr)
        return 2
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

    same = all(fast.values[c][:m] == plain.values[c] for c in tp.METRICS) and fast.errors[:m] == plain.errors
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
