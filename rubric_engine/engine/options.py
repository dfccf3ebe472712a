"""What ``rubric-eval score`` takes: :class:`ScoreOptions`, its defaults and its checks.

The defaults are declared here once; the CLI (:mod:`rubric_engine.cli.score_cmd`) reads them
from :data:`DEFAULTS` and checks nothing itself, so the library and the command line accept
and refuse the same values with the same messages. Light on imports: ``--help`` loads this.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

from rubric_engine import DEFAULT_STORE
from rubric_engine.batch.settings import BATCH_PROVIDERS, FALLBACKS, BatchSettings
from rubric_engine.engine.panel import check_panel
from rubric_engine.errors import ConfigurationError
from rubric_engine.store.location import StoreLocation

if TYPE_CHECKING:
    from rubric_engine.dialogue.model import DialogueRow
    from rubric_engine.dialogue.readers import InputFormat
    from rubric_engine.judge.retry import RetryPolicy

Mode = Literal["replay", "record", "live", "batch"]
MODES: tuple[str, ...] = get_args(Mode)
JudgeKind = Literal["llm", "none"]
JUDGES: tuple[str, ...] = get_args(JudgeKind)
DEFAULT_MODEL = "openai/gpt-4o-mini"
#: the smallest judge output budget worth asking for (a verdict is never shorter)
MIN_MAX_TOKENS = 16
#: the most asks of one row ``--samples`` takes
MAX_SAMPLES = 25
#: the shortest per-request timeout, seconds
MIN_TIMEOUT_S = 0.1
#: the most judge calls in flight: a provider's rate limit bounds a run long before this, and
#: each slot holds a worker and two queued rows (``--concurrency 1000000`` took 1.65 GB)
MAX_CONCURRENCY = 1024


def _default_retry() -> RetryPolicy:
    from rubric_engine.judge.retry import RetryPolicy

    return RetryPolicy()


@dataclass
class ScoreOptions:
    """Everything ``rubric-eval score`` takes. Units in names; the CLI's defaults are these.

    ``api_key_env`` names the variable holding the key; ``None`` lets litellm read the
    provider's usual one (``OPENAI_API_KEY`` for ``openai/…``).
    """

    inputs: Sequence[Path] = ()
    #: rows in memory instead of (or besides) ``inputs``: :class:`DialogueRow` values or
    #: mappings in any row shape a file may hold; checked like a file's rows. A task scored
    #: from rows in memory cannot be resumed (there is no file to read them again from).
    rows: Sequence[DialogueRow | Mapping[str, object]] | None = None
    #: a published ``KEY`` or ``KEY@N`` in ``store``, or a pack file (needs ``draft=True``);
    #: optional with ``judge="none"``
    rubric: str | Path = ""
    mode: Mode = "replay"
    cassettes: Path = Path("cassettes")
    model: str = DEFAULT_MODEL
    api_base: str | None = None
    api_key_env: str | None = None
    concurrency: int = 8
    #: a SQLite file, or a PostgreSQL store (:class:`~rubric_engine.store.PostgresUrl`)
    store: StoreLocation = DEFAULT_STORE
    out: Path | None = None
    input_format: InputFormat = "auto"
    #: the judge's prompt template (``prompts/<version>/``); ``None``: the engine's current
    #: one, :data:`rubric_engine.judge.prompt.DEFAULT_PROMPT` (named there only, and not loaded
    #: just to read this default)
    prompt_version: str | None = None
    max_reasks: int = 2
    temperature: float = 0.0
    max_tokens: int = 1024
    #: ``--samples K``: asks of each judged row, their aggregate the row's result
    #: (docs/stability.md); 1 asks once, exactly as before samples existed
    samples: int = 1
    #: ``--samples-when``: ``always`` (every judged row K times) or ``unsure`` (adaptive:
    #: more samples only where the first answers leave the outcome in doubt)
    samples_when: str = "always"
    #: a panel of judges (``--judge MODEL`` given more than once, docs/panels.md): their
    #: models in order, the first being ``model``; every judged row is asked by each; empty
    #: for one judge
    panel: Sequence[str] = ()
    #: sent to the provider as ``seed`` (where it supports one) and recorded with the task;
    #: ``None`` sends none
    seed: int | None = None
    timeout_s: float = 120.0
    retry: RetryPolicy = field(default_factory=_default_retry)
    #: seconds a refused connection to a self-hosted ``--api-base`` (loopback, a private
    #: network) is retried for: a server restarting loads its model for about a minute
    restart_wait_s: float = 60.0
    #: allow a pack file (a draft) for a trial run; the task and report are marked DRAFT
    draft: bool = False
    #: finish this stored task instead of starting one (inputs and rubric come from the task):
    #: its id, name or ``tag:TAG`` (the newest task carrying it)
    resume: str | None = None
    #: stop starting rows once this many provider calls (failed ones and re-asks included)
    max_calls: int | None = None
    #: stop starting rows once this much is spent, in USD (needs a model litellm has a price for)
    max_cost_usd: float | None = None
    #: ``none``: no judge call, no cassette, no key; rows are decided by rule checks alone
    judge: JudgeKind = "llm"
    #: a name to refer to the task by wherever a task id is taken (the newest task of the name)
    name: str | None = None
    #: tags to refer to the task by (``tag:TAG``: the newest task carrying it); no duplicates
    tags: Sequence[str] = ()
    #: provider-specific litellm options (``--judge-param KEY=VALUE``): sampling ones (``seed``,
    #: ``top_p`` …) join the request, the task's judge parameters and the cassette key;
    #: :data:`TRANSPORT_PARAMS` (``api_version``, ``extra_headers`` …) only reach the call
    judge_params: Mapping[str, object] = field(default_factory=dict)
    #: call the judge only on rows whose metadata meets this condition (``risk_level=high``);
    #: the others are decided by their rule checks alone (:mod:`.judge_when`)
    judge_when: str | None = None
    #: ``json``, ``schema`` or ``tools`` (rubric_engine.judge.output_modes); ``None``: the
    #: provider's default (``schema`` for ``hosted_vllm/``, else ``json``)
    output_mode: str | None = None
    #: send the rubric inside the first user message (servers whose template drops ``system``)
    system_as_user: bool = False
    #: mark the static rubric prefix cacheable where the provider needs explicit markers
    #: (:mod:`rubric_engine.judge.cache_markers`); a transport setting, not in cassette keys
    prompt_cache: bool = True
    #: the judge model's context length in tokens, for the pre-run size warning and the
    #: CONTEXT_EXCEEDED message; ``None``: litellm's model info, when it has one
    max_context: int | None = None
    #: ``--mode batch``: batch sizes, polling, live fallback, recording (docs/batch.md)
    batch: BatchSettings = field(default_factory=BatchSettings)
    #: how live calls reach an OpenAI-protocol provider: ``direct`` (one HTTP session, the
    #: requests litellm would send) or ``litellm``; ``None``: ``$RUBRIC_EVAL_TRANSPORT``, else
    #: ``direct`` (:mod:`rubric_engine.judge.transport`); never stored, results are the same
    transport: str | None = None


#: the defaults, for the CLI's option declarations
DEFAULTS = ScoreOptions()

#: judge parameters that say how to reach the provider, not what to sample: passed to the call
#: only, never stored or keyed (a header may hold a secret)
TRANSPORT_PARAMS = frozenset(
    {"api_version", "extra_headers", "headers", "organization", "api_type", "region_name",
     "vertex_project", "vertex_location", "aws_region_name"}
)  # fmt: skip
#: parameters the engine sets itself, with the option that sets each
_OWNED_PARAMS = {
    "model": "--model", "messages": "the rubric and the dialogue",
    "temperature": "--temperature", "max_tokens": "--max-tokens", "timeout": "--timeout",
    "api_base": "--api-base", "base_url": "--api-base", "api_key": "--api-key-env",
    "num_retries": "the engine's retry policy", "max_retries": "the engine's retry policy",
    "response_format": "the verdict schema", "tools": "the verdict schema",
    "tool_choice": "the verdict schema", "stream": "nothing (replies are read whole)",
}  # fmt: skip


def parse_judge_params(texts: Sequence[str]) -> dict[str, object]:
    """``KEY=VALUE`` texts; a VALUE that is JSON (``7``, ``true``, ``{"X-Team": "qa"}``) is
    read as JSON, anything else is text (``api_version=2024-10-21``).

    Raises:
        ConfigurationError: a text without ``=`` or with an empty key.
    """
    import json

    out: dict[str, object] = {}
    for text in texts:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise ConfigurationError(
                f"--judge-param {text!r} is not KEY=VALUE, e.g. seed=7 or api_version=2024-10-21"
            )
        try:
            out[key.strip()] = json.loads(value)
        except ValueError:
            out[key.strip()] = value
    return out


#: options a resumed task takes from the task itself, with the flag that sets each
_FROM_TASK = (
    ("model", "--model"),
    ("mode", "--mode"),
    ("cassettes", "--cassettes"),
    ("input_format", "--input-format"),
    ("max_reasks", "--max-reasks"),
    ("temperature", "--temperature"),
    ("max_tokens", "--max-tokens"),
    ("seed", "--seed"),
    ("draft", "--draft"),
    ("judge", "--judge"),
    ("judge_when", "--judge-when"),
    ("output_mode", "--output-mode"),
    ("system_as_user", "--system-as-user"),
    ("prompt_version", "--prompt"),
    ("samples", "--samples"),
    ("samples_when", "--samples-when"),
    ("panel", "--judge"),
)


def non_batch_provider(options: ScoreOptions) -> str | None:
    """The provider of ``options``' model when its batch files and API are not OpenAI's
    (:data:`~rubric_engine.batch.settings.BATCH_PROVIDERS`), else ``None``: what ``--mode
    batch`` and ``batch export`` refuse, each in its own words."""
    provider = effective_model(options).split("/", 1)[0]
    return None if provider in BATCH_PROVIDERS else provider


def effective_model(options: ScoreOptions) -> str:
    """``--api-base`` means an OpenAI-compatible server: a bare model name gets ``openai/``."""
    if options.api_base and "/" not in options.model:
        return f"openai/{options.model}"
    return options.model


def effective_output_mode(options: ScoreOptions) -> str:
    """``--output-mode``, or the provider's default for the effective model."""
    from rubric_engine.judge.output_modes import default_output_mode

    return options.output_mode or default_output_mode(effective_model(options))


