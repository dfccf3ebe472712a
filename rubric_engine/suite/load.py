"""Read a suite file: limited YAML, ``${VAR}`` references, a ``.env`` beside it, validation.

``${VAR}`` (or ``${VAR:-default}``) in any string value is replaced by the variable from the
environment, else from the ``.env`` file in the suite's folder (read with python-dotenv; the
environment wins, as with docker compose). An unset variable without a default is an error
naming the file, line and field. Paths in the file are relative to its folder. Every problem
of the file is reported at once, with ``file:line`` and the field path.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from rubric_engine.errors import InputError, Problem, RubricEvalError, format_loc
from rubric_engine.formats.safe_yaml import YamlLimitError, load_documents, yaml_problem
from rubric_engine.suite.model import EvalSuite

#: the name ``rubric-eval ci`` looks for in the current folder
SUITE_FILE = "rubric-eval.yaml"
MAX_SUITE_BYTES = 1_000_000
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
Lines = dict[tuple[str | int, ...], int]


class SuiteError(InputError):
    """The suite file is missing, not YAML, or does not validate (every problem listed)."""


def _lines(node: yaml.Node, path: tuple[str | int, ...] = ()) -> Lines:
    index: Lines = {path: node.start_mark.line + 1}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            index.update(_lines(value, (*path, str(key.value))))
            index[(*path, str(key.value))] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            index.update(_lines(item, (*path, i)))
    return index


def read_env(folder: Path) -> dict[str, str]:
    """The ``.env`` file of ``folder`` (``{}`` when there is none); values never logged."""
    env = folder / ".env"
    if not env.is_file():
        return {}
    from dotenv import dotenv_values

    return {k: v for k, v in dotenv_values(env).items() if v is not None}


def expand(
    data: Any,
    env: Mapping[str, str],
    problems: list[tuple[tuple[str | int, ...], str]],
    path: tuple[str | int, ...] = (),
) -> Any:
    """``data`` with every ``${VAR}`` replaced; unset variables are appended to ``problems``."""
    if isinstance(data, dict):
        return {k: expand(v, env, problems, (*path, str(k))) for k, v in data.items()}
    if isinstance(data, list):
        return [expand(v, env, problems, (*path, i)) for i, v in enumerate(data)]
    if not isinstance(data, str):
        return data

    def one(found: re.Match[str]) -> str:
        name, default = found.group(1), found.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        problems.append(
            (
                path,
                f"${{{name}}} is not set; export it, put {name}=… in the .env file beside "
                f"the suite, or write ${{{name}:-default}}",
            )
        )
        return found.group(0)

    return _VAR.sub(one, data)


def load_suite(path: Path, environ: Mapping[str, str] | None = None) -> EvalSuite:
    """Load, expand and validate a suite file; relative paths become relative to its folder.

    Args:
        environ: the environment to expand from (default ``os.environ``), over the ``.env``.

    Raises:
        SuiteError: no such file (names how to start one), not YAML, over the limits of
            :mod:`rubric_engine.formats.safe_yaml`, an unset variable, or invalid fields (all
            listed).
    """
    if not path.is_file():
        raise SuiteError(
            f"{path}: no suite file here; write one (see examples/rubric-eval.yaml and "
            "`rubric-eval ci --schema`) or pass --suite FILE"
        )
    try:
        documents = load_documents(path.read_text(encoding="utf-8-sig"), MAX_SUITE_BYTES)
    except (YamlLimitError, yaml.YAMLError) as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise SuiteError(f"{where}: not a readable YAML suite: {yaml_problem(exc)}") from exc
    if len(documents) != 1 or not isinstance(documents[0][1], dict):
        raise SuiteError(f"{path}: a suite file holds one YAML mapping (name, datasets, …)")
    node, data = documents[0]
    lines = _lines(node)
    env = {**read_env(path.parent), **(os.environ if environ is None else environ)}
    found: list[tuple[tuple[str | int, ...], str]] = []
    data = expand(data, env, found)
    problems = [_problem(path, lines, loc, msg) for loc, msg in found]
    if not problems:
        try:
            suite = EvalSuite.model_validate(data)
        except ValidationError as exc:
            problems = [_problem(path, lines, tuple(e["loc"]), _said(e)) for e in exc.errors()]
            problems += _threshold_problems(path, lines, data)  # named in the same run
        else:
            problems = _cross_checks(path, lines, suite) + _threshold_problems(path, lines, data)
            if not problems:
                return _rebased(suite, path.parent)
    raise SuiteError(f"{path}: {len(problems)} problem(s) in the suite file", problems)


def _problem(path: Path, lines: Lines, loc: tuple[str | int, ...], message: str) -> Problem:
    line = next((lines[loc[:n]] for n in range(len(loc), -1, -1) if loc[:n] in lines), None)
    return Problem(f"{path}:{line}" if line else str(path), format_loc(loc), message)


def _said(error: Any) -> str:
    """pydantic's message for one field, with the value written when it is a plain one."""
    given = error.get("input")
    if error["type"] in ("enum", "literal_error") and isinstance(given, str | int | float):
        return f"{error['msg']} (got {given!r})"
    return str(error["msg"])


