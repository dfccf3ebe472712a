from rubric_engine.cli._app import app  # noqa: F401  (trend lands next)
