"""CMI-Bench's tagging rules (``multi_label_bert`` and ``multi_label_classification`` of the released
``evaluate.py``, commit 4c15f410): MTG-Jamendo genre / instrument / mood-theme / top-50 and MagnaTagATune, scored by
macro ROC-AUC and PR-AUC (scikit-learn ``roc_auc_score`` / ``average_precision_score``, ``average="macro"``) over the
task's tag vocabulary (:data:`VOCABULARIES`: the released sets, MTT's ``data/MTT/tags.npy``).

**Embedding rule** (``multi_label_bert``, the one the released script runs; :func:`embedding_truth`):

1. Truth: a tag is true when it occurs **as a substring** of the lower-cased answer ("rock" is true for "poprock").
2. Scores: the similarity of the response (lower-cased, stripped) to each tag — released: GTE-Qwen2-7B-instruct
   (``encode(response, prompt_name="query") @ encode(tags).T × 100``) and, printed beside it, BERTScore recall.
   A run names its embedder in the ``mir`` protocol's ``similarity`` (``{kind: sentence_transformers, path: …}``,
   :mod:`evalcore.core.embedders`; :func:`configured`), computed as released and named (library, version, folder, config
   hash) in every definition; a test holds the AUCs to the released function on a tiny sentence-embedding model.
   Where none is configured the rule uses a **bag-of-words stand-in** (the MMAU-Pro judge's,
   :func:`evalcore.core.embedders.bag_of_words`), named as such in every definition and on the model card.

**String-match rule** (``multi_label_classification``, kept in the released file, figures ``*_exact``;
:func:`exact_vectors`): truth = the tag is one of the answer's comma-separated parts, each normalised
(:func:`~evalcore.mir_rules.rules.normalise`); prediction = the tag occurs as a substring of the lower-cased
response (not normalised: "electricguitar" never matches "electric guitar").

ROC-AUC and PR-AUC rank items against each other, so they are not means of per-item values: the ``mir`` scorer
computes them per cell from each item's vectors (column ``tag_vectors``), with a percentile bootstrap over items
(at most :data:`MAX_RESAMPLES` resamples: each is a full scikit-learn computation) and paired differences correct −
control over the same resampled items (:func:`auc_rows`). A tag with only positives or only negatives among a cell's
items makes the figure undefined (scikit-learn 1.9 warns and gives NaN; the older one the released script ran
raises, and the script stops); evalcore reports it as NaN —
counted, never guessed — and leaves such resamples out of the interval.
"""

from __future__ import annotations

import json
import warnings
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from evalcore.datasets.cmi_bench import Family
from evalcore.core.embedders import EmbedderSpec, bag_of_words, describe, load
from evalcore.mir_rules.rules import RULES, PublishedStops, Rule, normalise, reference_of
from evalcore.core.seeding import derive_seed
from evalcore.stats.aggregate import Aggregate, mean_of

__all__ = ["VOCABULARIES", "MAX_RESAMPLES", "FIGURES", "exact_vectors", "embedding_truth", "stand_in", "TaggingRule",
           "configured", "auc_rows"]

_G = ("60s 70s 80s 90s acidjazz alternative alternativerock ambient atmospheric blues bluesrock bossanova breakbeat "
      "celtic chanson chillout choir classical classicrock club contemporary country dance darkambient darkwave "
      "deephouse disco downtempo drumnbass dub dubstep easylistening edm electronic electronica electropop ethno "
      "eurodance experimental folk funk fusion groove grunge hard hardrock hiphop house idm improvisation indie "
      "industrial instrumentalpop instrumentalrock jazz jazzfusion latin lounge medieval metal minimal newage newwave "
      "orchestral pop popfolk poprock postrock progressive psychedelic punkrock rap reggae rnb rock rocknroll "
      "singersongwriter soul soundtrack swing symphonic synthpop techno trance triphop world worldfusion")
_I = ("accordion acousticbassguitar acousticguitar bass beat bell bongo brass cello clarinet classicalguitar computer "
      "doublebass drummachine drums electricguitar electricpiano flute guitar harmonica harp horn keyboard oboe "
      "orchestra organ pad percussion piano pipeorgan rhodes sampler saxophone strings synthesizer trombone trumpet "
      "viola violin voice")
_E = ("action adventure advertising background ballad calm children christmas commercial cool corporate dark deep "
      "documentary drama dramatic dream emotional energetic epic fast film fun funny game groovy happy heavy holiday "
      "hopeful inspiring love meditative melancholic melodic motivational movie nature party positive powerful "
      "relaxing retro romantic sad sexy slow soft soundscape space sport summer trailer travel upbeat uplifting")
