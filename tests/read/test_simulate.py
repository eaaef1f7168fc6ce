"""``litstream.simulate``: the real read engine over a simulated store on a virtual clock.

The order each simulated rank is served equals what ``astream`` serves for the same settings; time is what the
model says (every virtual second comes from a modelled sleep, none from real work); the rate limit and faults
reach the retry policy; and the CLI writes a config, a JSON report and a self-contained HTML report.
"""

from __future__ import annotations

import json
import os
import random
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

import litstream
from litstream._cli._main import main
from litstream._core._bridge import run_sync
from litstream.read.source._index_load import load_index
from litstream.simulate import (
    ClusterModel,
    CostModel,
    NetworkModel,
    ReadSettings,
    SimulationConfig,
    config_from_mapping,
    simulate,
)
from litstream.storage._resolver import store_for

N = 600
CHUNK = 40  # 15 chunks


def _sample(i: int) -> dict[str, Any]:
    return {"id": i, "payload": random.Random(i).randbytes(200)}  # incompressible: zstd keeps the size


@pytest.fixture(scope="module", params=[None, "zstd"], ids=["raw", "zstd"])
def dataset(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("simds") / "ds"
    litstream.optimize(  # synthesised chunks repeat a pytree item (Arrow chunks are refused: test below)
        _sample, list(range(N)), str(out), chunk_size=CHUNK, num_workers=1, compression=request.param, verbose=False,
        chunk_format="pytree",
    )  # fmt: skip
    return str(out)


async def _astream_order(ds: str, rank: int, world: int, read: ReadSettings) -> list[int]:
    assert read.drop_last is not None  # the tests give it: astream's default is not StreamingDataset's
    stream = litstream.astream(
        ds, rank=rank, world_size=world, batch_size=read.batch_size, shuffle=read.shuffle, seed=read.seed,
        drop_last=read.drop_last,
    )  # fmt: skip
    return [sample["id"] async for sample in stream]


@pytest.mark.parametrize("shuffle", [False, True, "window"])
@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("world", [1, 3])
def test_order_per_rank_is_the_engines(dataset: str, shuffle: Any, drop_last: bool, world: int) -> None:
    read = ReadSettings(batch_size=7, shuffle=shuffle, seed=3, drop_last=drop_last, epochs=1)
    config = SimulationConfig(
        dataset, chunks="read", cluster=ClusterModel(ranks_per_node=world, num_workers=1), read=read, record_key="id"
    )
    report = simulate(config)
    expected = [anyio.run(_astream_order, dataset, rank, world, read) for rank in range(world)]
    assert [r.order for r in report.ranks] == expected
    assert report.samples == sum(len(e) for e in expected)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_every_sample_once_per_epoch_with_workers(dataset: str, workers: int) -> None:
    config = SimulationConfig(
        dataset,
        chunks="read",
        cluster=ClusterModel(ranks_per_node=4, num_workers=workers),
        read=ReadSettings(batch_size=5, shuffle=True, epochs=2),
        record_key="id",
    )
    report = simulate(config)
    served = sorted(i for r in report.ranks for i in r.order)
    assert served == sorted(list(range(N)) * 2)


@pytest.mark.parametrize("per_byte", [0.0, 2e-5], ids=["no-unpack", "unpack"])
@pytest.mark.parametrize("chunks", ["read", "synthesise"])
def test_time_is_the_models(dataset: str, chunks: str, per_byte: float) -> None:
    """One rank, one worker, one chunk at a time, no jitter: the first batch arrives exactly after the modelled
    requests, the first chunk's decompression (``decode_time_per_byte`` times its ``chunk_bytes``, once per chunk)
    and the batch's decode, and the epoch lasts at least one round trip and one decompression per chunk —
    however long real work took."""
    rtt, bandwidth = 0.1, 1e6
    config = SimulationConfig(
        dataset,
        chunks=chunks,  # type: ignore[arg-type]
        cluster=ClusterModel(num_workers=1, prefetch_factor=1),
        read=ReadSettings(batch_size=10, max_pre_download=1),
        costs=CostModel(device_time_per_sample=0.002, decode_time_per_sample=0.001, decode_time_per_byte=per_byte),
        network=NetworkModel(rtt=rtt, jitter=0.0, connection_bandwidth=bandwidth, node_bandwidth=1e12),
    )
    report = simulate(config)
    index = json.loads(Path(dataset, "index.json").read_text())
    first = index["chunks"][0]
    compressed = index["config"]["compression"] is not None
    wire = Path(dataset, first["filename"]).stat().st_size if compressed else first["chunk_bytes"]
    unpack = per_byte * first["chunk_bytes"]  # every chunk holds CHUNK samples of the same size
    index_bytes = len(Path(dataset, "index.json").read_bytes()) if chunks == "read" else None
    if index_bytes is not None:
        expected = rtt + index_bytes / bandwidth + rtt + wire / bandwidth + unpack + 10 * 0.001
        assert report.time_to_first_batch["max"] == pytest.approx(expected, rel=1e-6)
    chunks_serial = len(index["chunks"]) * (rtt + wire / bandwidth + unpack)  # one chunk in flight at a time
    assert max(chunks_serial, N * 0.002) <= report.epoch_seconds  # fetching overlaps training, never less
    assert report.epoch_seconds <= 2 * rtt + chunks_serial + N * (0.001 + 0.002)  # nor more than all in a row
    assert report.requests == len(index["chunks"]) + 1  # the index, then each chunk once
    assert report.samples == N
    assert report.throttled == report.retries == report.faults == 0


@pytest.mark.parametrize("status", [429, 503])
def test_rate_limit_is_answered_and_retried(dataset: str, status: int) -> None:
    config = SimulationConfig(
        dataset,
        cluster=ClusterModel(ranks_per_node=4, num_workers=2),
        read=ReadSettings(batch_size=8, shuffle=True, drop_last=False),
        network=NetworkModel(rate_limit=5.0, burst=2, throttle_status=status, backoff_initial=0.05),
    )
    report = simulate(config)
    assert report.throttled > 0
    assert report.retries >= report.throttled
    assert report.exhausted == 0
    assert report.samples == N
    assert sum(report.series["throttled"]) > 0
    # The token bucket never lets more than ``burst + rate x t`` requests through by time ``t``.
    series = report.series
    width = series["time"][1] - series["time"][0]
    admitted = 0.0
    for middle, sent, refused in zip(series["time"], series["requests"], series["throttled"], strict=True):
        admitted += (sent - refused) * width
        assert admitted <= 2 + 5.0 * (middle + width / 2) + 1e-6


def test_faults_are_retried_and_an_outage_past_the_budget_fails(dataset: str) -> None:
    flaky = SimulationConfig(dataset, network=NetworkModel(fault_rate=0.3, seed=5, backoff_initial=0.01))
    report = simulate(flaky)
    assert report.faults > 0
    assert report.retries >= report.faults
    assert report.samples == N
    down = SimulationConfig(dataset, network=NetworkModel(outages=((0.0, 1000.0),), retry_timeout=5.0))
    with pytest.raises(litstream.RetriesExhaustedError, match=r"after \d+ attempts"):
        simulate(down)


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({"cluster": {"nodes": 0}}, "cluster.nodes"),
        ({"read": {"shuffle": "sideways"}}, "read.shuffle"),
        ({"network": {"rtt": -1}}, "network.rtt"),
        ({"network": {"warp": 9}}, "network.warp"),
        ({"chunks": "invent"}, "chunks"),
        ({"costs": {"device_time_per_sample": "fast"}}, "costs.device_time_per_sample"),
    ],
)
def test_bad_config_is_named(raw: dict[str, Any], named: str) -> None:
    with pytest.raises(litstream.ConfigurationError, match=f"{named}="):
        config_from_mapping({"dataset": "somewhere", **raw})


