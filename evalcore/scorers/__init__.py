"""The scorers of the protocol kinds: one :class:`~evalcore.kinds.scorer.Scorer` per kind (free-form, factual,
multiple choice, true/false, binary choice, mir), each named by its kind (:attr:`evalcore.kinds.base.ProtocolKind.scorer`)
and built by the scoring stage (:func:`evalcore.scoring.requests.build_scorer`), with the helpers each kind's figures
need. They score judged requests
and declare their aggregates (:class:`evalcore.stats.aggregate.Aggregate`); the free-form scorer computes the
registered free-form metrics (:mod:`evalcore.textmetrics`), the mir scorer CMI-Bench's released rules
(:mod:`evalcore.mir_rules`)."""
