"""The floor every other package stands on: the registry class, component params, the table schemas, error rows
and classes, object storage (local and ``s3://``, conditional writes), audio decoding, seeds, deadlines, package
checks, the scoring guard, the item table, embedders, the trackers' config block, the suite fingerprint, the
nightly's outcome types, the local Ray cluster and every read of Ray's private API. It imports nothing of evalcore
above it (docs/layers.md)."""
