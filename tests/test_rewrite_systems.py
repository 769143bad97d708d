"""Paraphrase (skyline) and adversarial rewrites as pipeline "systems" for free-form QA, end to end on Ray.

The rewrites come from tests/llm_server.py over real HTTP; one item's calls always fail (HTTP 500)
and one item has an empty reference: both become error rows with their reason, nothing is lost,
and a second run over the same cache calls the server only for the item that failed.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from evalcore.runconfig.config import parse_config
from evalcore.llm.prompts import ADVERSARIAL, PARAPHRASE
from evalcore.models.base import AudioPrompt
from evalcore.models.reference_rewrite import ReferenceRewrite, RewriteFailed
from evalcore.pipeline.run import run
from llm_server import TEST_API_KEY_ENV, Fault, FaultSchedule, LLMServer, install_test_key

KEY = install_test_key()  # before Ray starts, so the model actors inherit it
FAIL = "FAILME"
REFERENCES = {
    "q0": "A calm piano ballad with soft strings.",
    "q1": "An energetic rock song with electric guitar and drums.",
    "q2": "A slow jazz tune led by a saxophone.",
    "q3": "Upbeat electronic dance music with synthesizers.",
    "q4": f"A {FAIL} folk song with acoustic guitar.",
    "q5": "",
}
SWAP = {"calm": "aggressive", "piano": "trumpet", "rock": "classical", "guitar": "harp", "jazz": "metal",
        "saxophone": "tuba", "upbeat": "somber", "synthesizers": "bagpipes", "slow": "fast", "soft": "loud"}


def quoted(messages: list[dict]) -> str:
    return messages[-1]["content"].split('"""\n', 1)[1].rsplit('\n"""', 1)[0]


def rewriter(messages: list[dict]) -> str:
    """Paraphrase: same words, new frame. Adversarial: swap the musical facts, keep the frame."""
    text = quoted(messages)
    if messages[0]["content"] == PARAPHRASE.system:
        return f"In other words: {text[0].lower()}{text[1:]}"
    assert messages[0]["content"] == ADVERSARIAL.system
    return " ".join(SWAP.get(w.lower(), w) for w in text.split(" "))


class FailOn(FaultSchedule):
    """HTTP 500 for every request whose body contains ``needle`` (whatever its arrival order)."""

    def __init__(self, needle: str) -> None:
        super().__init__()
        self.needle = needle.encode()
        self.srv: LLMServer | None = None

    def fault_for(self, index: int) -> Fault | None:
        assert self.srv is not None
        return Fault("500") if self.needle in self.srv.requests[index].body else None


def llm_params(srv: LLMServer, cache: str) -> dict:
    return dict(base_url=srv.base_url, model="rewrite-model", api_key_env=TEST_API_KEY_ENV, rpm=100_000,
                tpm=10_000_000, timeout_s=5.0, max_retries=1, backoff_base_s=0.01, backoff_max_s=0.05,
                cache_root=cache, threads=4)


def test_backend_rewrites_reference_not_prompt_and_reports_failures(tmp_path):
    faults = FailOn(FAIL)
    with LLMServer(answer=rewriter, faults=faults) as srv:
        faults.srv = srv
        para = ReferenceRewrite(mode="paraphrase", **llm_params(srv, str(tmp_path)))
        adv = ReferenceRewrite(mode="adversarial", **llm_params(srv, str(tmp_path)))
        batch = [AudioPrompt(np.zeros(10, np.float32), 16_000, "What is it?", REFERENCES[q]) for q in REFERENCES]
        p_out, a_out = para.generate(batch), adv.generate(batch)
        bodies = [json.loads(r.body) for r in srv.requests]
    assert p_out[0] == "In other words: a calm piano ballad with soft strings."
    assert a_out[0] == "A aggressive trumpet ballad with loud strings."
    for out in (p_out, a_out):
        assert isinstance(out[4], RewriteFailed) and str(out[4]).startswith("HTTP 500") and "after 2 attempts" in str(out[4])
        assert isinstance(out[5], RewriteFailed) and str(out[5]) == "no reference answer to rewrite"
    assert len(bodies) == 2 * (4 + 2)  # the empty reference is never sent; the failing one twice (1 retry)
    assert all(b["temperature"] == 0.0 and b["seed"] == 0 and "What is it?" not in json.dumps(b) for b in bodies)
    assert para.info()["checkpoint"] == "rewrite-model+paraphrase@1"
    assert adv.generation_settings()["template"] == "adversarial@1"
    with pytest.raises(ValueError):
        ReferenceRewrite(mode="shuffle", **llm_params(srv, str(tmp_path)))


def _wav(freq: float) -> bytes:
    t = np.arange(8000) / 16_000
    buf = io.BytesIO()
    sf.write(buf, (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32), 16_000, format="WAV")
    return buf.getvalue()


def _config(tmp_path, srv: LLMServer, root: str) -> dict:
    audio = tmp_path / "audio"
    audio.mkdir(exist_ok=True)
    lines = []
    for i, (q, ref) in enumerate(REFERENCES.items()):
        (audio / f"{q}.wav").write_bytes(_wav(220.0 * (i + 1)))
        lines.append(json.dumps({"item_id": q, "protocol": "freeform", "task": "caption", "audio_uri": f"{q}.wav",
                                 "question": "Describe the music.", "reference": ref}))
    (tmp_path / "items.jsonl").write_text("\n".join(lines) + "\n")
    llm = llm_params(srv, str(tmp_path / "llm-cache"))
    res = {"num_cpus": 0.25, "concurrency": 1, "batch_size": 4}
    return {
        "name": "rewrites",
        "datasets": [{"name": "qa", "kind": "items_file",
                      "params": {"path": str(tmp_path / "items.jsonl"), "audio_root": str(audio)}}],
        "models": [{"name": "paraphrase", "kind": "reference_rewrite", "params": {**llm, "mode": "paraphrase"},
                    "resources": res},
                   {"name": "adversarial", "kind": "reference_rewrite", "params": {**llm, "mode": "adversarial"},
                    "resources": res}],
        "protocols": [{"name": "freeform", "conditions": ["correct"]}],
        "storage": {"root": root},
        "stats": {"bootstrap_resamples": 100},
        "ray": {"progress_bars": False, "decode_num_cpus": 0.25},
    }


@pytest.mark.ray
def test_rewrite_systems_end_to_end_with_error_rows_and_cached_rerun(tmp_path, local_ray):
    faults = FailOn(FAIL)
    with LLMServer(answer=rewriter, faults=faults) as srv:
        faults.srv = srv
        first = run(parse_config(_config(tmp_path, srv, str(tmp_path / "run1"))))
        n_first = len(srv.requests)
        second = run(parse_config(_config(tmp_path, srv, str(tmp_path / "run2"))))
        rerun_bodies = [r.body for r in srv.requests[n_first:]]

    for res in (first, second):
        c = res.counts
        assert c["requests_in"] == 12 == c["requests_scored"] + c["requests_errored"]  # nothing lost
        assert c["requests_scored"] == 8 and c["requests_errored"] == 4
    assert n_first == 2 * 4 + 2 * 2  # 4 good items per system + the failing item twice (1 retry) per system
    assert len(rerun_bodies) == 4 and all(FAIL.encode() in b for b in rerun_bodies)  # zero calls for cached keys

    root = tmp_path / "run1"
    errors = pq.read_table(root / "tables" / "errors.parquet").to_pandas()
    reasons = {(r.model, r.item_id): r.error for r in errors.itertuples()}
    assert set(reasons) == {(m, q) for m in ("paraphrase", "adversarial") for q in ("q4", "q5")}
    assert all(e.startswith("RewriteFailed: HTTP 500") and "after 2 attempts" in e
               for (m, q), e in reasons.items() if q == "q4")
    assert all(e == "RewriteFailed: no reference answer to rewrite" for (m, q), e in reasons.items() if q == "q5")
    assert set(errors["error_stage"]) == {"model"}

    responses = pq.read_table(root / "responses").to_pandas()
    ok = responses[responses["error"].isna()]
    texts = {(r.model, r.item_id): r.text for r in ok.itertuples()}
    assert texts[("paraphrase", "q1")] == "In other words: an energetic rock song with electric guitar and drums."
    assert texts[("adversarial", "q2")] == "A fast metal tune led by a saxophone."  # ("saxophone." ≠ "saxophone")
    info = json.loads(ok[ok["model"] == "adversarial"]["model_info"].iloc[0])
    assert info["backend"] == "ReferenceRewrite" and info["checkpoint"] == "rewrite-model+adversarial@1"

    summary = pq.read_table(root / "tables" / "summary.parquet").to_pandas()
    models = set(summary[summary["protocol"] == "freeform"]["model"])
    # the two systems, plus (since scorers/freeform.py compares them) their paired "paraphrase-adversarial" rows
    assert {"paraphrase", "adversarial"} <= models <= {"paraphrase", "adversarial", "paraphrase-adversarial"}
    second_summary = pq.read_table(tmp_path / "run2" / "tables" / "summary.parquet").to_pandas()
    key = ["model", "metric", "group", "condition"]
    a = summary.sort_values(key).reset_index(drop=True)[key + ["value"]]
    b = second_summary.sort_values(key).reset_index(drop=True)[key + ["value"]]
    assert a.equals(b)  # reproducible from the cache

    secret = KEY.encode()  # the key is in no output, log or cache file
    written = [p for d in ("run1", "run2", "llm-cache") for p in (tmp_path / d).rglob("*") if p.is_file()]
    assert any("llm-log" in p.parts for p in written) and not [p for p in written if secret in p.read_bytes()]


def test_the_metrics_know_every_rewrite_role_the_backend_records() -> None:
    """The free-form metrics tell a rewrite system's role from the template name its model_info records; the
    roles they know are exactly the backend's templates (kept in step here, not by an import across layers)."""
    from evalcore.scorers.freeform import REWRITE_BACKEND, REWRITE_ROLES, rewrite_roles
    from evalcore.models.reference_rewrite import TEMPLATES

    assert set(REWRITE_ROLES) == set(TEMPLATES)
    infos = {f"sys-{r}": {"backend": REWRITE_BACKEND, "generation": {"template": f"{r}@1"}} for r in TEMPLATES}
    assert rewrite_roles({**infos, "other": {"backend": "HFAudioLM"}}) == {f"sys-{r}": r for r in TEMPLATES}