def check_options(options: ScoreOptions) -> None:
    """Every check on the options alone (no file, store or network is touched).

    Raises:
        ConfigurationError: the first problem, naming the flag, the valid values and the fix.
    """
    from rubric_engine.judge.secrets import remember_run

    # first: any message from here on may quote them (docs/security.md)
    remember_run(options.api_base, options.api_key_env, options.judge_params)
    _check_resume(options)
    _check_name(options)
    if options.judge not in JUDGES:
        raise ConfigurationError(
            f"--judge {options.judge!r} is not valid; use one of {', '.join(JUDGES)}"
        )
    has_rows = bool(options.inputs) or bool(options.rows)
    if options.resume is None and not (has_rows and (options.rubric or options.judge == "none")):
        raise ConfigurationError(
            "give INPUT file(s) and --rubric KEY (or --resume TASK to finish a stored task; or "
            "--judge none to run the rows' rule checks alone)"
        )
    if options.judge == "none" and (options.api_base or options.mode != "replay"):
        raise ConfigurationError(
            "--judge none calls no judge; drop --mode and --api-base (they are for the LLM judge)"
        )
    _check_budget(options)
    _check_judge_params(options)
    _check_choices(options)
    _check_batch(options)
    _check_ranges(options)
    check_panel(options)
    if options.api_base and not options.api_base.startswith(("http://", "https://")):
        raise ConfigurationError(
            f"--api-base {options.api_base!r} needs a scheme, e.g. http://127.0.0.1:8000/v1"
        )
    _check_api_base(options)
    # a resumed task takes its mode from the task: --api-base is checked against that one
    if options.api_base and options.mode == "replay" and options.resume is None:
        raise ConfigurationError(
            "--api-base is for --mode live, record or batch; replay never calls a provider"
        )
    if options.out is not None and str(options.out) in ("", "."):
        raise ConfigurationError(
            "--out is empty (or '.'): give the report folder, e.g. --out reports/run1; the "
            "report files are never written into the current folder itself"
        )
    resolved = [Path(p).resolve() for p in options.inputs]
    twice = {str(p) for p in options.inputs if resolved.count(Path(p).resolve()) > 1}
    if twice:
        raise ConfigurationError(
            f"{', '.join(sorted(twice))} given more than once; pass each input file once"
        )


