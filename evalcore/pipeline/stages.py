"""The per-batch stages that run on Ray workers: decode, model, judge.

Each stage takes and returns an Arrow table. A row that already carries an error passes
through untouched; a row that fails in a stage gets ``error`` and ``error_stage`` set and
goes on, so every request reaches the end of the pipeline exactly once per chunk.
"""

from __future__ import annotations

import json
import time
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa

from evalcore.conditions.base import condition
from evalcore.core import audio, storage
from evalcore.core.errors import OUTPUT, bounded, class_of, exception_class
from evalcore.core.guard import judged, not_utf8
from evalcore.judges.base import JUDGMENT_FIELDS, Judge, build_judge
from evalcore.models.base import MODELS, AudioPrompt
from evalcore.core.schema import JUDGMENT, REQUEST, RESPONSE

AUDIO_FIELD = pa.field("audio", pa.large_list(pa.float32()))
DECODED = pa.schema([*RESPONSE, AUDIO_FIELD])
#: the decode stage's ``audio``: each distinct clip once per block (a dictionary of clips; each row its index), so
#: that the 18 requests of a MusicQA clip carry 640 KB of audio between them, not each (see :func:`decode_batch`)
SHARED_AUDIO_FIELD = pa.field("audio", pa.dictionary(pa.int32(), pa.large_list(pa.float32())))
JUDGED = pa.schema([*RESPONSE, *(f for f in JUDGMENT if f.name not in RESPONSE.names)])


def _table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema=schema)


def _fail(row: dict, stage: str, exc: BaseException | str, error_class: str | None = None) -> dict:
    """Mark ``row`` as an error of ``stage``: bounded reason, failure class (given, else the stage's)."""
    row["error"] = bounded(exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}")
    row["error_stage"] = stage
    row["error_class"] = class_of(stage, error_class or (exception_class(exc) if isinstance(exc, BaseException)
                                                         else None))
    return row


# --------------------------------------------------------------------------- decode


def decode_batch(batch: pa.Table, sample_rate: int, window_s: float | None, long_audio: str = "chunk",
                 uses_audio: bool = True) -> pa.Table:
    """The decode stage (a Ray task per block): one output row per chunk of each request
    (``uses_audio`` False: one row per request, no audio read; see :class:`Decoder`). Requests that hear the same
    sound (one clip's questions; a random partner's clip and the partner's own; the same chunk) share it: the
    ``audio`` column is a dictionary holding each distinct sound once (:data:`SHARED_AUDIO_FIELD`), decoded once."""
    decoder = Decoder(sample_rate, window_s, long_audio, uses_audio)
    out: list[dict] = []
    cache: dict[tuple, np.ndarray] = {}  # requests sharing a clip in this block decode it once
    for row in batch.to_pylist():
        out.extend(decoder.one(row, cache))
    return shared_audio_table(out)


def sound_key(row: dict) -> tuple | None:
    """What makes two requests (or decoded rows) hear the same samples: the excerpt played, the condition's variant
    of it, the chunk; None for a condition that plays nothing."""
    cond = condition(row["condition"])
    if not cond.hears:
        return None
    return (row.get("audio_uri"), row.get("excerpt_start"), row.get("excerpt_end"), cond.clip_variant(row.get("seed")),
            row.get("chunk_index"))


def shared_audio_table(rows: list[dict]) -> pa.Table:
    """``rows`` (decoded, each with its ``audio`` array or None) as a table of :data:`DECODED`'s columns whose
    ``audio`` holds each distinct sound once (:data:`SHARED_AUDIO_FIELD`)."""
    index: list[int | None] = []
    sounds: list[np.ndarray] = []
    seen: dict[tuple, int] = {}
    for r in rows:
        x = r.get("audio")  # the table takes RESPONSE's columns: the arrays stay out of it
        if x is None:
            index.append(None)
            continue
        key = sound_key(r)
        if key not in seen:
            seen[key] = len(sounds)
            sounds.append(np.asarray(x, dtype=np.float32))
        index.append(seen[key])
    offsets = np.zeros(len(sounds) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in sounds], out=offsets[1:])
    values = np.concatenate(sounds) if sounds else np.zeros(0, dtype=np.float32)
    clips = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values, type=pa.float32()))
    audio = pa.DictionaryArray.from_arrays(pa.array(index, type=pa.int32()), clips)
    return _table(rows, RESPONSE).append_column(SHARED_AUDIO_FIELD, audio)


