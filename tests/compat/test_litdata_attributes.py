"""Attributes, methods and classes LitData 0.2.76 code reads, compared with LitData where it runs here.

``ParallelStreamingDataset.is_cycling()`` / ``is_infinite()``, ``StreamingDataLoader.restore`` and its
``batch_sampler`` / ``batch_size`` / ``drop_last``,
``StreamingDataset.subsampled_files`` / ``region_of_interest``, ``ds.cache.cache_dir``,
``StreamingRawDataset.cache_manager``, ``FileIndexer.build_or_load_index``, ``Dir.data_connection_id``,
the item loaders' ``setup`` / ``encode_data``, the public ``Serializer`` base and the media serializers,
and the exception types LitData raises for ``Graph(..., data=object())`` and an ``http://`` listing.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import litstream
from litstream import ConfigurationError
from peer import litdata_marks, require_dev, require_peer

if TYPE_CHECKING:
    from pathlib import Path

litdata = require_peer("litdata")

pytestmark = litdata_marks(r"ignore:unclosed file <_io\.FileIO:ResourceWarning")

N = 30


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = str(tmp_path_factory.mktemp("attrs") / "ds")
    litstream.optimize(fn=_sample, inputs=list(range(N)), output_dir=out, chunk_size=7, num_workers=1)
    return out


def _sample(i: int) -> dict[str, Any]:
    return {"i": i, "x": np.full(3, i, dtype=np.int32)}


@pytest.mark.parametrize("length", [None, 12, float("inf")])
def test_parallel_is_cycling_and_is_infinite(dataset: str, length: float | None) -> None:
    ours = litstream.ParallelStreamingDataset([litstream.StreamingDataset(dataset)] * 2, length=length)
    theirs = litdata.ParallelStreamingDataset([litdata.StreamingDataset(dataset)] * 2, length=length)
    assert (ours.is_cycling(), ours.is_infinite()) == (theirs.is_cycling(), theirs.is_infinite())
    assert ours.is_cycling() is (length is not None)


@pytest.mark.parametrize("subsample", [1.0, 0.5])
def test_subsampled_files_and_region_of_interest(dataset: str, subsample: float) -> None:
    ours = litstream.StreamingDataset(dataset, subsample=subsample)
    theirs = litdata.StreamingDataset(dataset, subsample=subsample)
    assert ours.subsampled_files == theirs.subsampled_files
    assert [tuple(r) for r in ours.region_of_interest] == [tuple(r) for r in theirs.region_of_interest]
    assert sum(end - start for start, end in ours.region_of_interest) == len(ours)


def test_dataset_cache_dir_of_a_local_dataset(dataset: str) -> None:
    ours = litstream.StreamingDataset(dataset)
    theirs = litdata.StreamingDataset(dataset)
    theirs[0]  # LitData creates ds.cache on first use
    assert ours.cache.cache_dir == theirs.cache.cache_dir == os.path.abspath(dataset)
    assert len(ours.cache) == N
    assert ours.cache[3]["i"] == 3


def test_dataset_cache_dir_of_a_streamed_dataset(dataset: str, tmp_path: Path) -> None:
    # Dir(path=cache, url=local) streams the "remote" through the cache; litstream keeps its chunks in
    # <cache>/<hash of the URL>/<updated_at> (LitData in <cache> itself): cache_dir names where they are.
    ds = litstream.StreamingDataset(litstream.Dir(path=str(tmp_path / "cache"), url=dataset))
    assert [s["i"] for s in ds] == list(range(N))
    cache_dir = ds.cache.cache_dir
    assert cache_dir.startswith(str(tmp_path / "cache") + os.sep)
    assert os.path.isdir(os.path.join(cache_dir, ".locks"))


def test_loader_restore_flag_follows_litdata(dataset: str) -> None:
    def run(module: Any) -> list[bool]:
        loader = module.StreamingDataLoader(module.StreamingDataset(dataset), batch_size=4, num_workers=0)
        flags = [loader.restore]
        it = iter(loader)
        next(it)
        next(it)
        state = loader.state_dict()
        fresh = module.StreamingDataLoader(module.StreamingDataset(dataset), batch_size=4, num_workers=0)
        fresh.load_state_dict(state)
        flags.append(fresh.restore)
        list(fresh)
        flags.append(fresh.restore)
        return flags

    assert run(litstream) == run(litdata) == [False, True, False]


def _loader_view(loader: Any) -> tuple[Any, ...]:
    sampler = loader.batch_sampler
    return (
        type(sampler).__name__,
        sampler.batch_size,
        sampler.drop_last,
        type(sampler.sampler).__name__,
        type(loader.sampler).__name__,
        loader.batch_size,
        loader.drop_last,
    )


def _face(module: Any, dataset: str, face: str) -> Any:
    if face == "single":
        return module.StreamingDataset(dataset)
    members = [module.StreamingDataset(dataset), module.StreamingDataset(dataset)]
    return module.CombinedStreamingDataset(members) if face == "combined" else module.ParallelStreamingDataset(members)


@pytest.mark.parametrize("face", ["single", "combined", "parallel"])
@pytest.mark.parametrize("drop_last", [None, True])
def test_loader_batch_sampler_follows_litdata(dataset: str, face: str, drop_last: bool | None) -> None:
    """Code that reads ``loader.batch_sampler`` (its ``batch_size``, ``drop_last``) sees LitData's, also where
    litstream's workers hand over whole batches (torch then fetches one batch per call)."""

    def view(module: Any) -> tuple[Any, ...]:
        return _loader_view(module.StreamingDataLoader(_face(module, dataset, face), batch_size=4, drop_last=drop_last))

    assert view(litstream) == view(litdata) == ("BatchSampler", 4, False, "_InfiniteConstantSampler",
                                               "_InfiniteConstantSampler", 4, False)  # fmt: skip
    if face == "single":  # the face whose workers hand over whole batches: still batches of 4
        loader = litstream.StreamingDataLoader(litstream.StreamingDataset(dataset), batch_size=4, drop_last=drop_last)
        assert [len(batch["i"]) for batch in loader] == [4] * (N // 4) + ([] if drop_last else [N % 4])


def test_dir_data_connection_id_is_kept() -> None:
    ours = litstream.Dir(path="/data", url="s3://b/p", data_connection_id="conn-1")
    theirs = litdata.streaming.resolver.Dir(path="/data", url="s3://b/p", data_connection_id="conn-1")
    assert ours.data_connection_id == theirs.data_connection_id == "conn-1"
    assert litstream.Dir().data_connection_id is None
    from litstream.storage._resolver import resolve_dir

    assert resolve_dir(ours).data_connection_id == "conn-1"


def test_raw_cache_manager_and_build_or_load_index(tmp_path: Path) -> None:
    root = tmp_path / "raw"
    (root / "sub").mkdir(parents=True)
    for name in ("a.txt", "sub/b.txt", "c.bin"):
        (root / name).write_bytes(name.encode())
    ds = litstream.StreamingRawDataset(str(root), cache_dir=str(tmp_path / "cache"))
    theirs_manager = litdata.StreamingRawDataset(str(root), cache_dir=str(tmp_path / "cache")).cache_manager
    manager = ds.cache_manager
    assert manager.cache_dir == ds.cache_dir == theirs_manager.cache_dir
    assert manager.get_local_path(f"{root}/sub/b.txt") == os.path.join(ds.cache_dir, "sub", "b.txt")
    assert manager.get_local_path(f"{root}/sub/b.txt") == theirs_manager.get_local_path(f"{root}/sub/b.txt")
    with pytest.raises(ValueError, match="not below the dataset's input_dir"):
        manager.get_local_path("/elsewhere/b.txt")

    indexer = litstream.FileIndexer(extensions=[".txt"])
    files = indexer.build_or_load_index(str(root), str(tmp_path / "idx"), None)
    theirs = litdata.raw.indexer.FileIndexer(extensions=[".txt"]).build_or_load_index(
        str(root), str(tmp_path / "their-idx"), None
    )
    assert [(f.path, f.size) for f in files] == sorted((f.path, f.size) for f in theirs)
    assert os.path.isfile(tmp_path / "idx" / "index.json.zstd")


def test_discover_files_refuses_http_as_litdata() -> None:
    with pytest.raises(ValueError, match="Unsupported input directory scheme"):
        litdata.raw.indexer.FileIndexer().discover_files("http://example.invalid/data", None)
    with pytest.raises(ConfigurationError, match=r"http:// location cannot be listed") as info:
        litstream.FileIndexer().discover_files("http://example.invalid/data", None)
    assert isinstance(info.value, ValueError)


def test_graph_with_opaque_data_and_fields_is_a_type_error() -> None:
    torch = require_dev("torch")
    with pytest.raises(TypeError):
        litdata.Graph(x=torch.ones(2, 2), data=object()).to_mapping()
    with pytest.raises(TypeError, match=r"Graph\(data=<object>\) cannot be combined with tensor fields \(x\)") as info:
        litstream.Graph(x=torch.ones(2, 2), data=object()).to_mapping()
    assert isinstance(info.value, litstream.FormatError)
    assert litstream.Graph(data=object()).to_mapping() == litdata.Graph(data=object()).to_mapping() == {}


def test_item_loader_hooks_give_litdatas_bytes(dataset: str) -> None:
    import json
    from pathlib import Path

    leaves = [b"ab", b"cde"]
    want_item = litdata.streaming.item_loader.PyTreeLoader.encode_data(leaves, [2, 3], [1, 2])
    assert litstream.PyTreeLoader().encode_data(leaves, [2, 3], [1, 2]) == want_item
    tokens = np.arange(5, dtype=np.int32)
    want = litdata.TokensLoader.encode_data([tokens.tobytes()], [20], [tokens])
    assert litstream.TokensLoader().encode_data([tokens.tobytes()], [20], [tokens]) == want

    index = json.loads(Path(dataset, "index.json").read_text())
    loader = litstream.PyTreeLoader()
    loader.setup(index["config"], index["chunks"], {})
    assert loader._data_format == index["config"]["data_format"]
    with pytest.raises(ValueError, match="not a token dataset"):
        litstream.TokensLoader(block_size=2).setup(index["config"], index["chunks"], {})


class _Upper(litstream.Serializer):
    """A serializer written as for LitData: no ``name``, ``setup`` configures in place and returns None."""

    def serialize(self, item: Any) -> tuple[bytes, str | None]:
        return item.upper().encode(), None

    def deserialize(self, data: bytes | memoryview) -> Any:
        return bytes(data).decode().lower()

    def can_serialize(self, item: Any) -> bool:
        return isinstance(item, str) and item.startswith("up:")

    def setup(self, metadata: Any) -> None:
        self.metadata = metadata


def test_litdata_style_serializer_round_trips_and_litdata_reads_it(tmp_path: Path) -> None:
    from litdata.streaming.serializers import Serializer as LitSerializer

    class LitUpper(LitSerializer):  # type: ignore[misc]  # LitData is untyped
        serialize = _Upper.serialize
        deserialize = _Upper.deserialize
        can_serialize = _Upper.can_serialize

    out = str(tmp_path / "ds")
    litstream.optimize(
        fn=_upper_sample, inputs=list(range(5)), output_dir=out, chunk_size=2, serializers={"upper": _Upper()}
    )
    ours = [s["s"] for s in litstream.StreamingDataset(out, serializers={"upper": _Upper()})]
    theirs = [s["s"] for s in litdata.StreamingDataset(out, serializers={"upper": LitUpper()})]
    assert ours == theirs == [f"up:{i}" for i in range(5)]


def _upper_sample(i: int) -> dict[str, str]:
    return {"s": f"up:{i}"}


def test_media_serializers_are_public_and_take_litdatas_arguments() -> None:
    import inspect

    from litdata.streaming.serializers import AudioSerializer, VideoSerializer

    for ours, theirs in ((litstream.VideoSerializer, VideoSerializer), (litstream.AudioSerializer, AudioSerializer)):
        assert issubclass(ours, litstream.Serializer)
        their_params = set(inspect.signature(theirs.__init__).parameters) - {"self"}
        assert their_params <= set(inspect.signature(ours.__init__).parameters)


def test_litdata_submodules_are_not_there_and_their_names_are_top_level() -> None:
    import importlib

    for name in ("litstream.streaming", "litstream.utilities", "litstream.processing"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(name)
    for name in ("Cache", "ParquetLoader", "FernetEncryption", "Dir", "Serializer", "VideoSerializer"):
        assert name in litstream.__all__
    assert litdata.streaming.Cache.__name__ == litstream.Cache.__name__ == "Cache"


def _rows_of(table: Any) -> list[int]:
    return [int(v) for v in table.column("v").to_pylist()]


def _parquet_files(tmp_path: Path) -> list[str]:
    pa = require_dev("pyarrow")
    pq = require_dev("pyarrow.parquet")
    paths = []
    for f, n in enumerate([25, 7]):
        path = tmp_path / f"part-{f}.parquet"
        pq.write_table(pa.table({"v": list(range(100 * f, 100 * f + n))}), path, row_group_size=4)
        paths.append(str(path))
    return paths


def test_parquet_reader_reshards_as_litdata(tmp_path: Path) -> None:
    from litdata.processing.readers import ParquetReader as LitParquetReader

    files = _parquet_files(tmp_path)
    ours = litstream.ParquetReader(str(tmp_path / "ours"), num_rows=10, to_pandas=False, columns=["v"])
    theirs = LitParquetReader(str(tmp_path / "theirs"), num_rows=10, to_pandas=False, columns=["v"])
    our_items = ours.remap_items(files, 2)
    their_items = theirs.remap_items(files, 2)
    assert [os.path.basename(p) for p in our_items] == [os.path.basename(p) for p in their_items]
    assert [os.path.basename(p) for p in our_items][:3] == [
        "0_10_part-0.parquet",
        "10_20_part-0.parquet",
        "20_25_part-0.parquet",
    ]
    for mine, other in zip(our_items, their_items, strict=True):
        assert _rows_of(ours.read(mine)) == _rows_of(theirs.read(other))
    assert ours.remap_items(files, 2) == our_items  # shards are reused


def _sum_rows(parquet: Any) -> dict[str, int]:
    values = parquet.read().column("v").to_pylist()  # a pyarrow.parquet.ParquetFile (to_pandas=False)
    return {"n": len(values), "total": sum(values)}


@pytest.mark.parametrize("workers", [1, 2])
def test_optimize_with_a_parquet_reader(tmp_path: Path, workers: int) -> None:
    files = _parquet_files(tmp_path)
    out = str(tmp_path / "out")
    litstream.optimize(
        fn=_sum_rows,
        inputs=files,
        output_dir=out,
        chunk_size=2,
        num_workers=workers,
        reader=litstream.ParquetReader(str(tmp_path / "shards"), num_rows=10, to_pandas=False),
        verbose=False,
    )
    got = sorted((s["n"], s["total"]) for s in litstream.StreamingDataset(out))
    want = sorted([(10, sum(range(10))), (10, sum(range(10, 20))), (5, sum(range(20, 25))), (7, sum(range(100, 107)))])
    assert got == want
