"""The free-form metrics: the interface and its registry ``METRICS`` (:mod:`evalcore.textmetrics.freeform_metric`),
the metrics' part of the run config (:mod:`evalcore.textmetrics.metric_config`), the lexical engine
(:mod:`evalcore.textmetrics.text_profiles`), the values the stream stores (:mod:`evalcore.textmetrics.stream_values`)
and WordNet's provisioning (:mod:`evalcore.textmetrics.wordnet`). The metrics themselves, one module each, are
:mod:`evalcore.textmetrics.registered`, which ``METRICS`` loads on its first read: reading it imports no other
evalcore package's components (no scorer, no MIR rule)."""