def audio_arrays(column: pa.ChunkedArray | pa.Array) -> list[np.ndarray | None]:
    """Each row's audio (read-only float32, None where it has none) of an ``audio`` column: shared
    (:data:`SHARED_AUDIO_FIELD`: the rows of one sound get views of one array) or a list per row
    (:data:`AUDIO_FIELD`)."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    out: list[np.ndarray | None] = []
    for chunk in chunks:
        if pa.types.is_dictionary(chunk.type):
            clips = chunk.dictionary
            values = clips.values.to_numpy(zero_copy_only=False)
            offsets = clips.offsets.to_numpy()
            views = [values[offsets[k]:offsets[k + 1]] for k in range(len(clips))]
            out.extend(None if k is None else views[k] for k in chunk.indices.to_pylist())
        else:
            out.extend(None if not a.is_valid else a.values.to_numpy(zero_copy_only=False) for a in chunk)
    return out


class Decoder:
    """Fetch → decode → mono → excerpt → resample → chunk, for one model's sample rate and window.

    For a model that ignores audio (``uses_audio`` False, :attr:`MusicLM.uses_audio`) nothing is
    fetched or decoded: every request passes with ``audio`` None, ``audio_seconds`` 0 and one
    chunk, whatever its condition, and a missing or corrupt audio file is not an error."""

    def __init__(self, sample_rate: int, window_s: float | None, long_audio: str = "chunk",
                 uses_audio: bool = True) -> None:
        self.sample_rate = sample_rate
        self.window_s = window_s
        self.long_audio = long_audio
        self.uses_audio = uses_audio

    def _load(self, row: dict, cache: dict) -> np.ndarray:
        key = (row["audio_uri"], row["excerpt_start"], row["excerpt_end"])
        if key not in cache:
            cache[key] = audio.load(row["audio_uri"], self.sample_rate, row["excerpt_start"], row["excerpt_end"])
        return cache[key]

    def one(self, row: dict, cache: dict) -> list[dict]:
        row.update(chunk_index=0, n_chunks=1, audio=None, decode_s=0.0)
        if row["error"] is not None:
            return [row]
        t0 = time.perf_counter()
        cond = condition(row["condition"])
        try:
            if not cond.hears or not self.uses_audio:
                row["audio_seconds"] = 0.0
                return [row]
            x = cond.audio(self._load(row, cache), self.sample_rate, row.get("seed"))
            pieces = audio.chunk(x, self.sample_rate, self.window_s)
            if self.long_audio == "truncate":
                pieces = pieces[:1]
        except audio.AudioError as e:  # input, or transient (a read that timed out, an unreachable store)
            return [_fail(row, "decode", f"{e.reason}: {e}", e.error_class)]
        except Exception as e:  # noqa: BLE001 - any failure of one file is that row's error
            return [_fail(row, "decode", e)]
        dt = (time.perf_counter() - t0) / len(pieces)
        return [
            {**row, "chunk_index": i, "n_chunks": len(pieces), "audio": p,
             "audio_seconds": len(p) / self.sample_rate, "decode_s": dt}
            for i, p in enumerate(pieces)
        ]


# --------------------------------------------------------------------------- model


class ModelRunner:
    """A Ray Data actor holding one loaded Music LM; generates one text per chunk row."""

    @storage.scoped(lambda self, kind, params, audio_spec, s3=None, batch_size=None:
                    storage.StorageSettings.of(s3))
    def __init__(self, kind: str, params: dict[str, Any], audio_spec: tuple[int, float | None],
                 s3: dict | None = None, batch_size: int | None = None) -> None:
        #: the run's S3 options (never keys), e.g. for an s3:// checkpoint, while it loads and generates
        self.storage = storage.StorageSettings.of(s3)
        #: rows per call of the model's ``generate`` (``resources.batch_size``); None: the whole table Ray hands it
        self.batch_size = batch_size
        self.model = MODELS.build(kind, **params)
        # the decode stage prepared audio for the rate and window read from the model's class and params
        if (self.model.sample_rate, self.model.max_audio_seconds) != tuple(audio_spec):
            raise ValueError(f"model {kind!r} declares sample rate {self.model.sample_rate} and window "
                             f"{self.model.max_audio_seconds} s, but its class/params say {audio_spec}; "
                             "declare them as class attributes or pass them in params")
        self.info = json.dumps(self.model.info(), sort_keys=True, default=str)

    @storage.scoped(lambda self, *_, **__: self.storage)
    def __call__(self, batch: pa.Table) -> pa.Table:
        """One block of decoded rows (the run hands the actor whole blocks: their ``audio`` is shared within the
        block, :func:`decode_batch`), generated in batches of :attr:`batch_size` rows."""
        audios = audio_arrays(batch.column("audio"))
        rows = batch.drop_columns(["audio"]).to_pylist()
        todo = [i for i, r in enumerate(rows) if r["error"] is None]
        inputs = [AudioPrompt(audios[i], self.model.sample_rate, rows[i]["prompt"] or "", rows[i].get("reference"))
                  for i in todo]
        step = self.batch_size or max(1, len(todo))
        texts: list[Any] = []
        for k in range(0, len(todo), step):
            texts.extend(self._generate(inputs[k:k + step], [rows[i] for i in todo[k:k + step]]))
        for i, text in zip(todo, texts):
            rows[i]["model_info"] = self.info
            if isinstance(text, BaseException):
                _fail(rows[i], "model", text)
            elif (why := not_utf8(text)) is not None:  # no table holds it: the answer, not the batch, fails
                _fail(rows[i], "model", why, OUTPUT)
            else:
                rows[i]["text"] = text
        return _table(rows, RESPONSE)

    def _generate(self, inputs: list[AudioPrompt], rows: list[dict]) -> list[Any]:
        """Generate for the batch; if the batch fails, retry one by one so only bad inputs error."""
        if not inputs:
            return []
        t0 = time.perf_counter()
        try:
            texts: list[Any] = list(self.model.generate(inputs))
            if len(texts) != len(inputs):
                raise RuntimeError(f"model returned {len(texts)} texts for {len(inputs)} inputs")
            dt = (time.perf_counter() - t0) / len(inputs)
            for r in rows:
                r["generate_s"] = dt
        except Exception:  # noqa: BLE001
            texts = []
            for inp, r in zip(inputs, rows):
                t1 = time.perf_counter()
                try:
                    out = self.model.generate([inp])
                    texts.append(out[0] if len(out) == 1 else RuntimeError("model returned no text"))
                except Exception as e:  # noqa: BLE001
                    texts.append(e)
                r["generate_s"] = time.perf_counter() - t1
        return [t if isinstance(t, BaseException) or isinstance(t, str) else TypeError(
            f"model returned {type(t).__name__}, not text") for t in texts]


# --------------------------------------------------------------------------- judge


@lru_cache(maxsize=16)
def _judge(kind: str, params_json: str) -> Judge:
    return build_judge(kind, **json.loads(params_json))


def judge_batch(batch: pa.Table, judges: dict[str, tuple[str, str]]) -> pa.Table:
    """Apply each protocol's judge (protocol → (kind, params JSON)) to the responses in the batch."""
    rows = batch.to_pylist()
    for proto, (kind, params) in judges.items():
        judge = _judge(kind, params)
        idx = [i for i, r in enumerate(rows) if r["protocol"] == proto and r["error"] is None]
        if not idx:
            continue
        label = f"{kind}@{judge.version}"
        # what the judge declares it reads besides texts and options: each row's task, each request's question
        def call(ix: list[int], judge: Judge = judge) -> list[dict]:
            return judge.judge([rows[i]["text"] for i in ix], [rows[i]["options"] for i in ix],
                               tasks=[rows[i]["task"] for i in ix] if judge.uses_tasks else None,
                               questions=[rows[i].get("question") for i in ix] if judge.uses_questions else None)

        # the scoring guard (evalcore/core/guard.py): a judge that raises on the batch judges each answer alone; an
        # answer it still raises on is that row's error (class output, or transient where the exception says so)
        results = judged(label, call, idx)
        for i, res in zip(idx, results):
            rows[i]["judge"] = label
            if res.get("error"):
                _fail(rows[i], "judge", res["error"], res.get("error_class"))
                continue
            for k in JUDGMENT_FIELDS:
                if k in res:
                    rows[i][k] = res[k]  # type: ignore[literal-required]
    return _table(rows, JUDGED)


def requests_table(rows: list[dict]) -> pa.Table:
    return _table(rows, REQUEST)


def response_table(rows: list[dict]) -> pa.Table:
    return _table(rows, RESPONSE)
