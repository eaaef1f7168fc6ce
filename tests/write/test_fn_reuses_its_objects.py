from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import litstream

if TYPE_CHECKING:
    from pathlib import Path

_BUFFER = np.zeros(4, dtype=np.int64)
_SAMPLE: dict[str, Any] = {"x": _BUFFER, "i": 0}


def reuse(i: int) -> dict[str, Any]:
    """Returns the same dict and array every call, filled for input ``i`` (fn runs ahead of the writer)."""
    _BUFFER[:] = i
    _SAMPLE["i"] = i
    return _SAMPLE


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_a_fn_that_reuses_its_dict_and_array_writes_every_sample_as_returned(
    tmp_path: Path, compression: str | None
) -> None:
    out = tmp_path / "reuse"
    litstream.optimize(reuse, list(range(40)), out, chunk_size=7, num_workers=1, verbose=False, compression=compression)
    got = list(litstream.StreamingDataset(out))
    assert [s["i"] for s in got] == list(range(40))
    assert [s["x"].tolist() for s in got] == [[i] * 4 for i in range(40)]


def test_an_unencodable_sample_names_its_input_and_not_fn(tmp_path: Path) -> None:
    def changes_shape(i: int) -> Any:
        return {"a": i} if i < 3 else [i]

    with pytest.raises(litstream.WorkerError, match=r"cannot write the sample from input 3") as info:
        litstream.optimize(changes_shape, list(range(6)), tmp_path / "o", chunk_size=2, num_workers=1, verbose=False)
    assert "fn failed" not in str(info.value)
    assert not (tmp_path / "o" / "index.json").exists()
