"""Deterministic rule checks (pure): the check model, evaluation, evidence, text matching."""
