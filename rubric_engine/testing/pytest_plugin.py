"""The pytest plugin (entry point ``pytest11``): an ``assert_rubric`` fixture and
``--rubric-mode``, ``--rubric-model``, ``--rubric-api-base``.

The fixture is :func:`rubric_engine.testing.assertions.assert_rubric` with relative paths
(input files, pack files, cassettes) resolved against the pytest root folder, so a test reads
the same files wherever pytest is started. ``--rubric-mode replay`` (default) keeps every test
offline; ``record`` or ``live`` call the judge named by ``--rubric-model`` (litellm's name) at
``--rubric-api-base`` (an OpenAI-compatible server). A test's own ``model=``/``api_base=``/``mode=``
arguments win over the options.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.testing.assertions import API_BASE_ENV, MODE_ENV, MODEL_ENV
from rubric_engine.testing.assertions import assert_rubric as _assert_rubric


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rubric-eval")
    group.addoption(
        "--rubric-mode",
        choices=("replay", "record", "live"),
        default=None,
        help="judge mode for assert_rubric (default replay: offline, from cassettes)",
    )
    group.addoption(
        "--rubric-model",
        default=None,
        help="judge model for assert_rubric, a litellm name (default: the engine's; replay "
        "finds cassettes by it)",
    )
    group.addoption(
        "--rubric-api-base",
        default=None,
        help="OpenAI-compatible base URL of the judge for --rubric-mode live/record, e.g. "
        "http://127.0.0.1:8000/v1",
    )


#: each option and the variable assert_rubric reads it from (so a test run in a subprocess
#: or outside the fixture sees the same judge)
_OPTIONS = (("--rubric-mode", MODE_ENV), ("--rubric-model", MODEL_ENV),
            ("--rubric-api-base", API_BASE_ENV))  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    for option, variable in _OPTIONS:
        value = config.getoption(option, default=None)
        if value:
            os.environ[variable] = value


@pytest.fixture
def assert_rubric(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``assert_rubric(rows_or_file_or_report, thresholds=[…], rubric=…)``; see
    :func:`rubric_engine.testing.assertions.assert_rubric`."""
    root = Path(request.config.rootpath)

    def rooted(value: Any) -> Any:
        if isinstance(value, str | Path) and not Path(value).is_absolute():
            candidate = root / value
            return candidate if candidate.exists() else value
        return value

    def check(source: Any, thresholds: Any = (), **kwargs: Any) -> Any:
        for key in ("rubric", "cassettes"):
            if key in kwargs:
                kwargs[key] = rooted(kwargs[key])
        kwargs.setdefault("cassettes", rooted("cassettes"))
        return _assert_rubric(rooted(source), thresholds, **kwargs)

    return check
