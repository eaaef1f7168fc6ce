"""The environment is read in one function (``_environ.environ``); docs/environment.md lists exactly its variables."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import litstream
from litstream._environ import CLIENT_OPTION_PREFIXES, Environ, environ, exported, variables
from litstream.storage._options import CLIENT_KEYS

DOCS = Path(__file__).resolve().parents[1] / "docs" / "environment.md"


def _documented() -> set[str]:
    """Every variable named in the first column of the table in docs/environment.md (``<OPTION>`` expanded)."""
    names: set[str] = set()
    for line in DOCS.read_text().splitlines():
        if not line.startswith("| `"):
            continue
        for name in re.findall(r"`([^`]+)`", line.split("|")[1]):
            if name.endswith("_<OPTION>"):
                names.update(name.removesuffix("<OPTION>") + key.upper() for key in CLIENT_KEYS)
            else:
                names.add(name)
    return names


def test_the_docs_table_lists_exactly_the_variables_read() -> None:
    read = set(variables())
    assert len(read) == len(variables())  # no name read twice
    documented = _documented()
    assert documented - read == set(), "documented but never read"
    assert read - documented == set(), "read but not documented"


def test_environ_reads_each_variable_and_treats_empty_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in variables():
        monkeypatch.delenv(name, raising=False)
    assert environ() == Environ()
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("HF_TOKEN", "")
    monkeypatch.setenv("DATA_OPTIMIZER_TIMEOUT", " 5 ")
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    monkeypatch.setenv("AZURE_PROXY_URL", "http://proxy:3128")
    monkeypatch.setenv("AWS_NOT_A_CLIENT_OPTION", "x")
    env = environ()
    assert env.world_size == "8"
    assert env.hf_token is None
    assert env.data_optimizer_timeout == " 5 "  # raw: write/_env.py parses and names the variable
    assert env.client_options_for("s3") == {"allow_http": "true"}
    assert env.client_options_for("azure") == {"proxy_url": "http://proxy:3128"}
    assert env.client_options_for("gcs") == {}
    with pytest.raises(AttributeError):
        env.world_size = "1"  # type: ignore[misc]
    assert set(CLIENT_OPTION_PREFIXES) == {"s3", "gcs", "azure"}


def test_exported_sets_then_restores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATA_OPTIMIZER_GLOBAL_RANK", "7")
    monkeypatch.delenv("DATA_OPTIMIZER_NUM_WORKERS", raising=False)
    with exported({"DATA_OPTIMIZER_GLOBAL_RANK": "2", "DATA_OPTIMIZER_NUM_WORKERS": "4"}):
        assert os.environ["DATA_OPTIMIZER_GLOBAL_RANK"] == "2"
        assert os.environ["DATA_OPTIMIZER_NUM_WORKERS"] == "4"
    assert os.environ["DATA_OPTIMIZER_GLOBAL_RANK"] == "7"
    assert "DATA_OPTIMIZER_NUM_WORKERS" not in os.environ


def test_no_other_module_touches_the_environment() -> None:
    src = Path(litstream.__file__).parent
    offenders = [
        str(path.relative_to(src))
        for path in sorted(src.rglob("*.py"))
        if path.name != "_environ.py" and re.search(r"os\.environ|getenv|putenv", path.read_text())
    ]
    assert offenders == []
