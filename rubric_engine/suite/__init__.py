"""The eval suite (``rubric-eval.yaml``) and ``rubric-eval ci``: the release checklist.

:mod:`.model` the file's models and tier defaults, :mod:`.load` reading it (``${VAR}``,
``.env``), :mod:`.checklist` the release checklist's lines (pure), :mod:`.run` the run
(scores, gates, records).
"""

from rubric_engine.suite.load import SUITE_FILE, SuiteError, load_suite
from rubric_engine.suite.model import EvalSuite, suite_json_schema

__all__ = ["SUITE_FILE", "EvalSuite", "SuiteError", "load_suite", "suite_json_schema"]
