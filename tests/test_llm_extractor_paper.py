"""The LLM extractor's paper post-processing (variants → canonical labels before the vocabulary check), its
genre tree / node modes and binary-choice rows, over real HTTP against tests/llm_server.py (the 'model'
echoes the answer text, so each test writes what the extractor LLM returned)."""

from __future__ import annotations

import json
import re

import pytest

from evalcore.judges.llm_judges import LLMExtractorJudge
from llm_server import LLMServer, install_test_key
from test_llm_judges import echo, params

install_test_key()


def _vocabulary(srv: LLMServer, i: int) -> list[str]:
    user = json.loads(srv.requests[i].body)["messages"][1]["content"]
    return re.search(r"Vocabulary \(canonical labels\): (.*)\n", user).group(1).split(", ")


def test_instrument_variants_map_to_canonical_labels_as_the_paper_does(tmp_path) -> None:
    said = ["Grand piano, double bass, French horn", "contrabass, kazoo, Acoustic Grand Piano", "Piano"]
    with LLMServer(answer=echo) as srv:
        paper = LLMExtractorJudge(vocabulary="musicnet_instrument", **params(srv, tmp_path))
        raw = LLMExtractorJudge(vocabulary="musicnet_instrument", canonicalize="none", **params(srv, tmp_path))
        assert paper.judge(said, [None] * 3) == [{"extracted": ["piano", "bass", "horn"], "dropped": 0},
                                                 {"extracted": ["bass", "piano"], "dropped": 1},
                                                 {"extracted": ["piano"], "dropped": 0}]
        assert raw.judge(said, [None] * 3)[0] == {"extracted": [], "dropped": 3}  # dropped without post-processing


def test_genres_are_not_normalised_unless_asked(tmp_path) -> None:
    with LLMServer(answer=echo) as srv:
        paper = LLMExtractorJudge(vocabulary="genre", **params(srv, tmp_path))
        assert paper.judge(["Rock, hip hop, Pop"], [None]) == [{"extracted": ["rock", "pop"], "dropped": 1}]
        lexicon = LLMExtractorJudge(vocabulary="genre", canonicalize="lexicon", **params(srv, tmp_path))
        assert lexicon.judge(["Rock, hip hop, Pop"], [None]) == [{"extracted": ["rock", "hip-hop", "pop"],
                                                                  "dropped": 0}]
    with pytest.raises(ValueError, match="canonicalize"):
        LLMExtractorJudge(vocabulary="genre", canonicalize="all", **params(srv, tmp_path))


def test_genre_tree_and_node_modes(tmp_path) -> None:
    tree = tmp_path / "tree.json"
    tree.write_text(json.dumps({"Techno": "Electronic", "House": "Electronic", "Punk": "Rock"}))
    with LLMServer(answer=echo) as srv:
        judge = LLMExtractorJudge(vocabulary="genre", tree=str(tree), **params(srv, tmp_path))
        out = judge.judge(["Techno, house", "Techno, house", "Techno, punk"], [None] * 3,
                          tasks=["genre-tree", "genre-node", "genre"])
        assert out[0] == {"extracted": ["electronic"], "dropped": 0}  # same tree: credited at the top level
        assert out[1] == {"extracted": ["techno", "house"], "dropped": 0}  # same node: the genres themselves
        assert out[2] == {"extracted": [], "dropped": 2}  # top-level task: the 16 top-level genres only
        shown = [_vocabulary(srv, i) for i in range(len(srv.requests))]  # requests run concurrently: any order
        # the tree and node rows show the same widened vocabulary, so their identical requests are sent once
        assert sorted("techno" in v for v in shown) == [False, True]


def test_binary_choice_rows_are_extracted_over_their_two_options(tmp_path) -> None:
    with LLMServer(answer=echo) as srv:
        judge = LLMExtractorJudge(vocabulary="auto", **params(srv, tmp_path))
        out = judge.judge(["rock", "rock, pop", "jazz"], [["rock", "pop"]] * 3, tasks=["genre-binary"] * 3)
        assert out == [{"extracted": ["rock"], "dropped": 0, "parsed_index": 0},
                       {"extracted": ["rock", "pop"], "dropped": 0, "parsed_index": -1},
                       {"extracted": [], "dropped": 1, "parsed_index": -1}]
        assert _vocabulary(srv, 0) == ["rock", "pop"]