def _threshold_problems(path: Path, lines: Lines, data: Any) -> list[Problem]:
    """Every threshold and slice of the suite (``data`` as read) that does not parse; read from
    the file's own mapping so that they are named even when other fields are invalid."""
    from rubric_engine.report.gate import parse_threshold

    found: list[tuple[tuple[str | int, ...], Any]] = []
    datasets = data.get("datasets") if isinstance(data, dict) else None
    for i, dataset in enumerate(datasets if isinstance(datasets, list) else []):
        for field in ("thresholds", "slices"):
            texts = dataset.get(field) if isinstance(dataset, dict) else None
            if isinstance(texts, list):
                found += [(("datasets", i, field, j), t) for j, t in enumerate(texts)]
    tiers = data.get("tiers") if isinstance(data, dict) else None
    for tier, texts in (tiers if isinstance(tiers, dict) else {}).items():
        if isinstance(texts, list):
            found += [(("tiers", str(tier), j), t) for j, t in enumerate(texts)]
    problems = []
    for loc, text in found:
        if not isinstance(text, str):
            continue  # not text: the suite's own validation names it
        try:
            parse_threshold(text)
        except RubricEvalError as exc:
            problems.append(_problem(path, lines, loc, str(exc)))
    return problems


def _cross_checks(path: Path, lines: Lines, suite: EvalSuite) -> list[Problem]:
    problems = []
    names = [d.name for d in suite.datasets]
    for i, dataset in enumerate(suite.datasets):
        if names.count(dataset.name) > 1:
            problems.append(_problem(path, lines, ("datasets", i, "name"), "used twice"))
        if dataset.judge == "llm" and not dataset.rubric:
            problems.append(
                _problem(path, lines, ("datasets", i), "needs rubric: KEY (or judge: none)")
            )
    unknown = [n for n in (suite.latency.datasets or []) if n not in names] if suite.latency else []
    unknown += [n for n in suite.baseline.tasks if n not in names]
    if unknown:
        problems.append(
            _problem(
                path,
                lines,
                (),
                f"unknown dataset(s) {', '.join(unknown)}; valid: {', '.join(names)}",
            )
        )
    return problems


def _rebased(suite: EvalSuite, folder: Path) -> EvalSuite:
    def at(p: Path | None) -> Path | None:
        return p if p is None or p.is_absolute() else folder / p

    judge = suite.judge.model_copy(update={"cassettes": at(suite.judge.cassettes)})
    datasets = [
        d.model_copy(update={"inputs": [at(p) for p in d.inputs], "cassettes": at(d.cassettes)})
        for d in suite.datasets
    ]
    return suite.model_copy(
        update={
            "store": at(suite.store),
            "out": at(suite.out),
            "rubrics": [at(p) for p in suite.rubrics],
            "judge": judge,
            "datasets": datasets,
        }
    )