def test_cli_init_and_run(dataset: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config_path = tmp_path / "sim.yaml"
    assert main(["simulate", "init", dataset, "-c", str(config_path)]) == 0
    raw = yaml.safe_load(config_path.read_text())
    assert raw["dataset"] == dataset
    assert raw["chunks"] == "read"
    assert main(["simulate", "init", dataset, "-c", str(config_path)]) == 1  # no silent overwrite
    assert "--force" in capsys.readouterr().err
    raw["cluster"]["ranks_per_node"] = 2
    raw["read"]["drop_last"] = False
    raw["network"]["rate_limit"] = 20.0
    raw["network"]["burst"] = 1
    config_path.write_text(yaml.safe_dump(raw))
    html_path = tmp_path / "report.html"
    assert main(["simulate", "run", "-c", str(config_path), "-o", str(html_path)]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["samples"] == N
    assert len(report["ranks"]) == 2
    assert report["throttled"] > 0
    assert report["config"]["network"]["rate_limit"] == 20.0
    page = html_path.read_text()
    assert "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")  # nothing fetched from elsewhere
    svgs = page.split("<svg")[1:]
    assert len(svgs) == 4
    for svg in svgs:
        root = ET.fromstring("<svg" + svg.split("</svg>")[0] + "</svg>")  # each figure is well-formed SVG
        width, height = float(root.attrib["width"]), float(root.attrib["height"])
        for line in root.iter("{http://www.w3.org/2000/svg}polyline"):
            for point in line.attrib["points"].split():
                x, y = map(float, point.split(","))
                assert 0 <= x <= width  # every plotted point lies inside its figure
                assert 0 <= y <= height


def test_cli_paths_are_relative_to_the_config(dataset: str, tmp_path: Path) -> None:
    config_path = tmp_path / "sub" / "sim.yaml"
    config_path.parent.mkdir()
    relative = os.path.relpath(dataset, config_path.parent)
    config_path.write_text(yaml.safe_dump({"dataset": relative, "cluster": {"num_workers": 1}}))
    assert main(["simulate", "run", "-c", str(config_path), "-o", str(tmp_path / "r.html")]) == 0
    assert json.loads((tmp_path / "r.json").read_text())["samples"] == N


def test_cli_run_reports_a_bad_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config_path = tmp_path / "sim.yaml"
    config_path.write_text("dataset: x\nread: {batch_size: 0}\n")
    assert main(["simulate", "run", "-c", str(config_path), "-o", str(tmp_path / "r.html")]) == 1
    assert "read.batch_size=0" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


def test_remote_dataset_on_s3(s3_server: Any, obstore_in_process: None, tmp_path: Path) -> None:
    """An S3 dataset (the SeaweedFS test server): the index and one chunk are read through the real store, the
    rest is synthesised; every sample is decoded by the real decoder and every chunk's recorded bytes move."""
    url = f"s3://{s3_server.bucket}/simulate-{tmp_path.name}"
    options = s3_server.options()
    litstream.optimize(
        _sample, list(range(N)), url, chunk_size=CHUNK, num_workers=1, storage_options=options, verbose=False,
        chunk_format="pytree",
    )  # fmt: skip
    config_path = tmp_path / "sim.yaml"
    assert main(["simulate", "init", url, "-c", str(config_path), "--storage-options", json.dumps(options)]) == 0
    raw = yaml.safe_load(config_path.read_text())
    assert raw["storage_options"] == options
    raw["cluster"]["num_workers"] = 1
    report = simulate(raw)
    index = run_sync(load_index, store_for(url, options))
    assert report.samples == index.num_items == N
    assert report.config["chunks"] == "synthesise"
    assert options["aws_secret_access_key"] not in report.to_json()  # credentials stay out of reports
    assert report.requests == len(index.chunks) + 1  # index.json, then each chunk once
    chunk_bytes = sum(c.chunk_bytes for c in index.chunks)
    assert chunk_bytes < report.bytes < chunk_bytes + 10_000  # the chunks' recorded sizes, plus index.json


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("drop_last", [None, False, True])
def test_order_per_rank_is_the_dataloaders_with_workers(
    dataset: str, shuffle: bool, drop_last: bool | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With DataLoader workers: each rank's batches, in the order a real ``StreamingDataLoader`` (worker
    processes, round-robin over workers) yields them; ``drop_last=None`` is both sides' default."""
    world, workers, batch = 2, 2, 7
    read = ReadSettings(batch_size=batch, shuffle=shuffle, seed=5, drop_last=drop_last)
    cluster = ClusterModel(ranks_per_node=world, num_workers=workers)
    report = simulate(SimulationConfig(dataset, chunks="read", cluster=cluster, read=read, record_key="id"))
    for rank in range(world):
        monkeypatch.setenv("WORLD_SIZE", str(world))
        monkeypatch.setenv("GLOBAL_RANK", str(rank))
        ds = litstream.StreamingDataset(dataset, shuffle=shuffle, seed=5, drop_last=drop_last)
        loader = litstream.StreamingDataLoader(ds, batch_size=batch, num_workers=workers)
        served = [i for b in loader for i in b["id"].tolist()]
        assert report.ranks[rank].order == served


@pytest.mark.parametrize(
    ("bandwidth", "stalls"),
    [(1e3, True), (1e12, False)],
    ids=["network-bound", "device-bound"],
)
def test_a_slow_store_stalls_the_device(dataset: str, bandwidth: float, stalls: bool) -> None:
    network = NetworkModel(rtt=0.001, jitter=0.0, connection_bandwidth=bandwidth, node_bandwidth=1e12)
    costs = CostModel(device_time_per_sample=0.01, decode_time_per_sample=0.0)
    report = simulate(SimulationConfig(dataset, network=network, costs=costs))
    assert (report.stall_fraction > 0.5) is stalls
    assert (report.stall_fraction < 0.01) is not stalls


def _tokens(i: int) -> Any:
    import numpy as np

    return np.arange(i * 100, i * 100 + 37 + i % 5, dtype=np.int64)


def test_token_dataset_streams_windows(tmp_path: Path) -> None:
    """``block_size`` streams a token dataset as windows (TokensLoader), as many as StreamingDataset serves;
    its chunks cannot be synthesised (each records its token count), which is refused by name."""
    data = str(tmp_path / "tokens")
    litstream.optimize(
        _tokens, list(range(60)), data, chunk_size=10, item_loader=litstream.TokensLoader(), num_workers=1,
        verbose=False,
    )  # fmt: skip
    expected = len(litstream.StreamingDataset(data, item_loader=litstream.TokensLoader(16)))
    read = ReadSettings(block_size=16, batch_size=4, shuffle=True)
    report = simulate(SimulationConfig(data, chunks="read", cluster=ClusterModel(num_workers=2), read=read))
    assert report.samples == expected
    with pytest.raises(litstream.ConfigurationError, match="token dataset"):
        simulate(SimulationConfig(data, chunks="synthesise", read=read))


def test_arrow_rows_stream_when_read_and_are_refused_by_name_when_synthesised(tmp_path: Path) -> None:
    """optimize's default layout for these samples (Arrow rows) is simulated from its real chunks; synthesising
    would need an Arrow payload per chunk, which is refused by name."""
    data = str(tmp_path / "rows")
    litstream.optimize(_sample, list(range(N)), data, chunk_size=CHUNK, num_workers=1, verbose=False)
    read = ReadSettings(batch_size=4)
    report = simulate(SimulationConfig(data, chunks="read", read=read))
    assert report.samples == N
    with pytest.raises(litstream.ConfigurationError, match="Arrow chunks"):
        simulate(SimulationConfig(data, chunks="synthesise", read=read))


@pytest.mark.parametrize(
    "chunk",
    [{"chunk_size": 10**9, "chunk_bytes": 100}, {"chunk_size": 1, "chunk_bytes": 2**40}],
    ids=["items", "bytes"],
)
def test_an_impossible_index_is_refused_before_anything_is_synthesised(
    dataset: str, tmp_path: Path, chunk: dict[str, int]
) -> None:
    index = json.loads(Path(dataset, "index.json").read_text())
    index["chunks"].append({**index["chunks"][0], "filename": "chunk-9-9.bin", **chunk})
    hostile = tmp_path / "index.json"
    hostile.write_text(json.dumps(index))
    with pytest.raises(litstream.FormatError, match=r"chunks\[15\]|chunk-9-9\.bin"):  # the index's check or ours
        simulate(SimulationConfig(dataset, chunks="synthesise", index_path=str(hostile)))
