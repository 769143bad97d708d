"""Statistics over per-item scores: aggregates with seeded bootstrap CIs (items or clips resampled) and paired
differences (:mod:`evalcore.stats.aggregate`, :mod:`evalcore.stats.bootstrap`), McNemar's exact test
(:mod:`evalcore.stats.mcnemar`), the paired t-test (:mod:`evalcore.stats.paired_t`) and Holm's correction
(:mod:`evalcore.stats.multiplicity`). A run's summary, the nightly's comparisons and ``evalcore compare`` compute
theirs here; of evalcore it imports only the schema and the seeds (``evalcore/core/schema.py``, ``evalcore/core/seeding.py``)."""