#: providers whose calls the direct transport sends (judge/transport.py): the only ones that
#: can send a query string on --api-base
_QUERY_CAPABLE = ("openai", "hosted_vllm")


def _check_api_base(options: ScoreOptions) -> None:
    """A base URL with a query or ``user:password@`` works where it can be sent as given, and
    is refused with the reason elsewhere (docs/security.md).

    Raises:
        ConfigurationError: a query that litellm would send after the path (``--transport
            litellm``, batch mode, another provider), or ``user:password@`` (sent as HTTP
            Basic) together with a key sent as a bearer token.
    """
    from urllib.parse import urlsplit

    from rubric_engine.judge.endpoints import sends_provider_key
    from rubric_engine.judge.transport import transport_choice

    if not options.api_base:
        return
    parts = urlsplit(options.api_base)
    model = effective_model(options)
    provider = model.split("/", 1)[0]
    if parts.query:
        try:
            litellm_sends = transport_choice(options.transport) == "litellm"
        except ValueError:
            litellm_sends = False  # check_transport names the bad transport
        why = (
            "--transport litellm"
            if litellm_sends
            else "--mode batch (its files and batches APIs go through litellm)"
            if options.mode == "batch"
            else f"a {provider}/ model (sent through litellm)"
            if provider not in _QUERY_CAPABLE
            else None
        )
        if why is not None:
            raise ConfigurationError(
                f"--api-base has a query string, which {why} cannot send: litellm appends "
                "/chat/completions after it. Only the direct transport of openai/ and "
                "hosted_vllm/ judges sends it as given; else pass the key with --api-key-env "
                "or a header with --judge-param extra_headers"
            )
    if (parts.username is not None or parts.password is not None) and (
        options.api_key_env or sends_provider_key(model, options.api_base, None)
    ):
        raise ConfigurationError(
            "--api-base has user:password@, sent as HTTP Basic authorization, and a key is "
            "sent too (--api-key-env, or the provider's own key as a bearer token); one "
            "Authorization header carries one credential: drop one of them"
        )


