"""How right is ``litstream simulate``? Predicted vs measured epoch time and time to first batch.

Three configurations, each measured with a real ``StreamingDataLoader`` (one rank, shuffled, batch 16, a
"device" that sleeps ``--device`` seconds per sample) in a fresh interpreter, and predicted by ``simulate()``
with the same settings, the device's measured time per sample (what the sleeps actually took: a sleep on
a loaded machine wakes late, and the device is an input of the simulator, not a prediction) and the costs
``calibrate()`` measured on this machine (``network=True``: the store's round trip and per-connection
bandwidth; ``startup=True``: the loader's and a worker's start-up):

* ``local w=0``: a local dataset, no workers;
* ``s3 w=2``: the dataset on SeaweedFS (``tests/servers.py``), 2 workers;
* ``proxy w=2``: the same through ``bench/latency_proxy.py`` (``--delay`` seconds added each way), 2 workers.

Each measured case runs ``--repeats`` times; the fastest epoch and the fastest first batch are kept (the
machine this was written on is shared, so slower runs mostly measure other people's load). Each line also
checks that the predicted order of samples equals the measured one. Prints a Markdown table
(docs/simulate.md quotes it) and writes ``--out`` (JSON).

    .venv/bin/python bench/simulate_validate.py                       # 3000 samples of 8 KB, 60 chunks
    .venv/bin/python bench/simulate_validate.py --samples 6000 --device 0.001
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))

_MEASURE = r"""
import json, sys, time
import litstream
args = json.loads(sys.argv[1])
ds = litstream.StreamingDataset(args["url"], shuffle=True, seed=3, storage_options=args["options"])
loader = litstream.StreamingDataLoader(ds, batch_size=args["batch"], num_workers=args["workers"])
step = args["device"]
start = time.perf_counter()
first = None
order = []
device = 0.0
for batch in loader:
    if first is None:
        first = time.perf_counter() - start
    order.extend(batch["id"].tolist())
    t = time.perf_counter()
    time.sleep(step * len(batch["id"]))
    device += time.perf_counter() - t
print(json.dumps({"epoch": time.perf_counter() - start, "first": first, "order": order, "device": device}))
"""


def _sample(i: int) -> dict[str, Any]:
    return {"id": i, "payload": random.Random(i).randbytes(8000)}


def _measure(url: str, options: dict[str, Any], workers: int, batch: int, device: float) -> dict[str, Any]:
    spec = json.dumps({"url": url, "options": options, "workers": workers, "batch": batch, "device": device})
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    out = subprocess.run([sys.executable, "-c", _MEASURE, spec], capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"measured run failed: {out.stderr[-2000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _predict(url: str, options: dict[str, Any], workers: int, batch: int, device: float, probes: int) -> Any:
    from litstream.simulate import (
        ClusterModel,
        CostModel,
        NetworkModel,
        ReadSettings,
        SimulationConfig,
        calibrate,
        simulate,
    )

    base = SimulationConfig(
        url,
        chunks="read",
        storage_options=options,
        cluster=ClusterModel(num_workers=workers, prefetch_factor=2),
        read=ReadSettings(batch_size=batch, shuffle=True, seed=3),
        record_key="id",
    )
    # the probes run these settings, as many as the measured runs
    measured = calibrate(base, chunks=5, network=True, startup=True, probes=probes)
    config = dataclasses.replace(
        base,
        costs=CostModel(device_time_per_sample=device, **measured.costs()),
        network=NetworkModel(jitter=0.0, **measured.network()),
    )
    return simulate(config), measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=3000)
    parser.add_argument("--chunk-size", type=int, default=50)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--device", type=float, default=0.001, help="device seconds per sample (default 0.001)")
    parser.add_argument("--delay", type=float, default=0.01, help="proxy delay each way, seconds (default 0.01)")
    parser.add_argument("--repeats", type=int, default=3, help="measured runs per case; the fastest is kept")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "simulate_validate.json"))
    args = parser.parse_args()

    import litstream
    from servers import free_port, seaweedfs

    rows: list[dict[str, Any]] = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        local = str(Path(tmp, "ds"))
        litstream.optimize(
            _sample, list(range(args.samples)), local, chunk_size=args.chunk_size, num_workers=1, verbose=False
        )
        with seaweedfs(Path(tmp, "s3"), bucket="simval") as server:
            options = server.options()
            url = "s3://simval/ds"
            litstream.optimize(
                _sample, list(range(args.samples)), url, chunk_size=args.chunk_size, num_workers=1,
                storage_options=options, verbose=False,
            )  # fmt: skip
            port = free_port()
            target = server.endpoint.rsplit("/", 1)[-1]
            proxy = subprocess.Popen(
                [sys.executable, str(REPO / "bench" / "latency_proxy.py"), "--port", str(port), "--target", target,
                 "--delay", str(args.delay)],
                stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
            try:
                assert proxy.stdout is not None
                if not proxy.stdout.readline().startswith("ready"):
                    raise RuntimeError("the latency proxy did not start")
                proxied = {**options, "endpoint_url": f"http://127.0.0.1:{port}"}
                cases = [("local w=0", local, {}, 0), ("s3 w=2", url, options, 2), ("proxy w=2", url, proxied, 2)]
                for name, where, opts, workers in cases:
                    runs = [_measure(where, opts, workers, args.batch, args.device) for _ in range(args.repeats)]
                    real = min(runs, key=lambda r: r["epoch"])
                    real["first"] = min(r["first"] for r in runs)
                    # the device's own time, as the fastest run's sleeps took it (a sleep on a loaded machine
                    # wakes late): the simulator is given the device, it predicts the loading around it
                    device = real["device"] / len(real["order"])
                    report, measured = _predict(where, opts, workers, args.batch, device, args.repeats)
                    rank = report.ranks[0]
                    rows.append(
                        {
                            "case": name,
                            "measured_epoch": real["epoch"],
                            "predicted_epoch": report.epoch_seconds,
                            "epoch_error": report.epoch_seconds / real["epoch"] - 1,
                            "measured_first": real["first"],
                            "predicted_first": rank.time_to_first_batch,
                            "first_error": (rank.time_to_first_batch or 0.0) / real["first"] - 1,
                            "order_equal": rank.order == real["order"],
                            "device_time_per_sample": device,
                            "calibration": {**measured.costs(), **measured.network()},
                            "simulation_seconds": report.real_seconds,
                        }
                    )
                    print(json.dumps({k: v for k, v in rows[-1].items()}), flush=True)
            finally:
                proxy.terminate()
                proxy.wait(10)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(
        json.dumps(
            {
                "args": vars(args),
                "load_before": load_before,
                "load_after": os.getloadavg(),
                "time": time.time(),
                "rows": rows,
            },
            indent=1,
        )
    )
    print("\n| configuration | epoch measured | epoch predicted | error | first batch measured | predicted | error "
          "| order equal |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['case']} | {r['measured_epoch']:.2f} s | {r['predicted_epoch']:.2f} s | {r['epoch_error']:+.0%} "
            f"| {r['measured_first']:.3f} s | {r['predicted_first']:.3f} s | {r['first_error']:+.0%} "
            f"| {'yes' if r['order_equal'] else 'NO'} |"
        )
    print(f"\nload average before {load_before}, after {os.getloadavg()} ({os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
