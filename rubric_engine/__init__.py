"""rubric-eval: versioned rubric packs and an LLM-judge engine."""

__version__ = "0.1.0"
