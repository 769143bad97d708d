"""A run's config and what is checked of it before any model runs: the config model (``config.py``, checking each
component's kind and params against the registries below it), the default judge fitted to the datasets' tasks
(``vocab_fit.py``) and the preflight (``preflight.py``: files, packages, keys, templates, vocabularies). It sits
above the components it checks and below the scoring stage and the run that read it (docs/layers.md)."""
