"""Throughput of the CMI-Bench scoring rules (the ``mir`` protocol's scorer) on synthetic responses.

Builds ``--n`` (default 100,000) synthetic responses spread evenly over the weight-free rules — multi-class
accuracy, key, beat, lyrics, melody, GuZheng technique, emotion R², tagging (bag-of-words stand-in) — each a
mix of well-formed answers, near misses and prose, against references in the released formats (seeded), and
times, in one process:

* ``score``: the scoring stage (:func:`evalcore.scoring.requests.score_requests` with the ``mir`` scorer), a rule's
  rows at a time — items/s per rule and overall;
* ``summary``: the run's summary over those items (:func:`evalcore.scoring.summary.summary_table`: every
  figure's bootstrap CI, and paired differences of two conditions), ``--resamples`` resamples;
* the baseline, measured the same way in the same process: the MCQ scorer (:class:`evalcore.scorers.mcq.MCQScorer`)
  on as many already-judged rows — what the pipeline's scoring costs per item for the protocol it scores most.

The scoring runs once after the last model answer (``evalcore run``'s stage 6 on the driver), so what matters is
the seconds it adds to the end of a run: printed for the ``--n`` responses.

    .venv/bin/python benchmarks/cmi_scorers.py [--n 100000] [--resamples 200]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import pandas as pd

from evalcore.scorers.mir import MirScorer
from evalcore.scoring.requests import score_requests
from evalcore.scoring.summary import summary_table


def _beats(rng: np.random.Generator, jitter: float) -> str:
    period = rng.uniform(0.4, 0.7)
    t = np.arange(rng.uniform(0, 0.3), 30, period) + rng.normal(0, jitter, 1)
    return ",".join(f"{x:.2f}s" for x in t if x >= 0)


def _melody(rng: np.random.Generator) -> str:
    start = 10 * rng.integers(0, 20)
    return str([(f"{start + k * 0.0058:.4f}", int(rng.choice([0, 60, 62, 64]))) for k in range(200)])


def _events(rng: np.random.Generator) -> str:
    techs = ["Vibrato", "Plucks", "Tremolo", "Glissando"]
    return str([(f"{a:.4f}", f"{a + 0.5:.4f}", str(rng.choice(techs))) for a in sorted(rng.uniform(0, 9, 3))])


def synthetic(n: int, seed: int = 0) -> list[dict]:
    """``n`` judged ``mir`` rows, seeded: (rule, task, response, reference) over the weight-free rules."""
    rng = np.random.default_rng(seed)
    genres = ["blues", "classical", "country", "disco", "hiphop", "jazz", "metal", "pop", "reggae", "rock"]
    keys = [f"{t} {m}" for m in ("major", "minor") for t in ("C", "Db", "D", "Eb", "E", "F", "Gb", "G", "Ab", "A")]
    lyric = ["some days i'm rich", "i say what's on my mind", "all night long", "three little birds"]
    makers = {
        ("cmi_multiclass", "GTZAN"): lambda: (f"The genre is {rng.choice(genres)}.", str(rng.choice(genres))),
        ("cmi_key", "GS_key"): lambda: (str(rng.choice(keys)), str(rng.choice(keys))),
        ("cmi_beat", "gtzan_beat"): lambda: (_beats(rng, 0.05), _beats(rng, 0.0)),
        ("cmi_lyrics", "DSing"): lambda: (f"The lyrics are: {rng.choice(lyric)}", str(rng.choice(lyric)).upper()),
        ("cmi_melody", "MedleyDB"): lambda: (_melody(rng), _melody(rng)),
        ("cmi_technique", "Guzheng_Tech"): lambda: (_events(rng), _events(rng)),
        ("cmi_regression", "EMO_arousal"): lambda: (f"Estimated score: {rng.integers(1, 10)}", str(rng.normal())),
        ("cmi_tagging", "MTG_genre"): lambda: (f"Tags: {', '.join(rng.choice(genres, 2))}",
                                               ", ".join(rng.choice(genres, 2))),
    }
    label_set = json.dumps({"label_set": genres})
    rows = []
    for i in range(n):
        (rule, task), make = list(makers.items())[i % len(makers)]
        response, reference = make()
        rows.append({"request_id": f"r{i}", "dataset": task, "item_id": f"{task}-{i // (2 * len(makers))}",
                     "protocol": "cmi", "protocol_kind": "mir", "task": task, "category": rule,
                     "model": "m", "condition": "correct" if (i // len(makers)) % 2 == 0 else "silence",
                     "variant": "default", "option_order": 0, "text": response, "reference": reference,
                     "metadata": label_set if rule == "cmi_multiclass" else None, "error": None})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--resamples", type=int, default=200)
    args = ap.parse_args()
    rows = synthetic(args.n)
    scorer = MirScorer()
    scorer.score(rows[:16])  # the libraries' first load (mir_eval, jiwer, scikit-learn), untimed

    per_rule: dict[str, float] = {}
    parts = []
    t0 = time.perf_counter()
    for rule in dict.fromkeys(r["category"] for r in rows):  # the scoring stage, a rule's rows at a time
        mine = [dict(r) for r in rows if r["category"] == rule]
        t = time.perf_counter()
        parts.append(score_requests(mine, scorers={"cmi": scorer}))
        per_rule[rule] = len(mine) / (time.perf_counter() - t)
    stage_s = time.perf_counter() - t0
    scored = type(parts[0])(pd.concat([p.per_item for p in parts], ignore_index=True),
                            [r for p in parts for r in p.rows])
    t = time.perf_counter()
    summary_table(scored.per_item, args.resamples, 0.95, 0)
    summary_s = time.perf_counter() - t

    mcq = [{**{k: r[k] for k in ("request_id", "dataset", "item_id", "model", "condition", "variant", "option_order",
                                 "task")}, "protocol": "mcq", "protocol_kind": "mcq", "parsed_index": i % 4,
            "correct_index": 0, "options": ["a", "b", "c", "d"], "error": None} for i, r in enumerate(rows)]
    t = time.perf_counter()
    base = score_requests(mcq)
    mcq_stage_s = time.perf_counter() - t
    t = time.perf_counter()
    summary_table(base.per_item, args.resamples, 0.95, 0)
    mcq_summary_s = time.perf_counter() - t

    n = len(rows)
    print(f"{n} synthetic responses, {len(per_rule)} rules, {args.resamples} bootstrap resamples")
    for rule, rate in per_rule.items():
        print(f"  {rule:16s} {rate:10.0f} items/s")
    print(f"mir scoring stage:       {n / stage_s:10.0f} items/s ({stage_s:.1f} s; errors: "
          f"{sum(r.get('error') is not None for r in scored.rows)})")
    print(f"mir summary (CIs, diffs): {summary_s:.1f} s")
    print(f"baseline mcq stage:      {n / mcq_stage_s:10.0f} items/s ({mcq_stage_s:.1f} s); summary {mcq_summary_s:.1f} s")
    print(f"ratio mir / mcq (stage + summary): {(stage_s + summary_s) / (mcq_stage_s + mcq_summary_s):.1f}x the "
          f"time; {stage_s + summary_s:.1f} s added after the last answer for {n} responses")


if __name__ == "__main__":
    main()
