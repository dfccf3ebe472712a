"""Checks made before the first judge call, so a mistake costs nothing.

Each reads what it checks once: the input rows are parsed here, once, and handed on to the
run through a spool (the input file is not read again; :class:`Inputs`), the cassette folder
and the report folder are probed, and the provider's credentials and price are looked up in
litellm (imported only for live and record).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from itertools import chain
from pathlib import Path

from rubric_engine.dialogue.lookalikes import LookalikeIds, describe
from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.dialogue.readers import DialogueSource, MemorySource
from rubric_engine.dialogue.seen_ids import SeenIds
from rubric_engine.dialogue.spool import RowSpool
from rubric_engine.engine.judge_when import check_field_seen
from rubric_engine.engine.options import ScoreOptions, effective_model
from rubric_engine.errors import ConfigurationError
from rubric_engine.rubric.model import EvalRubric


@dataclass
class Inputs:
    """A run's rows, each parsed and checked once, before the first judge call.

    The rows of the input files are not held in memory: they wait in a
    :class:`~rubric_engine.dialogue.spool.RowSpool` (a temporary file) and are read back one
    at a time as the run takes them (:meth:`stream`), so memory does not grow with the input.
    Rows given in memory stay in their list.

    Attributes:
        files: the input files, in the order given.
        spool: the checked rows of the files, in file order.
        memory: the rows given in memory (``ScoreOptions.rows``), checked.
        total: how many rows there are, files and memory.
    """

    files: tuple[Path, ...]
    spool: RowSpool
    memory: list[DialogueRow] = field(default_factory=list)
    total: int = field(init=False)

    def __post_init__(self) -> None:
        self.total = self.spool.count + len(self.memory)

    @property
    def from_memory(self) -> int:
        """How many of the rows were given in memory (0 for a CLI run)."""
        return len(self.memory)

    def stream(self) -> Iterator[DialogueRow]:
        """Every row in order, files first (in file order), then the rows given in memory;
        each call starts again from the first row (the spool is read from its start when
        the first row is asked for). A C ``chain``, not a generator of ours: no Python
        frame resumed between the spool and the run, for every row."""
        return chain(self.spool, self.memory)

    def drain(self) -> Iterator[DialogueRow]:
        """The rows in order, for the run (:meth:`stream`; the name is the earlier API's)."""
        return self.stream()

    @property
    def rows(self) -> list[DialogueRow]:
        """Every row as a list: memory grows with the input, so the run never uses it
        (:meth:`stream` reads them one at a time)."""
        return list(self.stream())

    def close(self) -> None:
        """Drop the spooled rows (also done when the object is collected)."""
        self.spool.close()


#: input formats whose rows hold only JSON values (the spool keeps them as JSON, exactly)
_JSON_FORMATS = frozenset({"jsonl", "json", "csv"})


def read_inputs(options: ScoreOptions) -> Inputs:
    """Parse and check every row of every input (files and rows in memory) once.

    Raises:
        DatasetError: a file is missing or unreadable, or rows are malformed or repeat a
            rowId (across files and memory too); every problem of a file at once.
    """
    seen = SeenIds()  # every rowId of the run, in a temporary database: bounded memory
    spool = RowSpool()
    lookalikes = LookalikeIds()
    fields: set[str] = set()  # metadata fields of the rows, for --judge-when
    try:
        for path in options.inputs:
            source = DialogueSource(Path(path), options.input_format)
            exact = source.path.is_file() and source.resolved_format() in _JSON_FORMATS
            # the bound method when its default holds: no partial's keywords for every row
            add = spool.add if exact else partial(spool.add, exact_json=False)
            keep: Callable[[DialogueRow], None] = lookalikes.watch(add, _row_id)
            if options.judge_when:
                keep = _noting_fields(keep, fields)
            source.check(keep, seen)
        memory: list[DialogueRow] = []
        if options.rows:
            memory = MemorySource(options.rows).read(seen)
            lookalikes.unusual += [r.row_id for r in memory if not r.row_id.isascii()]
            fields.update(k for r in memory for k in r.metadata)
        if options.judge_when:
            check_field_seen(options.judge_when, fields)
        pairs = lookalikes.pairs(seen)  # while the ids are still there
    except BaseException:
        spool.close()
        raise
    finally:
        seen.close()
    warn_lookalikes(pairs)
    return Inputs(tuple(Path(p) for p in options.inputs), spool, memory)


def _row_id(row: DialogueRow) -> str:
    return row.row_id


def _noting_fields(
    keep: Callable[[DialogueRow], None], fields: set[str]
) -> Callable[[DialogueRow], None]:
    def noted(row: DialogueRow) -> None:
        keep(row)
        fields.update(row.metadata)

    return noted


class ConfusableRowIdsWarning(UserWarning):
    """Two rowIds of one input look alike (:mod:`rubric_engine.dialogue.lookalikes`)."""


def warn_lookalikes(pairs: list[tuple[str, str]]) -> None:
    """Warn, naming both ids of each pair (at most 10), that they print the same."""
    if not pairs:
        return
    named = "; ".join(describe(p) for p in pairs[:10])
    more = f" and {len(pairs) - 10} more pair(s)" if len(pairs) > 10 else ""
    warnings.warn(
        ConfusableRowIdsWarning(
            f"{len(pairs)} pair(s) of rowIds look alike and will read as one in every report: "
            f"{named}{more}. They are scored as different rows; rename one of each pair if "
            "they are not meant to differ"
        ),
        stacklevel=3,
    )


def check_credentials(options: ScoreOptions) -> None:
    """Live and record need a known provider, and its key unless ``--api-base`` is a local
    OpenAI-compatible server (:func:`is_local`); a hosted ``--api-base`` is checked too.

    Raises:
        ConfigurationError: litellm cannot tell the provider, or the key is not set.
    """
    if options.mode == "replay":
        return
    model = effective_model(options)
    provider = model.partition("/")[0] if model.partition("/")[2] else None
    if provider not in OPENAI_PROTOCOL:
        provider = _litellm_provider(model, options)
    if options.api_key_env is not None:
        if not os.environ.get(options.api_key_env):
            raise ConfigurationError(
                f"${options.api_key_env} (from --api-key-env) is not set; "
                "export the API key in it first"
            )
        return
    if options.api_base and provider == "openai" and is_local(options.api_base):
        return  # a local OpenAI-compatible server often needs no key
    if provider in OPENAI_PROTOCOL:  # litellm's own answer for these, without importing it
        missing = [name for name in OPENAI_PROTOCOL[provider] if not os.environ.get(name)]
    else:
        missing = _litellm_missing(model, options)
    if missing:
        hosted = f" at {options.api_base}" if options.api_base else ""
        raise ConfigurationError(
            f"--mode {options.mode} with model {options.model!r}{hosted} needs "
            f"{', '.join(missing)} set in the environment (or --api-key-env VAR; "
            "--judge-param api_version=… for Azure); a local OpenAI-compatible server "
            "(--api-base http://127.0.0.1:…) needs none; or --mode replay"
        )


#: providers whose name is the model's prefix and whose keys are known without litellm (what
#: ``litellm.validate_environment`` lists for them), so checking them imports nothing
OPENAI_PROTOCOL = {"openai": ("OPENAI_API_KEY",), "hosted_vllm": ()}


def _litellm_provider(model: str, options: ScoreOptions) -> str:
    """The provider litellm reads from ``model``.

    Raises:
        ConfigurationError: litellm cannot tell it.
    """
    from rubric_engine.judge.backends import import_litellm

    try:
        return str(import_litellm().get_llm_provider(model=model, api_base=options.api_base)[1])
    except Exception as exc:  # litellm raises several kinds for an unknown provider
        raise ConfigurationError(
            f"--model {options.model!r}: litellm cannot tell which provider "
            "serves it; write it as provider/model, e.g. "
            "openai/gpt-4o-mini"
        ) from exc


def _litellm_missing(model: str, options: ScoreOptions) -> list[str]:
    """The environment variables litellm says ``model`` needs and that are not set."""
    from rubric_engine.judge.backends import import_litellm

    version = options.judge_params.get("api_version")
    missing = (
        import_litellm()
        .validate_environment(
            model=model,
            api_base=options.api_base,
            api_version=version if isinstance(version, str) else None,
        )
        .get("missing_keys")
    )
    # litellm lists a variable that is set as missing when another is not (azure/: the key
    # counts only with AZURE_API_BASE and AZURE_API_VERSION exported, even when --api-base
    # and api_version give those): what is set is not missing
    return [name for name in missing or () if not os.environ.get(name)]


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
    from rubric_engine.judge.model_table import answers_for, has_price

    model = effective_model(options)
    if answers_for(model):
        known = has_price(model)  # litellm's table, litellm not imported
    else:
        try:
            known = bool(import_litellm().get_model_info(model).get("input_cost_per_token"))
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
        ConfigurationError: the folder is missing, or is a file.
    """
    if options.mode == "replay" and options.cassettes.is_file():
        raise ConfigurationError(
            f"--cassettes {options.cassettes} is a file, not a folder; pass the folder of "
            "cassettes (the repository ships `cassettes/`): replay reads every .jsonl file "
            "under it"
        )
    if options.mode == "replay" and not options.cassettes.is_dir():
        raise ConfigurationError(
            f"cassette folder {options.cassettes} not found; pass "
            "--cassettes DIR (the repository ships `cassettes/`) or "
            "run from the folder that holds it"
        )


def check_something_to_check(rubric: EvalRubric, rows: Iterable[DialogueRow]) -> None:
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
        "(or a case shape of docs/cases.md) and no common requirement of the pack has a `check`. "
        "Add checks (see docs/rule-checks.md) or score with the LLM judge"
    )
