"""Test helpers: ``assert_rubric`` (gate thresholds as an assertion; the pytest plugin's
fixture) and a loopback OpenAI-compatible stub (:mod:`.openai_stub`)."""

from rubric_engine.testing.assertions import assert_rubric

__all__ = ["assert_rubric"]
