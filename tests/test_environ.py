"""The environment is read in one function (``_environ.environ``); docs/environment.md lists exactly its variables."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import litstream
from litstream._core._environ import CLIENT_KEYS, CLIENT_OPTION_PREFIXES, Environ, environ, exported, variables

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
    assert env.data_optimizer_timeout == " 5 "  # raw: write/run/_env.py parses and names the variable
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


DOCS_IGNORED = "## LitData's other `LITDATA_*` variables: ignored, with a warning"


@pytest.mark.litdata
def test_litdata_variables_are_honoured_or_listed_as_ignored() -> None:
    """The two groups cover every LITDATA_* name of the installed LitData, and the docs list the ignored ones."""
    from litstream._core._litdata_env import HONOURED, IGNORED
    from peer import require_peer

    litdata = require_peer("litdata")
    assert litdata.__file__ is not None
    source = Path(litdata.__file__).parent
    names = {m for path in source.rglob("*.py") for m in re.findall(r"LITDATA_[A-Z0-9_]*[A-Z0-9]", path.read_text())}
    assert names == set(HONOURED) | set(IGNORED)
    assert set(HONOURED) <= set(variables())  # honoured through environ()
    section = DOCS.read_text().split(DOCS_IGNORED, 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"LITDATA_[A-Z0-9_]*[A-Z0-9]", section)) == set(IGNORED)


def test_an_ignored_litdata_variable_warns_once_naming_the_replacement(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out = str(tmp_path / "ds")
    litstream.optimize(fn=_item, inputs=list(range(4)), output_dir=out, chunk_size=2, num_workers=1)
    monkeypatch.setenv("LITDATA_POSIX_WILLNEED", "1")
    monkeypatch.setenv("LITDATA_NOT_A_LITDATA_NAME_27", "x")
    with pytest.warns(UserWarning, match="litstream ignores it") as caught:
        litstream.StreamingDataset(out)
    messages = sorted(str(w.message) for w in caught)
    assert messages == [
        "LITDATA_NOT_A_LITDATA_NAME_27 is set, but litstream ignores it (a LitData setting); use see "
        "docs/environment.md for the variables litstream reads",
        "LITDATA_POSIX_WILLNEED is set, but litstream ignores it (a LitData setting); use nothing: local chunks "
        "are memory-mapped by litstream",
    ]
    assert caught[0].filename == __file__  # points at the user's call
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        litstream.StreamingDataset(out)  # once per process: no second warning


def _item(i: int) -> dict[str, int]:
    return {"i": i}


@pytest.mark.litdata
@pytest.mark.parametrize("window", ["3", "5"])
def test_litdata_item_shuffle_window_orders_items_as_litdata(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, window: str
) -> None:
    from peer import require_peer

    litdata = require_peer("litdata")
    out = str(tmp_path / "ds")
    litstream.optimize(fn=_item, inputs=list(range(40)), output_dir=out, chunk_size=20, num_workers=1)
    default = [s["i"] for s in litstream.StreamingDataset(out, shuffle=True)]
    monkeypatch.setenv("LITDATA_ITEM_SHUFFLE_WINDOW", window)
    ours = [s["i"] for s in litstream.StreamingDataset(out, shuffle=True)]
    theirs = [int(s["i"]) for s in litdata.StreamingDataset(out, shuffle=True)]
    assert ours == theirs
    assert ours != default  # the variable changed the order
    assert [s["i"] for s in litstream.StreamingDataset(out, shuffle=True, item_shuffle_window=256)] == default


def test_a_bad_litdata_item_shuffle_window_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from litstream.read._item_window import item_shuffle_window_value

    monkeypatch.setenv("LITDATA_ITEM_SHUFFLE_WINDOW", "lots")
    with pytest.raises(litstream.ConfigurationError, match="LITDATA_ITEM_SHUFFLE_WINDOW='lots' is not understood"):
        item_shuffle_window_value(None)
    assert item_shuffle_window_value(7) == 7  # an explicit argument wins, as in LitData


def test_litdata_posix_fast_off_is_litstreams_behaviour_and_not_warned(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import warnings

    out = str(tmp_path / "ds")
    litstream.optimize(fn=_item, inputs=list(range(4)), output_dir=out, chunk_size=2, num_workers=1)
    monkeypatch.setenv("LITDATA_POSIX_FAST", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        litstream.StreamingDataset(out)
