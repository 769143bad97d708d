"""Judges: turn response texts into judgments (:class:`evalcore.judges.base.Judge`); each registers with
``JUDGES`` (:mod:`evalcore.judges.base`), which loads this package's modules on first use."""
