"""``litstream simulate tune|calibrate``, the CLI on local, S3 and ``hf://`` datasets, and the sample order
the simulator predicts for the three configurations ``bench/simulate_validate.py`` times (local w=0, S3 w=2,
S3 behind the latency proxy w=2) against the order a real ``StreamingDataLoader`` yields.

No test here times anything real: virtual seconds are the model's output, and only they are compared.
"""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

import litstream
from dataset_files import data_files
from litstream._cli._main import main
from litstream._core._bridge import run_sync
from litstream._sim import _calibrate
from litstream.simulate import (
    ClusterModel,
    CostModel,
    NetworkModel,
    ReadSettings,
    SimulationConfig,
    calibrate,
    simulate,
    tune,
)
from servers import free_port, hub_http_server

if TYPE_CHECKING:
    from collections.abc import Iterator

N = 480
CHUNK = 40  # 12 chunks
PROXY = Path(__file__).resolve().parents[2] / "bench" / "latency_proxy.py"


def _sample(i: int) -> dict[str, Any]:
    return {"id": i, "payload": random.Random(i).randbytes(300)}


@pytest.fixture(scope="module", params=[None, "zstd"], ids=["raw", "zstd"])
def dataset(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("tuneds") / "ds"
    litstream.optimize(
        _sample, list(range(N)), str(out), chunk_size=CHUNK, num_workers=1, compression=request.param, verbose=False,
        chunk_format="pytree",  # simulate synthesises chunks from a pytree item (Arrow chunks: chunks="read")
    )  # fmt: skip
    return str(out)


def _slow_store(dataset: str, **read: Any) -> SimulationConfig:
    """One worker fetching one chunk at a time over 50 ms round trips: the device waits; more workers help."""
    return SimulationConfig(
        dataset,
        chunks="synthesise",
        cluster=ClusterModel(num_workers=1, prefetch_factor=1),
        read=ReadSettings(batch_size=8, max_pre_download=1, **read),
        costs=CostModel(device_time_per_sample=0.001, decode_time_per_sample=0.0),
        network=NetworkModel(rtt=0.05, jitter=0.0),
    )


def _with(config: SimulationConfig, settings: dict[str, Any]) -> SimulationConfig:
    cluster = dataclasses.replace(
        config.cluster, num_workers=settings["num_workers"], prefetch_factor=settings["prefetch_factor"]
    )
    read = dataclasses.replace(
        config.read,
        max_pre_download=settings["max_pre_download"],
        batch_size=settings["batch_size"],
        max_cache_size=settings["max_cache_size"],
    )
    return dataclasses.replace(config, cluster=cluster, read=read)


def test_tune_recommends_what_a_rerun_confirms(dataset: str) -> None:
    config = _slow_store(dataset)
    report = tune(config, knobs=("num_workers", "max_pre_download", "prefetch_factor", "batch_size"))
    assert report.recommended  # a starved device: some change helps
    assert report.speedup > 1.02
    assert report.best.epoch_seconds < report.baseline.epoch_seconds
    for knob, value in report.recommended.items():
        assert report.best.settings[knob] == value != report.baseline.settings[knob]
    rerun = simulate(_with(config, report.best.settings))  # the recommended settings, simulated afresh
    assert rerun.epoch_seconds == pytest.approx(report.best.epoch_seconds, rel=0.05)
    assert rerun.samples == N
    # every trial of a knob's sweep differs from the trial its sweep started from in that knob only
    for knob, runs in report.sweeps.items():
        start = runs[0].settings
        for trial in runs[1:]:
            assert trial.knob == knob
            assert {k for k in start if trial.settings[k] != start[k]} == {knob}


def test_tune_stays_within_its_run_budget(dataset: str) -> None:
    report = tune(_slow_store(dataset), max_runs=3)
    assert len(report.trials) == 3
    assert report.skipped  # the rest is listed, not silently dropped
    assert all("=" in s for s in report.skipped)


def test_chunk_size_is_swept_only_where_chunks_can_be_recut(dataset: str) -> None:
    synthesised = tune(_slow_store(dataset), knobs=("chunk_size",))
    sizes = sorted(t.settings["chunk_size"] for t in synthesised.sweeps["chunk_size"])
    assert sizes == [10, 20, 40, 80, 160]
    read = dataclasses.replace(_slow_store(dataset), chunks="read")
    report = tune(read, knobs=("chunk_size", "max_cache_size"))
    assert set(report.not_swept) == {"chunk_size", "max_cache_size"}
    assert report.trials == [report.baseline]


def test_recut_chunks_keep_the_samples(dataset: str) -> None:
    from litstream._sim._dataset import prepare_dataset
    from litstream._sim._tune import rechunked

    base = run_sync(prepare_dataset, _slow_store(dataset))
    for size in (7, 40, 1000):
        recut = rechunked(base, size)
        assert recut.index.num_items == N
        assert [c.chunk_size for c in recut.index.chunks][:-1] == [size] * (len(recut.index.chunks) - 1)
        config = dataclasses.replace(_slow_store(dataset), record_key="id", chunks="synthesise")
        from litstream._sim._report import build_report
        from litstream._sim._run import run_cluster

        report = build_report(config, run_cluster(config, recut))
        assert report.samples == N  # every re-cut chunk decodes, each to its count of samples


def test_max_cache_size_is_swept_for_several_nodes_shuffling(dataset: str) -> None:
    config = dataclasses.replace(
        _slow_store(dataset, shuffle=True), cluster=ClusterModel(nodes=2, ranks_per_node=1, num_workers=1)
    )
    report = tune(config, knobs=("max_cache_size",))
    values = [t.settings["max_cache_size"] for t in report.sweeps["max_cache_size"]]
    assert values[0] is None
    assert len(values) == 3


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"knobs": ("threads",)}, "knobs='threads'"),
        ({"max_runs": 0}, "max_runs=0"),
        ({"tolerance": 1.5}, "tolerance=1.5"),
    ],
)
def test_bad_tune_bounds_are_named(dataset: str, kwargs: dict[str, Any], named: str) -> None:
    with pytest.raises(litstream.ConfigurationError, match=named):
        tune(_slow_store(dataset), **kwargs)