def _check_resume(options: ScoreOptions) -> None:
    if options.resume is None:
        return
    if options.inputs or options.rows or options.rubric:
        raise ConfigurationError(
            "--resume takes the inputs and rubric the task started with; drop INPUT and --rubric"
        )
    given = [flag for name, flag in _FROM_TASK if getattr(options, name) != getattr(DEFAULTS, name)]
    if given:
        raise ConfigurationError(
            f"--resume continues the task as it started (its judge, model, mode, cassettes, "
            f"input format and sampling); drop {', '.join(given)}, or start a new task"
        )


def _check_name(options: ScoreOptions) -> None:
    from rubric_engine.store.task_ref import check_name_and_tags

    if options.resume is not None and (options.name is not None or options.tags):
        raise ConfigurationError("--resume keeps the task's name and tags; drop --name and --tag")
    check_name_and_tags(options.name, options.tags)


def _check_judge_params(options: ScoreOptions) -> None:
    owned = [f"{k} (set by {_OWNED_PARAMS[k]})" for k in options.judge_params if k in _OWNED_PARAMS]
    if owned:
        raise ConfigurationError(
            f"--judge-param {', '.join(owned)}: the engine sets these; use the option named"
        )
    if options.seed is not None and "seed" in options.judge_params:
        raise ConfigurationError(
            "--seed and --judge-param seed=… both set the provider's seed; keep one"
        )
    if options.judge_params and options.judge == "none":
        raise ConfigurationError("--judge none calls no judge; drop --judge-param")
    if options.judge_when is not None:
        from rubric_engine.engine.judge_when import parse_judge_when

        if options.judge == "none":
            raise ConfigurationError("--judge none calls no judge; drop --judge-when")
        if options.mode == "batch":  # the batch run writes a request for every row
            raise ConfigurationError(
                "--judge-when is not applied by --mode batch: every row would be sent to the "
                "judge and paid for; use --mode live with --judge-when, or drop --judge-when"
            )
        parse_judge_when(options.judge_when)


def _check_budget(options: ScoreOptions) -> None:
    if options.max_calls is not None and options.max_calls < 1:
        raise ConfigurationError("--max-calls must be at least 1")
    if options.max_cost_usd is not None and not (
        math.isfinite(options.max_cost_usd) and options.max_cost_usd > 0
    ):
        raise ConfigurationError(
            f"--max-cost {options.max_cost_usd!r} is not valid; give a positive number of USD"
        )


