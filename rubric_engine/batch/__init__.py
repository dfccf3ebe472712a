"""Batch mode: the judge's requests through a provider's batch API, or as files."""