_T50 = ("acousticguitar alternative ambient atmospheric bass chillout classical computer dance downtempo drummachine "
        "drums easylistening electricguitar electricpiano electronic emotional energetic experimental film folk funk "
        "guitar happy hiphop house indie instrumentalpop jazz keyboard lounge metal newage orchestral piano pop "
        "popfolk poprock reggae relaxing rock soundtrack strings synthesizer techno trance triphop violin voice world")
_MTT = ("ambient|beat|beats|cello|choir|choral|classic|classical|country|dance|drums|electronic|fast|female|female "
        "vocal|female voice|flute|guitar|harp|harpsichord|indian|loud|male|male vocal|male voice|man|metal|new age|no "
        "vocal|no vocals|no voice|opera|piano|pop|quiet|rock|singing|sitar|slow|soft|solo|strings|synth|techno|violin|"
        "vocal|vocals|voice|weird|woman")
#: task → the released tag vocabulary, sorted as the released functions sort it
VOCABULARIES: dict[str, tuple[str, ...]] = {
    "MTG_genre": tuple(sorted(_G.split())), "MTG_instrument": tuple(sorted(_I.split())),
    "MTG_emotion": tuple(sorted(_E.split())), "MTG_top50tags": tuple(sorted(_T50.split())),
    "MTT": tuple(sorted(_MTT.split("|"))),
}
#: the most bootstrap resamples an AUC interval draws (each resample is a full scikit-learn computation)
MAX_RESAMPLES = 200
#: (response, tags) → one similarity per tag (released: GTE's query-document dot product × 100)
Similarity = Callable[[str, Sequence[str]], np.ndarray]
STAND_IN = ("bag-of-words stand-in for GTE-Qwen2-7B-instruct (no embedder configured: the mir protocol's similarity "
            "names one)")


def exact_vectors(response: str, reference: Any, tags: Sequence[str]) -> tuple[list[int], list[int]]:
    """(truth, prediction) of the released string-match rule (module docstring)."""
    try:
        parts = [normalise(a) for a in str(reference_of(reference)).split(",")]
    except Exception:  # noqa: BLE001 - the released code takes no answer where it cannot split one
        parts = []
    said = response.lower().strip()
    return [int(t in parts) for t in tags], [int(t in said) for t in tags]


def embedding_truth(reference: Any, tags: Sequence[str]) -> list[int]:
    """The released embedding rule's truth: each tag as a substring of the lower-cased answer."""
    answer = str(reference_of(reference)).lower().strip()
    return [int(t in answer) for t in tags]


def stand_in(response: str, tags: Sequence[str]) -> np.ndarray:
    """The bag-of-words stand-in's similarities (× 100, as the released GTE scores)."""
    vecs = bag_of_words([response, *tags])
    return (vecs[1:] @ vecs[0]) * 100


class _Configured:
    """A configured embedder's similarity, loaded on first use (once per process: :func:`evalcore.core.embedders.load`)."""

    def __init__(self, spec: EmbedderSpec) -> None:
        self.spec = spec

    def __call__(self, response: str, tags: Sequence[str]) -> np.ndarray:
        return load(self.spec).similarity(response, tags)


def configured(spec: EmbedderSpec | None, vocabularies: Mapping[str, Sequence[str]] | None = None) -> "TaggingRule":
    """The tagging rule with ``spec``'s embedder as its similarity, named in its definitions; the stand-in without.

    As released (``multi_label_bert``, ``embed="gte"``): ``encode([response], prompt_name="query") @
    encode(tags).T × 100`` in the model's float32. The released line appends that 1 × n result whole
    (``y_pred.append(scores.tolist())``), which scikit-learn refuses as a 3-d array ("Found array with dim 3"): the
    released figures must have read each response's one row, and so does evalcore."""
    if spec is None:
        return TaggingRule(vocabularies=vocabularies)
    return TaggingRule(similarity=_Configured(spec), embedder=describe(spec), vocabularies=vocabularies)


