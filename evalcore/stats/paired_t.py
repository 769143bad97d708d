"""The paired t-test of per-item differences: the test the nightly and ``evalcore compare`` name for a comparison
that is not an accuracy with 0/1 outcomes in both runs (those get McNemar's exact test,
:mod:`evalcore.stats.mcnemar`)."""

from __future__ import annotations

import numpy as np

#: the ``test`` named in the comparison tables for this test
PAIRED_T = "paired_t"


def paired_p(d: np.ndarray) -> float:
    """Two-sided paired t-test p-value of mean(d) = 0 (0 / 1 when every difference is the same)."""
    from scipy import stats

    if len(d) < 2 or np.allclose(d, d[0]):
        return 1.0 if np.allclose(d, 0.0) else (0.0 if len(d) >= 2 else 1.0)
    return float(stats.ttest_1samp(d, 0.0).pvalue)
