"""The same mistakes give LitData's exception types, and messages with the same facts (litstream's wording).

Each case runs against LitData 0.2.76 and litstream: the exception is an instance of the type LitData
raises (litstream's own classes subclass those types), and litstream's message names what LitData's
names plus the fix. Also ``optimize(verbose=True)``'s progress lines and the ``max_cache_size`` warning.
"""

from __future__ import annotations

import logging
import re
import shutil
from typing import TYPE_CHECKING, Any

import pytest

import litstream
from peer import litdata_marks, require_peer

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

litdata = require_peer("litdata")

pytestmark = litdata_marks(r"ignore:unclosed file <_io\.FileIO:ResourceWarning")


def _sample(i: int) -> dict[str, int]:
    return {"i": i}


def _key(sample: dict[str, int]) -> str:
    return f"k{sample['i']}"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("keyed") / "ds"
    litstream.optimize(
        fn=_sample, inputs=list(range(6)), output_dir=str(out), chunk_size=3, num_workers=1, key_fn=_key, verbose=False
    )
    return out


def _raises(module: Any, action: Callable[[Any], object], kind: type[BaseException]) -> str:
    with pytest.raises(kind) as info:
        action(module)
    return str(info.value)


def _commit_twice(path: Path) -> Callable[[Any], object]:
    def run(m: Any) -> None:
        with m.dataset_update(str(path)) as update:
            update["k1"] = {"i": 10}
            update.commit()
            update.commit()

    return run


def _change_after_commit(path: Path) -> Callable[[Any], object]:
    def run(m: Any) -> None:
        with m.dataset_update(str(path)) as update:
            update.commit()
            update["k1"] = {"i": 10}

    return run


def _unknown_key(path: Path) -> Callable[[Any], object]:
    def run(m: Any) -> None:
        with m.dataset_update(str(path)) as update:
            update["nope"] = {"i": 10}
            update.commit()

    return run


@pytest.mark.parametrize(
    ("case", "kind", "facts"),
    [
        (_commit_twice, RuntimeError, r"committed already"),
        (_change_after_commit, RuntimeError, r"is committed; open a new one"),
        (_unknown_key, KeyError, r"'nope' are not in the dataset"),
    ],
    ids=["commit-twice", "change-after-commit", "unknown-key"],
)
def test_dataset_update_misuse(
    keyed: Path, tmp_path: Path, case: Callable[[Path], Callable[[Any], object]], kind: type, facts: str
) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    shutil.copytree(keyed, ours)
    shutil.copytree(keyed, theirs)
    _raises(litdata, case(theirs), kind)
    message = _raises(litstream, case(ours), kind)
    assert re.search(facts, message), message


def test_dataset_update_of_a_missing_or_unkeyed_dataset(tmp_path: Path) -> None:
    missing = str(tmp_path / "none")
    _raises(litdata, lambda m: m.dataset_update(missing), FileNotFoundError)
    message = _raises(litstream, lambda m: m.dataset_update(missing), FileNotFoundError)
    assert message == f"the dataset directory {missing} does not exist; check the path"

    plain = tmp_path / "plain"
    litstream.optimize(fn=_sample, inputs=[1, 2], output_dir=str(plain), chunk_size=2, num_workers=1, verbose=False)
    _raises(litdata, lambda m: m.dataset_update(str(plain)), FileNotFoundError)
    message = _raises(litstream, lambda m: m.dataset_update(str(plain)), FileNotFoundError)
    assert "has no keys/ sidecar" in message
    assert "optimize(..., key_fn=...)" in message
    assert "build_keys_index" in message


def test_encrypted_dataset_read_without_a_key(tmp_path: Path) -> None:
    out = str(tmp_path / "enc-litdata")  # LitData leaves a chunk open here (the ResourceWarning filter)
    encryption = litstream.FernetEncryption("pw", level="sample")
    litstream.optimize(
        fn=_sample, inputs=[1, 2], output_dir=out, chunk_size=2, num_workers=1, encryption=encryption, verbose=False
    )
    _raises(litdata, lambda m: m.StreamingDataset(out)[0], ValueError)
    message = _raises(litstream, lambda m: m.StreamingDataset(out)[0], ValueError)
    assert f"the dataset at {out} is encrypted (fernet, level 'sample')" in message
    assert "pass encryption=FernetEncryption.load(key_file, password)" in message


def test_raw_dataset_with_no_files(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    empty = str(tmp_path / "empty")

    def make(m: Any, cache: str) -> Callable[[Any], object]:
        return lambda _: m.StreamingRawDataset(empty, cache_dir=str(tmp_path / cache))

    _raises(litdata, make(litdata, "c1"), ValueError)
    message = _raises(litstream, make(litstream, "c2"), ValueError)
    assert message == f"input_dir={empty!r}: no files found; check the path and storage_options"


@pytest.mark.parametrize(
    ("kwargs", "facts"),
    [
        ({"mode": "bogus"}, "mode must be None, 'append' or 'overwrite', got 'bogus'"),
        ({"weights": [1, 2]}, "weights has 2 entries but inputs has 3; give one positive weight per input"),
    ],
    ids=["mode", "weights"],
)
def test_optimize_argument_mistakes_are_value_errors(tmp_path: Path, kwargs: dict[str, Any], facts: str) -> None:
    with pytest.raises(ValueError, match=re.escape(facts)):  # LitData raises ValueError for both
        litstream.optimize(fn=_sample, inputs=[1, 2, 3], output_dir=str(tmp_path / "o"), chunk_size=2, **kwargs)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("verbose", [True, False])
def test_optimize_verbose_prints_progress(tmp_path: Path, capfd: pytest.CaptureFixture[str], verbose: bool) -> None:
    out = str(tmp_path / "v")
    litstream.optimize(fn=_sample, inputs=list(range(5)), output_dir=out, chunk_size=2, num_workers=2, verbose=verbose)
    captured = capfd.readouterr()
    lines = [line for line in captured.err.splitlines() if line.startswith("optimize: ")]
    if not verbose:
        assert lines == []
        assert captured.err == ""
        return
    assert lines[0] == "optimize: starting 2 workers on 5 inputs"
    assert lines[1] == "optimize: all workers finished (5 inputs)"
    assert lines[2].startswith(f"optimize: wrote 5 samples in 3 chunks to {out} in ")


def test_small_max_cache_size_logs_a_warning_as_litdata(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = str(tmp_path / "d")
    litstream.optimize(fn=_sample, inputs=[1, 2], output_dir=out, chunk_size=2, num_workers=1, verbose=False)
    remote = litstream.Dir(path=str(tmp_path / "cache"), url=out)
    with caplog.at_level(logging.WARNING):
        litdata.StreamingDataset(out, max_cache_size="1GB")
    assert any("25GB" in r.getMessage() for r in caplog.records)  # LitData warns
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="litstream"):
        litstream.StreamingDataset(remote, max_cache_size="1GB")
        litstream.StreamingDataset(remote, max_cache_size="30GB")
        litstream.StreamingDataset(remote, max_cache_size=0.5)
    warned = [r.getMessage() for r in caplog.records if r.name == "litstream"]
    assert len(warned) == 1
    assert warned[0].startswith("max_cache_size='1GB' is under 25GB: ")