@RULES.register(Family.TAGGING)
class TaggingRule(Rule):
    """Per item: both rules' vectors (``tag_vectors``, JSON); the figures are the ``mir`` scorer's AUC rows."""

    columns = ("tag_answered",)
    aggregates = (Aggregate("tag_answered", ("tag_answered",), mean_of(),
                            "share of responses naming at least one tag of the task's vocabulary (released "
                            "string match: a tag as a substring of the lower-cased response)"),)

    def __init__(self, similarity: Similarity | None = None, embedder: str = STAND_IN,
                 vocabularies: Mapping[str, Sequence[str]] | None = None) -> None:
        self.similarity, self.embedder = similarity or stand_in, embedder
        self.vocabularies = VOCABULARIES if vocabularies is None else vocabularies

    def score(self, response: str, reference: Any, meta: Mapping[str, Any]) -> dict[str, Any]:
        tags = self.vocabularies.get(str(meta.get("task")))
        if tags is None:
            raise PublishedStops(f"no released tag vocabulary for task {meta.get('task')!r}")
        said = response.lower().strip()
        truth, pred = exact_vectors(response, reference, tags)
        scores = np.asarray(self.similarity(said, tags), dtype=float)
        vectors = {"truth": embedding_truth(reference, tags), "scores": [float(s) for s in scores],
                   "truth_exact": truth, "pred_exact": pred}
        return {"tag_answered": float(any(pred)), "tag_vectors": json.dumps(vectors)}


def _auc(truth: np.ndarray, scores: np.ndarray) -> tuple[float, float]:
    from sklearn.metrics import average_precision_score, roc_auc_score  # heavy: scikit-learn (about a second)

    pos = truth.sum(axis=0)
    if len(truth) == 0 or (pos == 0).any() or (pos == len(truth)).any():
        return float("nan"), float("nan")  # the released roc_auc_score raises first: neither figure is printed
    try:
        with warnings.catch_warnings():  # a tag with one class only: undefined (older scikit-learn raises)
            warnings.simplefilter("ignore")
            return (float(roc_auc_score(truth, scores, average="macro")),
                    float(average_precision_score(truth, scores, average="macro")))
    except ValueError:
        return float("nan"), float("nan")


_FIGURES = (("roc_auc", "truth", "scores"), ("pr_auc", "truth", "scores"),
            ("roc_auc_exact", "truth_exact", "pred_exact"), ("pr_auc_exact", "truth_exact", "pred_exact"))
#: the figures the rule reports (summary rows of :func:`auc_rows`, not aggregates of item means): ROC-AUC first
FIGURES = tuple(name for name, _, _ in _FIGURES)
_DEFINITIONS = {
    "roc_auc": "CMI-Bench tagging macro ROC-AUC (evaluate.py multi_label_bert @ 4c15f410, scikit-learn) of response-"
               "tag similarities against tags found as substrings of the answer; similarity: {embedder}",
    "pr_auc": "CMI-Bench tagging macro PR-AUC (average precision), as roc_auc; similarity: {embedder}",
    "roc_auc_exact": "CMI-Bench tagging macro ROC-AUC of the released string-match rule (multi_label_classification): "
                     "tags named in the response vs the answer's comma-separated tags",
    "pr_auc_exact": "macro PR-AUC of the released string-match rule (multi_label_classification)",
}


def _matrices(g: pd.DataFrame) -> dict[str, np.ndarray]:
    vecs = [json.loads(v) for v in g["tag_vectors"]]
    return {k: np.array([v[k] for v in vecs], dtype=float) for k in ("truth", "scores", "truth_exact", "pred_exact")}


def resampled_auc(truth: np.ndarray, scores: np.ndarray) -> tuple[float, float]:
    """Macro ROC-AUC and PR-AUC as :func:`_auc` gives them (a test holds the two equal, ties included), computed
    for the bootstrap's resamples: ROC-AUC from average ranks (``scipy.stats.rankdata``; the Mann-Whitney
    statistic, which is the area under the ROC curve with ties as scikit-learn draws them), average precision as
    scikit-learn sums it (recall steps × precision at each distinct score). scikit-learn's per-tag validation costs
    about 100 times more, and an interval draws up to :data:`MAX_RESAMPLES` of them per cell."""
    from scipy.stats import rankdata  # heavy: scipy.stats (seconds)

    n = len(truth)
    pos = truth.sum(axis=0)
    if n == 0 or (pos == 0).any() or (pos == n).any():
        return float("nan"), float("nan")
    roc = ((rankdata(scores, axis=0) * truth).sum(axis=0) - pos * (pos + 1) / 2) / (pos * (n - pos))
    order = np.argsort(-scores, axis=0, kind="stable")
    s, y = np.take_along_axis(scores, order, 0), np.take_along_axis(truth, order, 0)
    tps = np.cumsum(y, axis=0)
    last = np.ones_like(s, dtype=bool)
    last[:-1] = s[1:] != s[:-1]  # the last row of each run of equal scores: one threshold each
    ap = []
    for j in range(truth.shape[1]):
        at = np.flatnonzero(last[:, j])
        t = tps[at, j]
        ap.append(float((np.diff(t, prepend=0.0) / pos[j] * (t / (at + 1))).sum()))
    return float(roc.mean()), float(np.mean(ap))


