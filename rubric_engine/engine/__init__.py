"""The scoring engine: options, preflight, task, plan, orchestrator, pipeline, workers.

Everything that can be checked before the first judge call is (rubric, prompt, every input
row, options, the cassette folder, credentials, the store and the report folder), so a mistake
costs nothing. The CLI is a thin shell over :func:`score`; tests and notebooks call it
directly (notebooks and async apps: ``await score_async(options)``).

Modules: :mod:`.options` (the options, their defaults and checks), :mod:`.preflight` (checks
that read files or the environment), :mod:`.task` (the stored task record), :mod:`.plan`
(everything a new or resumed run needs, checked) and :mod:`.run` (the one orchestrator);
:mod:`.evaluate` returns a run's row results in memory (the base of the plug-ins in
:mod:`rubric_engine.integrations`).
Names are imported on first use, so ``rubric-eval --help`` (which reads the option defaults)
stays fast.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rubric_engine.engine.evaluate import Evaluation, evaluate, evaluate_async
    from rubric_engine.engine.options import (
        DEFAULT_MODEL,
        DEFAULTS,
        JUDGES,
        MODES,
        JudgeKind,
        Mode,
        ScoreOptions,
        check_options,
        effective_model,
    )
    from rubric_engine.engine.run import (
        CredentialsRefusedError,
        JudgeUnavailableError,
        RubricNotDeliveredError,
        ScoreResult,
        score,
        score_async,
    )
    from rubric_engine.engine.task import (
        ANALYSIS_VERSION,
        RETRIED_ON_RESUME,
        report_command,
        resume_command,
        rules_only_rubric,
        task_lock,
    )

_WHERE = {
    "DEFAULT_MODEL": "options",
    "DEFAULTS": "options",
    "JUDGES": "options",
    "MODES": "options",
    "JudgeKind": "options",
    "Mode": "options",
    "ScoreOptions": "options",
    "check_options": "options",
    "effective_model": "options",
    "Evaluation": "evaluate",
    "evaluate": "evaluate",
    "evaluate_async": "evaluate",
    "CredentialsRefusedError": "run",
    "JudgeUnavailableError": "run",
    "RubricNotDeliveredError": "run",
    "ScoreResult": "run",
    "score": "run",
    "score_async": "run",
    "ANALYSIS_VERSION": "task",
    "RETRIED_ON_RESUME": "task",
    "report_command": "task",
    "resume_command": "task",
    "rules_only_rubric": "task",
    "task_lock": "task",
}

__all__ = [
    "ANALYSIS_VERSION",
    "DEFAULTS",
    "DEFAULT_MODEL",
    "JUDGES",
    "MODES",
    "RETRIED_ON_RESUME",
    "CredentialsRefusedError",
    "Evaluation",
    "JudgeKind",
    "JudgeUnavailableError",
    "Mode",
    "RubricNotDeliveredError",
    "ScoreOptions",
    "ScoreResult",
    "check_options",
    "effective_model",
    "evaluate",
    "evaluate_async",
    "report_command",
    "resume_command",
    "rules_only_rubric",
    "score",
    "score_async",
    "task_lock",
]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(import_module(f"rubric_engine.engine.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'rubric_engine.engine' has no attribute {name!r}")
