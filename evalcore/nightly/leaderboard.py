"""Several series side by side: the latest finished checkpoint of every series that shares a suite
fingerprint (the same items, conditions and metric definitions), compared pairwise over shared items.

Per fingerprint with two or more series, the *leader* of each protocol × dataset × variant × metric is the
series with the highest correct-condition mean; every other series is compared with it item by item
(paired difference over the items both scored, seeded bootstrap CI, paired t-test, Holm across that
series' comparisons), as the nightly compares checkpoints of one series. Comparisons are cached under
``<root>/compare/_leaderboard/``.
"""

from __future__ import annotations

import pandas as pd

from evalcore.nightly import compare
from evalcore.nightly.config import NightlyConfig
from evalcore.nightly.history import cached_comparison, finished
from evalcore.core.nightly_outcome import LedgerRecord

COLUMNS = ["suite_fingerprint", "series", "checkpoint", "leader", "protocol", "dataset", "variant", "metric", "n",
           "value", "leader_value", "delta", "ci_low", "ci_high", "p_adjusted"]


def latest(cfg: NightlyConfig, records: list[LedgerRecord]) -> dict[str, list[LedgerRecord]]:
    """suite fingerprint → the latest finished record of each series evaluated with it (two or more series)."""
    groups: dict[str, list[LedgerRecord]] = {}
    for s in cfg.series:
        done = finished(records, s.name)
        if done and done[-1].suite_fingerprint:
            groups.setdefault(str(done[-1].suite_fingerprint), []).append(done[-1])
    return {fp: recs for fp, recs in groups.items() if len(recs) > 1}


def _means(rec: LedgerRecord) -> pd.DataFrame:
    """Correct-condition per-item means of one run (group all), by protocol × dataset × variant × metric."""
    s = compare.load_scores(rec.run_root)
    s = s[(s["condition"] == "correct") & (s["group"] == "all")]
    return s.groupby(["protocol", "dataset", "variant", "metric"], as_index=False)["score"].mean()


def leaderboard(cfg: NightlyConfig, records: list[LedgerRecord]) -> pd.DataFrame:
    """One row per series × headline comparison with its fingerprint's leader (the leader's own rows have
    delta 0); empty when no two series share a suite."""
    out = []
    for fp, recs in latest(cfg, records).items():
        means = pd.concat([_means(r).assign(series=r.series) for r in recs], ignore_index=True)
        keys = ["protocol", "dataset", "variant", "metric"]
        leaders = means.loc[means.groupby(keys)["score"].idxmax()].set_index(keys)["series"]
        by_series = {r.series: r for r in recs}
        for rec in recs:
            for lead in sorted(set(leaders)):
                mine = [k for k, v in leaders.items() if v == lead]
                if lead == rec.series:
                    for k in mine:
                        v = float(means[(means["series"] == lead)].set_index(keys).loc[k, "score"])
                        out.append({**dict(zip(keys, k)), "suite_fingerprint": fp, "series": lead,
                                    "checkpoint": rec.checkpoint, "leader": lead, "n": None, "value": v,
                                    "leader_value": v, "delta": 0.0, "ci_low": 0.0, "ci_high": 0.0,
                                    "p_adjusted": None})
                    continue
                ref = by_series[lead]
                rows = cached_comparison(cfg, "_leaderboard", rec, ref, f"{rec.series}-{rec.checkpoint}--"
                                                                       f"{ref.series}-{ref.checkpoint}")
                rows = rows[(rows["condition"] == "correct") & (rows["group"] == "all")]
                rows = rows[rows.set_index(keys).index.isin(mine)]
                if not len(rows):
                    continue
                rows = compare.decide(rows, cfg.min_effect.of, cfg.alpha)
                for r in rows.itertuples():
                    out.append({"suite_fingerprint": fp, "series": rec.series, "checkpoint": rec.checkpoint,
                                "leader": lead, "protocol": r.protocol, "dataset": r.dataset, "variant": r.variant,
                                "metric": r.metric, "n": int(r.n), "value": r.value, "leader_value": r.reference_value,
                                "delta": r.delta, "ci_low": r.ci_low, "ci_high": r.ci_high,
                                "p_adjusted": r.p_adjusted})
    return pd.DataFrame(out, columns=COLUMNS)
