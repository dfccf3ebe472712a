"""Checks made before the first judge call, so a mistake costs nothing.

Each reads what it checks once: the input rows are parsed here and handed on to the run (the
file is not read again), the cassette folder and the report folder are probed, and the
provider's credentials and price are looked up in litellm (imported only for live and record).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.dialogue.readers import DialogueSource, MemorySource
from rubric_engine.errors import ConfigurationError
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.scoring.options import ScoreOptions, effective_model


@dataclass
class Inputs:
    """A run's rows, parsed and checked once.

    Attributes:
        files: the input files, in the order given.
        rows: every row, files first (in file order), then the rows given in memory; emptied
            by :meth:`drain` as the run takes them.
        from_memory: how many of the rows were given in memory (0 for a CLI run).
        total: how many rows there are (also after :meth:`drain`).
    """

    files: tuple[Path, ...]
    rows: list[DialogueRow]
    from_memory: int = 0
    total: int = field(init=False)

    def __post_init__(self) -> None:
        self.total = len(self.rows)

    def drain(self) -> Iterator[DialogueRow]:
        """Yield the rows in order, letting go of each as it is taken.

        The run stores every row as it finishes, so holding all the parsed rows to the end
        would add their size to the peak memory of a large batch (they are parsed once, up
        front, so that nothing is scored from a file that is broken further down).
        """
        self.rows.reverse()
        while self.rows:
            yield self.rows.pop()


def read_inputs(options: ScoreOptions) -> Inputs:
    """Parse and check every row of every input (files and rows in memory) once.

    Raises:
        DatasetError: a file is missing or unreadable, or rows are malformed or repeat a
            rowId (across files and memory too); every problem of a file at once.
    """
    seen: dict[str, str] = {}
    rows: list[DialogueRow] = []
    for path in options.inputs:
        rows += DialogueSource(Path(path), options.input_format).read(seen)
    memory: list[DialogueRow] = []
    if options.rows:
        memory = MemorySource(options.rows).read(seen)
    return Inputs(tuple(Path(p) for p in options.inputs), [*rows, *memory], len(memory))


def check_credentials(options: ScoreOptions) -> None:
    """Live and record need a known provider, and its key unless ``--api-base`` is a local
    OpenAI-compatible server (:func:`is_local`); a hosted ``--api-base`` is checked too.

    Raises:
        ConfigurationError: litellm cannot tell the provider, or the key is not set.
    """
    if options.mode == "replay":
        return
    from rubric_engine.judge.backends import import_litellm

    litellm = import_litellm()
    model = effective_model(options)
    try:
        provider = litellm.get_llm_provider(model=model, api_base=options.api_base)[1]
    except Exception as exc:  # litellm raises several kinds for an unknown provider
        raise ConfigurationError(
            f"--model {options.model!r}: litellm cannot tell which provider "
            "serves it; write it as provider/model, e.g. "
            "openai/gpt-4o-mini"
        ) from exc
    if options.api_key_env is not None:
        if not os.environ.get(options.api_key_env):
            raise ConfigurationError(
                f"${options.api_key_env} (from --api-key-env) is not set; "
                "export the API key in it first"
            )
        return
    if options.api_base and provider == "openai" and is_local(options.api_base):
        return  # a local OpenAI-compatible server often needs no key
    version = options.judge_params.get("api_version")
    missing = litellm.validate_environment(
        model=model,
        api_base=options.api_base,
        api_version=version if isinstance(version, str) else None,
    ).get("missing_keys")
    if missing:
        hosted = f" at {options.api_base}" if options.api_base else ""
        raise ConfigurationError(
            f"--mode {options.mode} with model {options.model!r}{hosted} needs "
            f"{', '.join(missing)} set in the environment (or --api-key-env VAR; "
            "--judge-param api_version=… for Azure); a local OpenAI-compatible server "
            "(--api-base http://127.0.0.1:…) needs none; or --mode replay"
        )


def is_local(api_base: str) -> bool:
    """A loopback, private-network or ``.local`` host: a server of one's own, which often
    needs no key; anything else is a hosted provider, whose key is checked before the run."""
    import ipaddress
    from urllib.parse import urlsplit

    host = (urlsplit(api_base).hostname or "").lower()
    if host in ("localhost", "host.docker.internal") or host.endswith((".local", ".localhost")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def check_cost_known(options: ScoreOptions) -> None:
    """``--max-cost`` can only be kept when litellm knows the model's price.

    Raises:
        ConfigurationError: a replay (nothing is spent), or a model without a price.
    """
    if options.max_cost_usd is None:
        return
    if options.mode == "replay":
        raise ConfigurationError(
            "--max-cost is for --mode live or record: replayed answers cost nothing, so the "
            "budget could never stop the run (use --max-calls to cap a replay)"
        )
    from rubric_engine.judge.backends import import_litellm

    model = effective_model(options)
    try:
        info = import_litellm().get_model_info(model)
        known = bool(info.get("input_cost_per_token"))
    except Exception:  # litellm raises for a model it has no entry for
        known = False
    if not known:
        raise ConfigurationError(
            f"--max-cost needs a model litellm knows the price of, and {model!r} has none; "
            "use --max-calls instead"
        )


def check_cassette_folder(options: ScoreOptions) -> None:
    """A replay reads its answers from ``options.cassettes``: it must be a folder.

    Raises:
        ConfigurationError: the folder is missing.
    """
    if options.mode == "replay" and not options.cassettes.is_dir():
        raise ConfigurationError(
            f"cassette folder {options.cassettes} not found; pass "
            "--cassettes DIR (the repository ships `cassettes/`) or "
            "run from the folder that holds it"
        )


def check_something_to_check(rubric: EvalRubric, rows: Sequence[DialogueRow]) -> None:
    """``--judge none`` decides rows by rule checks alone: refuse a run where there are none.

    Raises:
        ConfigurationError: no row has ``expected`` checks and no common requirement a check.
    """
    if any(r.check is not None for r in rubric.common_requirements):
        return
    if any(row.expected for row in rows):
        return
    raise ConfigurationError(
        "--judge none runs rule checks only, and there are none: no row has `expected` checks "
        "(or a seed 001/004 case shape) and no common requirement of the pack has a `check`. "
        "Add checks (see docs/rule-checks.md) or score with the LLM judge"
    )
