"""What a hostile answer costs the scorers: the seeded corpus of bad answers (tests/bad_answers.py) per CMI-Bench
rule family, per offline judge and for the free-form metrics, the longest answer each rule family allows, and the
scorers' throughput on normal answers through the scoring guard against the unguarded call, in one process.

* ``corpus``: ``--n`` generated answers per family (default 100,000; answers up to ``--max-chars``), each scored
  alone through the ``mir`` scorer (:meth:`evalcore.scorers.mir.MirScorer.score_one`: cap, guard, rule) or judged
  alone (:func:`evalcore.pipeline.stages.judge_batch`, batches of 256); per family the answers that errored, the
  total seconds and the **slowest answer found** (its length, its first characters, its seconds).
* ``worst``: per rule family, answers built to cost the most **at the family's cap** (and far past it: cut before
  parsing), reference included where the family's cost grows with it (beat: answer and reference both a thousand
  equal timestamps) — the worst seconds per answer, one core. Target: at most 2 s each.
* ``throughput``: ``--normal`` normal answers (benchmarks/cmi_scorers.py's synthetic responses) scored per row by
  the guarded path (``score_one``) and by the unguarded one (the rule called directly, the released stops caught,
  as before the guard), interleaved in rounds: items per CPU second and the ratio.

Every figure is CPU seconds of this process (``time.process_time``): the cost on one core, whatever else a shared
machine runs.

    .venv/bin/python benchmarks/hostile_answers.py [--n 100000] [--normal 100000] [--max-chars 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))  # the corpus of bad answers
sys.path.insert(0, HERE)  # cmi_scorers' normal answers

import pyarrow as pa  # noqa: E402

from bad_answers import corpus  # noqa: E402
from cmi_scorers import synthetic  # noqa: E402
from evalcore.mir_rules.caps import CAPS, cut  # noqa: E402
from evalcore.mir_rules.rules import PublishedStops, Unreproducible  # noqa: E402
from evalcore.scorers.mir import MirScorer, _meta  # noqa: E402

GENRES = ["blues", "classical", "country", "disco", "hiphop", "jazz", "metal", "pop", "reggae", "rock"]
NSYNTH = [str(p) for p in range(9, 120)]  # NSynth pitch: the largest label set, and digits inside each other
REFERENCES = {
    "cmi_lyrics": ("DSing", "SOME DAYS I'M RICH AND SOME DAYS I'M POOR"),
    "cmi_beat": ("gtzan_beat", ",".join(f"{0.3 + 0.5 * i:.2f}" for i in range(60))),
    "cmi_melody": ("MedleyDB", str([(f"{10 + k * 0.0058:.4f}", 60 + k % 3) for k in range(1720)])),
    "cmi_technique": ("Guzheng_Tech", "[('0.5', '1.5', 'Vibrato'), ('2.0', '3.0', 'Plucks')]"),
    "cmi_key": ("GS_key", "C major"),
    "cmi_multiclass": ("Nsynth_pitch", "60"),
    "cmi_regression": ("EMO_arousal", "0.3"),
    "cmi_tagging": ("MTG_genre", "rock, pop"),
}
JUDGES = {"mcq_string": "mcq", "mcq_mmau": "mcq", "mcq_mmar": "mcq", "mcq_mmau_pro": "mcq", "mcq_muchomusic": "mcq",
          "mcq_rul": "mcq", "true_false": "mcq", "binary_choice": "mcq", "lexicon": "factual"}


def _row(rule: str, text: str, reference: str | None = None) -> dict[str, Any]:
    task, ref = REFERENCES[rule]
    meta = json.dumps({"label_set": NSYNTH}) if rule == "cmi_multiclass" else None
    return {"category": rule, "task": task, "text": text, "reference": ref if reference is None else reference,
            "metadata": meta}


def _worst_cases(rule: str) -> dict[str, tuple[str, str | None]]:
    """Answers (and, where it matters, references) built to cost ``rule`` the most at its cap."""
    cap = CAPS[rule].chars
    twice = 2 * cap  # past the cap: cut before parsing
    if rule == "cmi_lyrics":
        return {"digit words": ("7 " * twice, None), "prefix words": ("a lyrics are" * twice, None),
                "long numbers": (("9" * 26 + " ") * (twice // 27), None),
                "words vs long ref": ("la " * twice, "la " * (cap // 3)),
                "one long word": ("x" * twice, None)}
    if rule == "cmi_beat":
        same, at_cap = ",".join(["1"] * 5000), ",".join(["1"] * CAPS[rule].pieces)  # a reference within the cap
        spread = ",".join(f"{i * 0.01:.2f}" for i in range(5000))
        return {"equal both": (same, at_cap), "spread both": (spread, cut(rule, spread)[0]),
                "equal vs ref": (same, None), "inf nan": (",".join(["1e308", "nan", "inf"] * 2000), None)}
    if rule == "cmi_melody":
        pairs = str([(f"{k * 0.0058:.4f}", 60) for k in range(20_000)])
        ref = cut(rule, pairs)[0] + "]"  # a reference at the cap
        return {"pairs at cap": (pairs, None), "pairs both": (pairs, ref),
                "names": (str([(f"{k * 0.01:.2f}", "C#4") for k in range(20_000)]), None),
                "long span": (str([(f"{k * 1000.0:.1f}", 60) for k in range(20_000)]), None),
                "fallback pairs": ("(" + "1,2)(" * twice, None),
                "unclosed": ("[" + "('1', 60), " * (twice // 11), None)}
    if rule == "cmi_technique":
        return {"one event": ("[('0', '10', 'Vibrato')" + " " * twice + ")", None),
                "many before": ("[" + "('0', '10', 'Vibrato'), " * (twice // 26) + ")", None)}
    if rule == "cmi_multiclass":
        return {"all labels": (" ".join(NSYNTH) * (twice // 400), None), "digits": ("9" * twice, None)}
    if rule == "cmi_regression":
        return {"digit runs": ("5 " * twice, None), "scale words": ("out of 9 1-9 scale " * (twice // 19), None)}
    if rule == "cmi_tagging":
        return {"unique words": (" ".join(f"w{i}" for i in range(twice // 4)), None),
                "tags": ("rock pop jazz " * (twice // 14), None)}
    return {"letters": ("c#" * cap, None), "key words": ("Ab minor " * (twice // 9), None)}


def _time(fn, *args) -> tuple[float, Any]:
    """(CPU seconds of this process, result): the cost on one core, whatever else the machine runs (wall seconds
    on a shared machine count the other jobs' time too)."""
    t = time.process_time()
    out = fn(*args)
    return time.process_time() - t, out


def _unguarded(scorer: MirScorer, row: dict[str, Any]) -> dict[str, Any]:
    """The row scored as before the guard: the rule on the whole text, the released stops caught."""
    name = row["category"]
    try:
        meta = {**_meta(row), "task": row["task"]}
        return scorer.rules[name].score(row.get("text") or "", row.get("reference"), meta)
    except (PublishedStops, Unreproducible) as e:
        return {"error": f"{name}: {e}"}
    except (ValueError, TypeError) as e:
        return {"error": f"{name}: {type(e).__name__}"}


def run_corpus(scorer: MirScorer, n: int, max_chars: int, families: list[str] | None = None) -> None:
    print(f"corpus: {n} generated answers per family, up to {max_chars} characters (seed 0)")
    for rule in (r for r in REFERENCES if families is None or r in families):
        slowest, total, errored = (0.0, "", 0), 0.0, 0
        for text in corpus(rule, n, seed=0, max_chars=max_chars):
            dt, got = _time(scorer.score_one, rule, _row(rule, text))
            total += dt
            errored += "error" in got
            if dt > slowest[0]:
                slowest = (dt, text[:40], len(text))
        print(f"  {rule:16s} {total:7.1f} CPU s, errored {errored:6d}; slowest {slowest[0]:.3f} CPU s "
              f"({slowest[2]} chars: {slowest[1]!r})")
    from evalcore.pipeline.stages import JUDGED, judge_batch

    for kind, family in ((k, f) for k, f in JUDGES.items() if families is None or k in families):
        params = json.dumps({"embedder": "bag-of-words"} if kind == "mcq_mmau_pro" else {})
        answers = [a.encode("utf-8", "replace").decode("utf-8") for a in corpus(family, n, seed=1, max_chars=max_chars)]
        slowest, total, errored = (0.0, 0), 0.0, 0
        for start in range(0, n, 256):
            part = answers[start:start + 256]
            rows = [{"request_id": f"r{i}", "protocol": "p", "task": "instrument", "question": "Which?", "text": a,
                     "options": ["guitar", "piano"] if kind == "binary_choice" else ["guitar", "piano", "drums",
                                                                                      "vocals"],
                     "error": None, "n_chunks": 1}
                    for i, a in enumerate(part)]
            table = pa.Table.from_pylist([{f.name: r.get(f.name) for f in JUDGED} for r in rows], schema=JUDGED)
            dt, out = _time(judge_batch, table, {"p": (kind, params)})
            total += dt
            errored += sum(e is not None for e in out.column("error").to_pylist())
            slowest = max(slowest, (dt / len(part), start))
        print(f"  judge {kind:14s} {total:6.1f} CPU s, errored {errored:6d}; slowest batch {slowest[0] * 1e3:.2f} "
              "CPU ms/answer")


def run_worst(scorer: MirScorer) -> dict[str, float]:
    print("worst case per answer at each family's cap (CPU seconds, one core; target <= 2 s):")
    worst: dict[str, float] = {}
    for rule in REFERENCES:
        for label, (text, reference) in _worst_cases(rule).items():
            dt, got = _time(scorer.score_one, rule, _row(rule, text, reference))
            worst[rule] = max(worst.get(rule, 0.0), dt)
            what = f"error: {got['error'][:50]}" if "error" in got else f"cut {got.get('truncated', 0)} chars"
            print(f"  {rule:16s} {label:18s} {len(text):8d} chars {dt:7.3f} s  ({what})")
    print("  worst per family: " + ", ".join(f"{r} {s:.2f} s" for r, s in worst.items()))
    return worst


def run_throughput(scorer: MirScorer, n: int, rounds: int = 5) -> None:
    rows = synthetic(n)
    for r in rows[:64]:
        scorer.score_one(r["category"], r), _unguarded(scorer, r)  # libraries loaded, untimed
    guarded = unguarded = 0.0
    size = -(-len(rows) // rounds)
    for k in range(rounds):  # interleaved: the machine's load falls on both paths alike
        part = rows[k * size:(k + 1) * size]
        t = time.process_time()
        for r in part:
            _unguarded(scorer, r)
        unguarded += time.process_time() - t
        t = time.process_time()
        for r in part:
            scorer.score_one(r["category"], r)
        guarded += time.process_time() - t
    print(f"throughput on {len(rows)} normal answers (8 rules, per CPU second): guarded {len(rows) / guarded:8.0f} "
          f"items/s, unguarded {len(rows) / unguarded:8.0f} items/s; guarded / unguarded = {unguarded / guarded:.3f} "
          f"(a drop of {100 * (1 - unguarded / guarded):.1f} %)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="generated answers per family")
    ap.add_argument("--normal", type=int, default=100_000, help="normal answers for the throughput")
    ap.add_argument("--max-chars", type=int, default=2_000, help="the longest generated answer")
    ap.add_argument("--only", choices=("corpus", "worst", "throughput"), default=None)
    ap.add_argument("--families", default=None, help="the corpus's families, comma-separated (default: every rule "
                    "family and judge)")
    args = ap.parse_args()
    scorer = MirScorer()
    for rule in REFERENCES:  # the libraries' first load (mir_eval, jiwer, num2words, scikit-learn), untimed
        scorer.score_one(rule, _row(rule, "C major"))
    print(f"cores: {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")
    if args.only in (None, "worst"):
        run_worst(scorer)
    if args.only in (None, "throughput"):
        run_throughput(scorer, args.normal)
    if args.only in (None, "corpus"):
        run_corpus(scorer, args.n, args.max_chars, args.families.split(",") if args.families else None)


if __name__ == "__main__":
    main()
