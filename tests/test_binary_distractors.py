"""Table 7's binary choice draws its distractor only from the genres of the dataset evaluated (FMA-small).

FMA's vocabulary has 16 top-level genres; FMA-small holds 8 of them. The 8 come from the factual paper's own
sentence (§4.3, asserted below to be in its text); the FMA README (github.com/mdeff/fma) describes fma_small as
"8,000 tracks of 30s, 8 balanced genres". A distractor outside them would pose a prompt the paper never posed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from evalcore.datasets.base import DatasetContext
from evalcore.datasets.fma import FMA
from evalcore.vocab import FMA_GENRES, normalize
from paper_text import flat, paper

SENTENCE = ("we use the FMA-Small subset of FMA, consisting of 8,000 thirty-second clips evenly distributed across "
            "eight top-level genres: hip-hop, pop, folk, experimental, rock, international, electronic, and "
            "instrumental (1,000 clips per genre)")

# FMA's genres.csv: the 16 top-level genres (parent 0) with their ids, titles as FMA prints them
TOP_LEVEL = {2: "International", 3: "Blues", 4: "Jazz", 5: "Classical", 8: "Old-Time / Historic", 9: "Country",
             10: "Pop", 12: "Rock", 13: "Easy Listening", 14: "Soul-RnB", 15: "Electronic", 17: "Folk", 20: "Spoken",
             21: "Hip-Hop", 38: "Experimental", 1235: "Instrumental"}


def _small_genres() -> list[str]:
    """The eight genres of FMA-small, read off the paper's sentence."""
    assert SENTENCE in flat(paper())
    listed = SENTENCE.split("top-level genres: ")[1].split(" (")[0]
    return [g.strip() for g in re.split(r",\s*(?:and\s+)?", listed)]


def _files(tmp_path: Path, small: list[str]) -> dict[str, str]:
    """tracks.csv with five FMA-small tracks per small genre plus medium/large tracks of the other eight
    genres (in FMA, not in FMA-small), and genres.csv with all 16 top-level genres."""
    ids = {title.lower(): gid for gid, title in TOP_LEVEL.items()}
    lines = [",album,artist,set,set,track,track,track,track", ",title,name,split,subset,genre_top,genres,genres_all,"
             "title", "track_id,,,,,,,,"]
    tid = 1
    for title in TOP_LEVEL.values():
        subset = "small" if title.lower() in small else "medium"
        for _ in range(5 if subset == "small" else 2):
            gid = ids[title.lower()]
            lines.append(f'{tid},A,B,training,{subset},"{title}",[{gid}],[{gid}],T{tid}')
            tid += 1
    (tmp_path / "tracks.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "genres.csv").write_text("genre_id,#tracks,parent,title,top_level\n" + "".join(
        f'{gid},1,0,"{title}",{gid}\n' for gid, title in TOP_LEVEL.items()))
    return {"tracks": str(tmp_path / "tracks.csv"), "genres": str(tmp_path / "genres.csv"), "audio_root": "/fma_small"}


def _binary(files: dict[str, str], tmp_path: Path, **kw) -> list[dict]:
    ds = FMA(**files, subset="small", formats=["binary_choice"], **kw)
    return list(ds.items(DatasetContext(name="fma-small", run_root=str(tmp_path / "run"), seed=0)))


def test_distractors_are_fma_small_genres(tmp_path: Path) -> None:
    small = [normalize(g, "genre") for g in _small_genres()]
    assert len(small) == 8 and set(small) < set(FMA_GENRES) and len(FMA_GENRES) == 16
    items = _binary(_files(tmp_path, small), tmp_path)
    assert len(items) == 40
    distractors = [json.loads(it["metadata"])["distractor"] for it in items]
    truths = {json.loads(it["metadata"])["truth"] for it in items}
    assert truths == set(small)
    assert set(distractors) <= set(small), sorted(set(distractors) - set(small))
    assert set(distractors) == set(small)  # every small genre is drawn: the pool is all eight, not fewer


def test_a_limited_run_asks_the_same_questions(tmp_path: Path) -> None:
    small = [normalize(g, "genre") for g in _small_genres()]
    files = _files(tmp_path, small)
    assert [it["options"] for it in _binary(files, tmp_path, limit=4, binary_order="coin")] == \
        [it["options"] for it in _binary(files, tmp_path, binary_order="coin")][:4]
