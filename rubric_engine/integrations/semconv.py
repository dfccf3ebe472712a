"""The OpenTelemetry names rubric-eval writes, in one place.

OTel GenAI semantic conventions define an evaluation result as an **event** (a log record with
an event name) parented to the span it evaluates. ``opentelemetry-semantic-conventions`` has
the attribute names only as incubating constants (marked as moving) and no constant for the
event name, so both are spelled here, once. Our own additions use the ``rubric_eval.``
namespace, as the conventions ask of vendor attributes.
"""

from __future__ import annotations

#: the event: one evaluation of one GenAI operation (span)
EVALUATION_EVENT = "gen_ai.evaluation.result"

#: what was evaluated for (the rubric key, or a requirement id for per-requirement events)
EVALUATION_NAME = "gen_ai.evaluation.name"
#: the score as a number (the final score on the pack's scale; 1/0 for a requirement)
SCORE_VALUE = "gen_ai.evaluation.score.value"
#: the score as a label: the row's outcome (PASS, FAIL, RED_FLAG), a requirement's status
SCORE_LABEL = "gen_ai.evaluation.score.label"
#: the judge's explanation
EXPLANATION = "gen_ai.evaluation.explanation"
#: the evaluated response, when the input span carried one
RESPONSE_ID = "gen_ai.response.id"
#: why there is no score (a JUDGE_ERROR row: the error kind)
ERROR_TYPE = "error.type"

#: ``KEY@VERSION`` of the rubric the score was given under
RUBRIC = "rubric_eval.rubric"
#: the rubric snapshot's content hash
RUBRIC_HASH = "rubric_eval.rubric_hash"
#: the task and row the result is stored as
TASK_ID = "rubric_eval.task_id"
ROW_ID = "rubric_eval.row_id"
#: the intent the judge chose
INTENT = "rubric_eval.intent"
#: the judge's score before caps
JUDGE_SCORE = "rubric_eval.judge_score"
#: red-flag types of the row (string array, the pack's order)
RED_FLAGS = "rubric_eval.red_flags"
#: requirement ids VIOLATED or PARTIAL (string array, the referenceBasis order)
UNMET_REQUIREMENTS = "rubric_eval.unmet_requirement_ids"
#: per-requirement events: the requirement and the row-level evaluation it belongs to
REQUIREMENT_ID = "rubric_eval.requirement_id"
REQUIREMENT_SOURCE = "rubric_eval.requirement_source"
