"""LitData usage patterns that must keep working under ``import litstream as litdata``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import litstream
from peer import require_peer


def _sample(i: int) -> dict[str, int]:
    return {"x": i}


def _write(path: Path, n: int = 6) -> str:
    litstream.optimize(fn=_sample, inputs=list(range(n)), output_dir=str(path), chunk_size=2, num_workers=1)
    return str(path)


class _Doubled(litstream.StreamingDataset):
    def transform(self, sample: dict[str, int]) -> dict[str, int]:  # LitData's README pattern
        return {"x": sample["x"] * 2}


class _SetInInit(litstream.StreamingDataset):
    def __init__(self, input_dir: str) -> None:
        super().__init__(input_dir)
        self.transform = [lambda s: {"x": s["x"] + 1}, lambda s: {"x": -s["x"]}]


def test_transform_method_of_a_subclass_is_applied(tmp_path: Path) -> None:
    data = _write(tmp_path / "ds")
    ds = _Doubled(data)
    expected = [{"x": 2 * i} for i in range(6)]
    assert list(ds) == expected
    assert ds[3] == {"x": 6}
    loader = litstream.StreamingDataLoader(_Doubled(data), batch_size=3, num_workers=1)
    assert [int(v) for batch in loader for v in batch["x"]] == [2 * i for i in range(6)]
    assert list(_SetInInit(data)) == [{"x": -(i + 1)} for i in range(6)]
    # transform= given to the constructor wins over the attribute, as in LitData.
    assert list(_Doubled(data, transform=lambda s: {"x": s["x"] + 100})) == [{"x": i + 100} for i in range(6)]


@pytest.mark.litdata
def test_transform_method_matches_litdata(tmp_path: Path) -> None:
    litdata = require_peer("litdata")

    peer_dataset: Any = litdata.StreamingDataset

    class PeerDoubled(peer_dataset):  # type: ignore[misc]
        def transform(self, sample: dict[str, int]) -> dict[str, int]:
            return {"x": sample["x"] * 2}

    data = _write(tmp_path / "ds")
    assert list(_Doubled(data)) == list(PeerDoubled(data))


@pytest.mark.parametrize("as_url", [False, True])
def test_local_remote_dir_is_streamed_through_the_cache(tmp_path: Path, as_url: bool) -> None:
    data = _write(tmp_path / "ds")
    url = Path(data).as_uri() if as_url else data
    cache = tmp_path / "cache"
    ds = litstream.StreamingDataset(litstream.Dir(path=str(cache), url=url))
    assert len(ds) == 6
    assert list(ds) == [{"x": i} for i in range(6)]
    assert ds[5] == {"x": 5}
    cached = sorted(p.name for p in cache.rglob("chunk-*.bin"))
    assert cached == ["chunk-0-0.bin", "chunk-0-1.bin", "chunk-0-2.bin"]


@pytest.mark.litdata
def test_local_remote_dir_matches_litdata(tmp_path: Path) -> None:
    litdata = require_peer("litdata")

    data = _write(tmp_path / "ds")
    ours = litstream.StreamingDataset(litstream.Dir(path=str(tmp_path / "c1"), url=data))
    theirs: Any = litdata.StreamingDataset(litdata.streaming.resolver.Dir(path=str(tmp_path / "c2"), url=data))
    assert list(ours) == list(theirs)


def test_missing_local_dataset_is_refused_by_the_constructor(tmp_path: Path) -> None:
    with pytest.raises(litstream.DatasetNotFoundError, match="does not exist"):
        litstream.StreamingDataset(str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("x")
    with pytest.raises(litstream.DatasetNotFoundError, match=r"holds no index\.json"):
        litstream.StreamingDataset(str(tmp_path / "empty"))
    with pytest.raises(litstream.DatasetNotFoundError, match="does not exist"):
        litstream.StreamingDataset(litstream.Dir(path=str(tmp_path / "cache"), url=str(tmp_path / "missing")))
    # The partial indexes of an unfinished run pass the constructor; opening them is refused, naming the run,
    # unless version="partial" asks for them (merged in memory, with a warning).
    data = Path(_write(tmp_path / "ds"))
    (data / "index.json").rename(data / "0.index.json")
    unfinished = litstream.StreamingDataset(str(data))
    with pytest.raises(litstream.DatasetNotFoundError, match=r"run left partial indexes \(0\.index\.json\)"):
        len(unfinished)
    with pytest.warns(UserWarning, match=r"serving the partial indexes of an uncommitted run \(1 files\)"):
        assert len(litstream.StreamingDataset(str(data), version="partial")) == 6
