"""Audio conditions: what a model is given in place of an item's own clip (one module per condition, ``CONDITIONS``)."""