def _check_choices(options: ScoreOptions) -> None:
    from rubric_engine.dialogue.readers import INPUT_FORMATS

    if options.mode not in MODES:
        raise ConfigurationError(
            f"--mode {options.mode!r} is not valid; use one of {', '.join(MODES)}"
        )
    from rubric_engine.judge.output_modes import OUTPUT_MODE_NAMES

    if options.output_mode is not None and options.output_mode not in OUTPUT_MODE_NAMES:
        raise ConfigurationError(
            f"--output-mode {options.output_mode!r} is not valid; use one of "
            f"{', '.join(OUTPUT_MODE_NAMES)} (see docs/self-hosted-judge.md)"
        )
    if options.input_format not in INPUT_FORMATS:
        raise ConfigurationError(
            f"--input-format {options.input_format!r} is not valid; use "
            f"one of {', '.join(INPUT_FORMATS)}"
        )
    check_transport(options)


def check_transport(options: ScoreOptions) -> None:
    """A bad ``--transport`` is a bad option in any mode; ``$RUBRIC_EVAL_TRANSPORT`` only
    matters to a run that calls a judge (a replay never makes a live backend, which checks it
    again). Shared by ``score`` and ``rubric-eval work``.

    Raises:
        ConfigurationError: an unknown transport (names the valid ones).
    """
    from rubric_engine.judge.transport import transport_choice

    if options.transport is not None or options.mode != "replay":
        try:
            transport_choice(options.transport)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None


def _check_batch(options: ScoreOptions) -> None:
    batch = options.batch
    if batch != BatchSettings() and options.mode != "batch" and options.resume is None:
        raise ConfigurationError("--batch-* options are for --mode batch; add --mode batch")
    if batch.fallback not in FALLBACKS:
        raise ConfigurationError(
            f"--batch-fallback {batch.fallback!r} is not valid; use one of {', '.join(FALLBACKS)}"
        )
    if batch.max_requests < 1 or batch.max_bytes < 1024 or batch.poll_interval_s < 0:
        raise ConfigurationError(
            "--batch-max-requests must be at least 1, --batch-max-bytes at least 1024 and "
            "--batch-poll-interval 0 or more seconds"
        )
    provider = non_batch_provider(options)
    if options.mode == "batch" and provider is not None:
        raise ConfigurationError(
            f"--mode batch drives OpenAI-style files and batches APIs ({', '.join(BATCH_PROVIDERS)}"
            f"); --model {options.model!r} is served by {provider!r}. Use one of those, or write "
            "the requests with `rubric-eval batch export` and run them with the provider's own "
            "batch tool"
        )
    if options.mode == "batch" and options.rows:
        raise ConfigurationError(
            "--mode batch needs its rows in files (a batch outlives the process, and resume "
            "reads them again); write the rows to a JSONL file"
        )


def _check_ranges(options: ScoreOptions) -> None:
    if not 1 <= options.concurrency <= MAX_CONCURRENCY:
        raise ConfigurationError(
            f"--concurrency must be at least 1 and at most {MAX_CONCURRENCY} calls in flight "
            f"(not {options.concurrency}; a provider's rate limit bounds a run long before "
            f"{MAX_CONCURRENCY})"
        )
    if options.max_reasks < 0:
        raise ConfigurationError("--max-reasks must be 0 or more")
    if not 0 <= options.temperature <= 2:
        raise ConfigurationError("--temperature must be between 0 and 2")
    if not 1 <= options.samples <= MAX_SAMPLES:
        raise ConfigurationError(
            f"--samples must be between 1 and {MAX_SAMPLES}, not {options.samples}"
        )
    if options.samples_when not in ("always", "unsure"):
        raise ConfigurationError(
            f"--samples-when {options.samples_when!r} is not one of: always, unsure"
        )
    # a panel refuses --samples-when unsure with its own fix (check_panel)
    if options.samples_when == "unsure" and options.samples < 2 and not options.panel:
        raise ConfigurationError(
            f"--samples-when unsure chooses which rows get more than one of --samples K asks, "
            f"and K is {options.samples}: add --samples K with K >= 2 (e.g. --samples 3), or "
            "drop --samples-when (docs/stability.md)"
        )
    if options.max_tokens < MIN_MAX_TOKENS:
        raise ConfigurationError(f"--max-tokens must be at least {MIN_MAX_TOKENS}")
    if options.max_context is not None and options.max_context < 1:
        raise ConfigurationError("--max-context must be a positive number of tokens")
    if not 0 <= options.restart_wait_s <= 3600:
        raise ConfigurationError("--restart-wait must be 0 to 3600 seconds")
    if options.timeout_s < MIN_TIMEOUT_S:
        raise ConfigurationError(
            f"--timeout must be at least {MIN_TIMEOUT_S} seconds (a positive number)"
        )
