"""Test helpers: ``assert_rubric``, the pytest plugin, loopback judge stubs, PostgreSQL."""

from rubric_engine.testing.assertions import assert_rubric

__all__ = ["assert_rubric"]