def _check_page(page: str, figures: int) -> None:
    assert "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")  # opens offline
    svgs = page.split("<svg")[1:]
    assert len(svgs) == figures
    for svg in svgs:
        root = ET.fromstring("<svg" + svg.split("</svg>")[0] + "</svg>")
        width, height = float(root.attrib["width"]), float(root.attrib["height"])
        for rect in root.iter("{http://www.w3.org/2000/svg}rect"):
            assert 0 <= float(rect.attrib["x"]) <= width
            assert 0 <= float(rect.attrib["y"]) <= float(rect.attrib["y"]) + float(rect.attrib["height"]) <= height


def _cli_round(dataset: str, tmp_path: Path, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """init, run and tune through the CLI; returns TUNE.json."""
    config_path = tmp_path / "sim.yaml"
    extra = ["--storage-options", json.dumps(options)] if options else []
    assert main(["simulate", "init", dataset, "-c", str(config_path), *extra]) == 0
    raw = yaml.safe_load(config_path.read_text())
    raw["cluster"]["num_workers"] = 1
    raw["network"]["jitter"] = 0.0
    config_path.write_text(yaml.safe_dump(raw))
    assert main(["simulate", "run", "-c", str(config_path), "-o", str(tmp_path / "report.html")]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["samples"] == N
    tune_args = ["--knobs", "num_workers,chunk_size", "--max-runs", "6"]
    assert main(["simulate", "tune", "-c", str(config_path), "-o", str(tmp_path / "tune.html"), *tune_args]) == 0
    result: dict[str, Any] = json.loads((tmp_path / "tune.json").read_text())
    _check_page((tmp_path / "tune.html").read_text(), figures=len(result["sweeps"]))
    assert 1 <= len(result["trials"]) <= 6
    assert result["baseline"]["epoch_seconds"] == pytest.approx(report["epoch_seconds"], rel=0.05)
    return result


def test_cli_tune_local(dataset: str, tmp_path: Path) -> None:
    result = _cli_round(dataset, tmp_path)
    assert "chunk_size" in result["not_swept"]  # a local dataset serves its real chunk files
    assert result["sweeps"]["num_workers"]


def test_cli_init_run_tune_s3(s3_server: Any, obstore_in_process: None, tmp_path: Path) -> None:
    url = f"s3://{s3_server.bucket}/simtune-{tmp_path.name}"
    options = s3_server.options()
    litstream.optimize(
        _sample, list(range(N)), url, chunk_size=CHUNK, num_workers=1, storage_options=options, verbose=False,
        chunk_format="pytree",
    )  # fmt: skip
    result = _cli_round(url, tmp_path, options)
    assert result["config"]["chunks"] == "synthesise"
    assert result["sweeps"]["chunk_size"][0]["settings"]["chunk_size"] == CHUNK
    assert options["aws_secret_access_key"] not in (tmp_path / "tune.json").read_text()


def test_cli_init_run_tune_hf(dataset: str, tmp_path: Path) -> None:
    with hub_http_server(tmp_path / "hub") as hub:
        target = hub.dataset_dir("org/simtune")
        for file in data_files(Path(dataset)):
            (target / file.name).write_bytes(file.read_bytes())
        result = _cli_round("hf://datasets/org/simtune", tmp_path, {"endpoint": hub.url})
    assert result["config"]["dataset"] == "hf://datasets/org/simtune"
    assert result["config"]["chunks"] == "synthesise"


def test_calibrate_writes_measured_costs_into_the_config(dataset: str, tmp_path: Path) -> None:
    config_path = tmp_path / "sim.yaml"
    assert main(["simulate", "init", dataset, "-c", str(config_path)]) == 0
    raw = yaml.safe_load(config_path.read_text())
    raw["costs"]["device_time_per_sample"] = 0.123
    config_path.write_text(yaml.safe_dump(raw))
    assert main(["simulate", "calibrate", "-c", str(config_path), "--chunks", "2", "--network"]) == 0
    text = config_path.read_text()
    assert text.startswith("# costs calibrated on")
    after = yaml.safe_load(text)
    assert after["costs"]["device_time_per_sample"] == 0.123  # the device's time stays the user's
    assert after["costs"]["decode_time_per_sample"] > 0
    compressed = json.loads(Path(dataset, "index.json").read_text())["config"]["compression"] is not None
    assert (after["costs"]["decode_time_per_byte"] > 0) is compressed  # nothing to decompress in a raw dataset
    assert after["network"]["rtt"] > 0
    assert after["network"]["connection_bandwidth"] > 0
    assert after["network"]["connect_time"] >= 0
    assert {k: v for k, v in after.items() if k not in ("costs", "network")} == {
        k: v for k, v in raw.items() if k not in ("costs", "network")
    }
    assert simulate(after).samples == N  # the calibrated config runs


def test_calibrate_counts_what_it_read(dataset: str) -> None:
    measured = calibrate(SimulationConfig(dataset), chunks=2)
    assert measured.chunks == 2
    assert measured.samples == 2 * CHUNK
    index = json.loads(Path(dataset, "index.json").read_text())
    assert measured.content_bytes == sum(c["chunk_bytes"] for c in index["chunks"][:2])
    assert measured.rtt is None
    assert measured.connect_time is None
    assert measured.network() == {}
    with pytest.raises(litstream.ConfigurationError, match="chunks=0"):
        calibrate(SimulationConfig(dataset), chunks=0)
    with pytest.raises(litstream.ConfigurationError, match="probes=0"):
        calibrate(SimulationConfig(dataset), startup=True, probes=0)


@pytest.fixture
def proxy(s3_server: Any) -> Iterator[str]:
    """``bench/latency_proxy.py`` in front of the S3 server (+10 ms each way); its endpoint URL."""
    port = free_port()
    target = s3_server.endpoint.rsplit("/", 1)[-1]
    args = [sys.executable, str(PROXY), "--port", str(port), "--target", target, "--delay", "0.005"]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        assert process.stdout.readline().startswith("ready")
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)
        if process.stdout is not None:
            process.stdout.close()


@pytest.mark.parametrize("where", ["local-w0", "s3-w2", "proxy-w2"])
def test_predicted_order_is_the_loaders(
    where: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The three configurations the validation benchmark times: each rank's predicted order of samples is the
    order a real ``StreamingDataLoader`` (2 ranks, shuffled, batch 8) yields."""
    workers = 0 if where.endswith("w0") else 2
    options: dict[str, Any] = {}
    if where == "local-w0":
        url = str(tmp_path / "ds")
    else:
        s3 = request.getfixturevalue("s3_server")
        request.getfixturevalue("obstore_in_process")
        url = f"s3://{s3.bucket}/simorder-{where}-{tmp_path.name}"
        options = s3.options()
    litstream.optimize(
        _sample, list(range(N)), url, chunk_size=CHUNK, num_workers=1, storage_options=options, verbose=False,
        chunk_format="pytree",
    )  # fmt: skip
    if where == "proxy-w2":
        options = {**options, "endpoint_url": request.getfixturevalue("proxy")}
    world, batch = 2, 8
    read = ReadSettings(batch_size=batch, shuffle=True, seed=7)
    cluster = ClusterModel(ranks_per_node=world, num_workers=workers)
    config = SimulationConfig(
        url, chunks="read", storage_options=options, cluster=cluster, read=read, record_key="id"
    )  # real chunk bytes (a remote dataset's read into memory first): the recorded ids are the real ones
    report = simulate(config)
    for rank in range(world):
        monkeypatch.setenv("WORLD_SIZE", str(world))
        monkeypatch.setenv("GLOBAL_RANK", str(rank))
        ds = litstream.StreamingDataset(url, shuffle=True, seed=7, storage_options=options)
        loader = litstream.StreamingDataLoader(ds, batch_size=batch, num_workers=workers)
        served = [i for b in loader for i in b["id"].tolist()]
        assert len(served) == N // world
        assert report.ranks[rank].order == served


@pytest.mark.parametrize("workers", [0, 1])
def test_without_workers_the_rank_decodes_between_steps(dataset: str, workers: int) -> None:
    """``num_workers=0``: decoding and collating take the rank's own time, one after the other with the device's;
    with a worker they overlap with it (virtual seconds: the model's, exactly)."""
    costs = CostModel(device_time_per_sample=0.002, decode_time_per_sample=0.001, collate_time_per_sample=0.001)
    network = NetworkModel(rtt=0.0001, jitter=0.0)
    config = SimulationConfig(
        dataset, chunks="read", cluster=ClusterModel(num_workers=workers), costs=costs, network=network
    )
    report = simulate(config)
    serial = N * (0.002 + 0.001 + 0.001)
    if workers == 0:
        assert report.epoch_seconds >= serial
    else:
        assert N * 0.002 <= report.epoch_seconds < 0.8 * serial


@pytest.mark.parametrize("workers", [0, 2])
def test_start_up_costs_delay_the_first_batch_by_their_sum(dataset: str, workers: int) -> None:
    """The rank's set-up, a worker's start (only with workers), each session's open and its first request's
    connection each delay the first batch by their own amount (virtual seconds: exact)."""
    cluster = ClusterModel(num_workers=workers)

    def first(costs: CostModel, connect: float = 0.0) -> float:
        network = NetworkModel(rtt=0.01, jitter=0.0, connect_time=connect)
        config = SimulationConfig(dataset, chunks="read", cluster=cluster, costs=costs, network=network)
        return simulate(config).time_to_first_batch["max"]

    plain = first(CostModel())
    slow = first(CostModel(startup_time=0.25, worker_startup_time=0.5, open_time=0.125), connect=0.0625)
    assert slow == pytest.approx(plain + 0.25 + (0.5 if workers else 0.0) + 0.125 + 0.0625, abs=1e-9)


def test_calibrate_startup_probes_a_fresh_loader(tmp_path: Path) -> None:
    """``startup=True`` adds the two start-up costs (measured in fresh interpreters: one dataset is enough)."""
    dataset = str(tmp_path / "ds")
    litstream.optimize(
        _sample, list(range(N)), dataset, chunk_size=CHUNK, num_workers=1, verbose=False, chunk_format="pytree"
    )
    measured = calibrate(SimulationConfig(dataset), chunks=1, startup=True)
    costs = measured.costs()
    assert set(costs) == {
        "decode_time_per_byte",
        "decode_time_per_sample",
        "collate_time_per_sample",
        "startup_time",
        "worker_startup_time",
        "open_time",
    }
    assert all(0 <= v < 600 for v in costs.values())
    assert measured.network() == {}  # measured for the probes' arithmetic, reported only with network=True
    assert simulate(SimulationConfig(dataset, costs=CostModel(**costs))).samples == N


@pytest.mark.parametrize("workers", [0, 2])
def test_the_start_up_probe_reads_its_clock_while_the_loader_runs(tmp_path: Path, workers: int) -> None:
    """The probe's first batch is timed with the loader's workers still running: a dropped iterator joins
    them first, and that teardown (tens of milliseconds) was once counted as start-up."""
    dataset = str(tmp_path / "ds")
    litstream.optimize(_sample, list(range(N)), dataset, chunk_size=CHUNK, num_workers=1, verbose=False)
    config = SimulationConfig(dataset, cluster=ClusterModel(num_workers=workers))
    probe = _calibrate._probe(config, "loader", workers)
    assert probe["workers_running"] == workers
    assert probe["seconds"] > 0
