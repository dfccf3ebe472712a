"""A panel of judges: ``score --judge MODEL`` given more than once (docs/panels.md).

Every judged row is asked by each judge of the panel (``--samples K`` times each); each
answer is stored as a sample of its judge and the row's result is the aggregate of them all,
by the rules of docs/stability.md. This module reads the ``--judge`` values and checks a
panel's options; :mod:`rubric_engine.engine.sampling` asks the judges. Light on imports:
``--help`` loads it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rubric_engine.errors import ConfigurationError

if TYPE_CHECKING:
    from rubric_engine.engine.options import ScoreOptions

__all__ = ["MAX_JUDGES", "check_panel", "judges_from_flags", "panel_of", "resolved_judge"]

#: the most judges a panel takes (each one multiplies the calls of every row)
MAX_JUDGES = 5
#: ``--judge`` values that are not a model
_KINDS = ("llm", "none")


def judges_from_flags(
    values: Sequence[str], model: str, default_model: str
) -> tuple[str, str, tuple[str, ...]]:
    """The judge kind, the model and the panel that ``--judge`` (given ``values`` times, in
    order) and ``--model`` make.

    ``--judge llm`` / ``--judge none`` (or nothing): as before panels. ``--judge MODEL`` once:
    that model, the same as ``--model MODEL``. ``--judge MODEL`` more than once: a panel of
    those models, in order (judge 1 is the first).

    Raises:
        ConfigurationError: ``llm``/``none`` mixed with models or given twice; ``--model``
            given besides ``--judge MODEL``; more than :data:`MAX_JUDGES`. A judge named twice
            is :func:`check_panel`'s to refuse.
    """
    if not values:
        return "llm", model, ()
    kinds = [v for v in values if v in _KINDS]
    if kinds:
        if len(values) > 1:
            raise ConfigurationError(
                f"--judge {kinds[0]} cannot be combined with another --judge; give --judge llm "
                "or --judge none alone, or name each judge's model (--judge MODEL --judge "
                "MODEL) for a panel"
            )
        return values[0], model, ()
    if model != default_model and model != values[0]:
        raise ConfigurationError(
            f"--model {model} and --judge {values[0]} both name the judge; give the judge's "
            "model once: --judge MODEL (more than once for a panel) or --model MODEL"
        )
    if len(values) > MAX_JUDGES:
        raise ConfigurationError(
            f"--judge is given {len(values)} times; a panel takes at most {MAX_JUDGES} judges"
        )
    return "llm", values[0], tuple(values) if len(values) > 1 else ()


def check_panel(options: ScoreOptions) -> None:
    """A panel's options (``options.panel``); nothing to check without one.

    Raises:
        ConfigurationError: a panel of one judge or more than :data:`MAX_JUDGES`, a provider
            part not in lower case, a judge named twice (as :func:`resolved_judge` resolves
            it), a model that is not the panel's first judge, ``--judge none``, and
            what panels do not support (``--mode batch``: a batch serves one model;
            ``--samples-when unsure``).
    """
    panel = tuple(options.panel)
    if not panel:
        return
    if not 2 <= len(panel) <= MAX_JUDGES:
        raise ConfigurationError(
            f"a panel has 2 to {MAX_JUDGES} judges, not {len(panel)}; for one judge give "
            "--model MODEL (or --judge MODEL once)"
        )
    for model in panel:
        provider, _, name = model.partition("/")
        if name and provider != provider.lower():
            meant = f"{provider.lower()}/{name}"
            also = (
                f", which is judge {panel.index(meant) + 1} already (a panel's judges must "
                "differ; to ask one judge several times use --samples K)"
                if meant in panel
                else ""
            )
            raise ConfigurationError(
                f"--judge {model}: no provider is named {provider!r} (litellm's provider names "
                f"are lower case): write --judge {meant}{also}"
            )
    same: dict[str, list[str]] = {}
    for model in panel:
        same.setdefault(resolved_judge(model, options.api_base), []).append(model)
    twice = {judge: given for judge, given in same.items() if len(given) > 1}
    if twice:
        named = ", ".join(
            judge if set(given) == {judge} else f"{judge} (as {', '.join(dict.fromkeys(given))})"
            for judge, given in sorted(twice.items())
        )
        raise ConfigurationError(
            f"--judge {named} is given more than once; a panel's judges must differ "
            "(to ask one judge several times use --samples K)"
        )
    if options.judge != "llm":
        raise ConfigurationError("--judge none calls no judge; a panel needs --judge MODEL")
    if options.model != panel[0]:
        raise ConfigurationError(
            f"the panel's first judge ({panel[0]}) is the task's model, and model is "
            f"{options.model!r}; set model to the panel's first judge"
        )
    if options.mode == "batch":
        raise ConfigurationError(
            "a panel (--judge given more than once) is not supported with --mode batch: a "
            "batch serves one model, so each judge would need batches of its own; use --mode "
            "live or record, or score each judge with --mode batch as its own task "
            "(--samples K works in batch mode; docs/stability.md)"
        )
    if options.samples_when != "always":
        raise ConfigurationError(
            "--samples-when unsure is not supported with a panel yet: every judge is asked "
            "--samples K times; drop --samples-when"
        )


def resolved_judge(model: str, api_base: str | None) -> str:
    """``model`` as ``provider/name``, the provider a bare name is sent to: ``openai/`` with
    ``--api-base`` (:func:`~rubric_engine.engine.options.effective_model`), else the provider
    litellm's model table lists for it (as litellm resolves ``gpt-4o-mini`` to ``openai``);
    a bare name the table does not know is kept as given."""
    from rubric_engine.judge.model_table import model_entry

    if "/" in model:
        return model
    if api_base:
        return f"openai/{model}"
    entry = model_entry(model)
    provider = entry.get("litellm_provider") if entry else None
    return f"{provider}/{model}" if isinstance(provider, str) and provider else model


def panel_of(extra: Mapping[str, Any]) -> tuple[str, ...]:
    """The judges' models a task's panel recorded (``extra.sampling.judges``); empty for a
    task of one judge."""
    sampling = extra.get("sampling")
    if not isinstance(sampling, dict):
        return ()
    return tuple(str(m) for m in sampling.get("judges") or ())
