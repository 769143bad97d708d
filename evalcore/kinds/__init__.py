"""Protocol kinds: one module per kind (``freeform``, ``factual``, ``mcq``, ``true_false``, ``binary_choice``, ``mir``),
each holding what the kind is — its items' fields, the config fields it takes, how its requests are asked, judged and
scored — registered in :data:`evalcore.kinds.base.KINDS`. The other packages ask a protocol's kind what it does
(:func:`evalcore.kinds.base.kind_of`), never compare its name."""
