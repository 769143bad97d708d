"""The nightly benchmark of new checkpoints: discover → evaluate (ledger, leases) → compare → dashboard."""
