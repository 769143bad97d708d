"""Protocols turn items into model requests: conditions, prompt variants, option orders."""

from evalcore.protocols.requests import expand_requests  # noqa: F401
