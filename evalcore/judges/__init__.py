"""Judges: turn response texts into judgments; importing this package registers them."""

from evalcore.judges import lexicon, llm_judges, mcq_muchomusic, mcq_rul, mcq_string, yes_no  # noqa: F401  (registration)
