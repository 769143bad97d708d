"""Error rows: bounded single-line reasons without payloads, and failure classes."""

from __future__ import annotations

import base64

import pyarrow as pa

from evalcore.core.errors import CLASSES, MAX_REASON_CHARS, bounded, class_of
from evalcore.pipeline.stages import _fail, judge_batch
from evalcore.core.schema import ERRORS, JUDGMENT, REQUEST


def test_bounded_elides_payloads_and_caps_length():
    payload = base64.b64encode(bytes(range(256)) * 3000).decode()  # ~1 MB of "audio"
    echoed = f"Error code: 500 - {{'detail': [{{'input': {{'data': '{payload}'}},\n 'msg': 'bad'}}]}}"
    r = bounded(echoed)
    assert len(r) <= MAX_REASON_CHARS
    assert "\n" not in r and payload[:200] not in r
    assert "chars elided" in r and r.startswith("Error code: 500")


def test_bounded_notes_the_original_length_when_cut():
    r = bounded("word " * 2000, cap=300)
    assert len(r) <= 300 and "10000 chars in all" in r


def test_a_cut_reason_ends_on_a_whole_word():
    """validate's line for an unreachable s3:// checkpoint ended "…; Details: Co": a cut now ends on a word."""
    aws = ("When getting information for key 'ckpts/qwen2-audio-7b-instruct' in bucket 'YOUR-BUCKET': AWS Error "
           "NETWORK_CONNECTION during HeadObject operation: curlCode: 6, Could not resolve hostname; Details: Could "
           "not resolve host: YOUR-BUCKET.s3.amazonaws.com")
    r = bounded(aws, 200)
    kept = r.split(" … [cut, ")[0]
    assert len(r) <= 200 and aws.startswith(kept) and aws[len(kept)] == " " and r.endswith(f"{len(aws)} chars in all]")


def test_validate_names_an_unreachable_checkpoint_in_whole_words(monkeypatch):
    from evalcore.core import params, storage

    class Unreachable:
        def get_file_info(self, path):
            raise OSError("When getting information for key 'ckpts/m' in bucket 'YOUR-BUCKET': AWS Error "
                          "NETWORK_CONNECTION during HeadObject operation: curlCode: 6, Could not resolve hostname; "
                          "Details: Could not resolve host: YOUR-BUCKET.s3.amazonaws.com; and much more " * 3)

    monkeypatch.setattr(storage, "resolve", lambda uri: (Unreachable(), uri.removeprefix("s3://")))
    line = params._missing("s3://YOUR-BUCKET/ckpts/m", "dir")
    prefix = "cannot check 's3://YOUR-BUCKET/ckpts/m': "
    said = line.removeprefix(prefix).split(" … [cut, ")[0]
    assert line.startswith(prefix) and len(said) > 150
    assert said.split()[-1] in {"Could", "not", "resolve", "host:", "hostname;", "Details:", "and", "much", "more",
                                "When", "getting", "information", "for", "key", "in", "bucket", "AWS", "Error",
                                "during", "HeadObject", "operation:", "curlCode:", "6,", "NETWORK_CONNECTION",
                                "YOUR-BUCKET.s3.amazonaws.com;", "'ckpts/m'", "'YOUR-BUCKET':"}


def test_bounded_keeps_short_reasons_as_they_are():
    assert bounded("missing: audio file not found: s3://b/k.wav") == "missing: audio file not found: s3://b/k.wav"


def test_class_defaults_by_stage_and_given_class_wins():
    assert class_of("decode") == "input" and class_of("model") == "model" and class_of("judge") == "judge"
    assert class_of("pipeline") == "transient"
    assert class_of("judge", "transient") == "transient"
    assert class_of("judge", "nonsense") == "judge"
    assert class_of("score") == "output"  # a score-stage failure is the answer's: no rule can read it
    assert set(CLASSES) == {"transient", "input", "incomplete", "model", "judge", "output"}


def test_schemas_carry_the_class():
    for schema in (REQUEST, JUDGMENT, ERRORS):
        assert "error_class" in schema.names


def test_fail_bounds_and_classes_a_row():
    row = _fail({}, "model", RuntimeError("x\n" * 5000))
    assert row["error_class"] == "model" and "\n" not in row["error"] and len(row["error"]) <= MAX_REASON_CHARS


def test_judge_errors_keep_the_class_the_judge_gave():
    from evalcore.judges.base import JudgeBase

    class Flaky(JudgeBase):  # a judge of the protocol (evalcore.judges.base.Judge)
        def judge(self, texts, options, tasks=None, questions=None):
            return [{"error": "connection error", "error_class": "transient"} for _ in texts]

    from evalcore.pipeline import stages

    stages._judge.cache_clear()
    orig = stages._judge
    stages._judge = lambda kind, params: Flaky()  # type: ignore[assignment]
    try:
        rows = [{f.name: None for f in REQUEST} | {"request_id": "r", "protocol": "mcq", "text": "A",
                                                     "options": ["a", "b"], "model": "m", "condition": "correct",
                                                     "variant": "v", "option_order": 0, "dataset": "d",
                                                     "item_id": "i"}]
        from evalcore.pipeline.stages import JUDGED

        out = judge_batch(pa.Table.from_pylist(rows, schema=pa.schema([*REQUEST, pa.field("text", pa.string())])),
                          {"mcq": ("flaky", "{}")}).to_pylist()
    finally:
        stages._judge = orig
    assert out[0]["error_class"] == "transient" and out[0]["error_stage"] == "judge"
    assert set(JUDGED.names) >= {"error_class"}


def test_http_statuses_and_bodies_decide_the_class() -> None:
    from evalcore.core.errors import http_class, names_response_format

    llama = "1 validation error: {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), " \
            "'msg': \"Input should be 'text' or 'json_object'\"}"
    assert http_class(500, llama) == "input" and names_response_format(llama)
    assert http_class(500, "The server had an error") == "transient"
    assert http_class(503, "overloaded") == "transient" and http_class(429, "slow down") == "transient"
    assert http_class(408, "") == "transient" and http_class(400, "bad request") == "input"
    assert http_class(404, "model not found") == "input"
    assert not names_response_format("15 validation errors: ... 'input_audio' ... Field required")


def test_exceptions_that_tell_their_class() -> None:
    import ray.exceptions

    from evalcore.core.errors import exception_class

    assert exception_class(ConnectionResetError("reset")) == "transient"
    assert exception_class(TimeoutError()) == "transient"
    assert exception_class(ray.exceptions.RayActorError()) == "transient"  # a worker or actor died
    assert exception_class(ValueError("bad")) is None  # the stage decides
    err = RuntimeError("endpoint: HTTP 400")
    err.error_class = "input"  # type: ignore[attr-defined]
    assert exception_class(err) == "input"
    assert _fail({}, "model", ray.exceptions.RayActorError())["error_class"] == "transient"


def test_bounded_masks_keys() -> None:
    r = bounded("401: Incorrect API key provided: sk-proj-abcdefghijklmnop; header Bearer sk-xyz123456789")
    assert "abcdefghijklmnop" not in r and "xyz123456789" not in r and "sk-***" in r