def _figures(m: dict[str, np.ndarray], idx: np.ndarray | None = None) -> dict[str, float]:
    """The four figures: by scikit-learn itself (``idx`` None: the point estimate), else on the resampled items
    ``idx`` by :func:`resampled_auc`."""
    auc = _auc if idx is None else resampled_auc
    sel = (lambda a: a) if idx is None else (lambda a: a[idx])
    emb, exact = auc(sel(m["truth"]), sel(m["scores"])), auc(sel(m["truth_exact"]), sel(m["pred_exact"]))
    return {"roc_auc": emb[0], "pr_auc": emb[1], "roc_auc_exact": exact[0], "pr_auc_exact": exact[1]}


def _ci(draws: list[float], confidence: float) -> tuple[float, float]:
    finite = np.array([d for d in draws if np.isfinite(d)])
    if len(finite) < max(2, len(draws) // 2):
        return float("nan"), float("nan")
    a = (1 - confidence) / 2 * 100
    return float(np.percentile(finite, a)), float(np.percentile(finite, 100 - a))


def auc_rows(pdf: pd.DataFrame, *, resamples: int, confidence: float, seed: int,
             embedder: str = STAND_IN) -> list[dict[str, Any]]:
    """Summary rows of the tagging figures: per cell value [CI], and paired differences correct − control."""
    if "tag_vectors" not in pdf.columns:
        return []
    rows = pdf[pdf["tag_vectors"].notna()]
    out: list[dict[str, Any]] = []
    b = min(resamples, MAX_RESAMPLES)
    for key, g in rows.groupby(["protocol", "dataset", "model", "variant"], sort=True, observed=True):
        sides = {c: s.sort_values("item_id") for c, s in g.groupby("condition", sort=True, observed=True)}
        base = dict(zip(("protocol", "dataset", "model", "variant"), key), group="all", ci_unit="item")
        for cond, s in sides.items():
            m = _matrices(s)
            point = _figures(m)
            gen = np.random.default_rng(derive_seed("bootstrap-auc", seed, *key, cond))
            undefined = all(np.isnan(v) for v in point.values())  # no interval around an undefined figure
            draws = [] if undefined else [_figures(m, gen.integers(0, len(s), len(s))) for _ in range(b)]
            for name, value in point.items():
                lo, hi = _ci([d[name] for d in draws], confidence)
                out.append({**base, "condition": cond, "kind": "value", "metric": name, "value": value, "ci_low": lo,
                            "ci_high": hi, "n": len(s), "clusters": len(s),
                            "definition": _DEFINITIONS[name].format(embedder=embedder)})
        if "correct" not in sides:
            continue
        for cond, s in sides.items():
            if cond == "correct":
                continue
            common = sorted(set(sides["correct"]["item_id"]) & set(s["item_id"]))
            x = _matrices(sides["correct"].set_index("item_id").loc[common].reset_index())
            y = _matrices(s.set_index("item_id").loc[common].reset_index())
            px, py = _figures(x), _figures(y)
            gen = np.random.default_rng(derive_seed("bootstrap-auc-diff", seed, *key, cond))
            draws = []
            undefined = all(np.isnan(px[k] - py[k]) for k in px)
            for _ in range(0 if undefined else b):
                idx = gen.integers(0, len(common), len(common))
                fx, fy = _figures(x, idx), _figures(y, idx)
                draws.append({k: fx[k] - fy[k] for k in fx})
            for name in px:
                lo, hi = _ci([d[name] for d in draws], confidence)
                out.append({**base, "condition": f"correct-{cond}", "kind": "paired_diff", "metric": name,
                            "value": px[name] - py[name], "ci_low": lo, "ci_high": hi, "n": len(common),
                            "clusters": len(common), "test": "paired_bootstrap",
                            "definition": f"paired difference correct − {cond} over items scored in both; "
                                          + _DEFINITIONS[name].format(embedder=embedder)})
    return out
