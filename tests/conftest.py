"""Shared test settings: hypothesis runs deterministic, with no deadline."""

from hypothesis import settings

settings.register_profile("perfmodel", derandomize=True, deadline=None, max_examples=60)
settings.load_profile("perfmodel")
