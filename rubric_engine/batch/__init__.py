"""Batch mode (issue 15): the live judge's requests through a provider's batch API, or as
files for any runner (``batch export`` / ``batch import``). See ``docs/batch.md``."""
