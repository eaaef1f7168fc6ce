"""How long ``litstream simulate`` takes for a big cluster over a big index (docs/simulate.md quotes it).

Writes a tiny real dataset (its first sample is the template of every synthesised chunk), an ``index.json``
listing ``--samples`` samples in chunks of ``--chunk-size``, and simulates one FullShuffle epoch of
``--nodes`` x ``--gpus`` ranks with ``--workers`` DataLoader workers each, 100 ms round trips and a 3,000
requests/s limit. Prints the real seconds and the report's headline numbers as JSON.

    .venv/bin/python bench/simulate_scale.py                  # 8 x 8 x 2 workers, 1,000,000 samples
    .venv/bin/python bench/simulate_scale.py --workers 4
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Any

import litstream
from litstream.simulate import ClusterModel, NetworkModel, ReadSettings, SimulationConfig, simulate


def _sample(i: int) -> dict[str, Any]:
    return {"id": i, "x": bytes(1000)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--chunk-size", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "ds")
        litstream.optimize(_sample, list(range(10)), data, chunk_size=10, num_workers=1, verbose=False)
        with open(os.path.join(data, "index.json")) as f:
            index = json.load(f)
        first = index["chunks"][0]
        per_item = (first["chunk_bytes"] - 4 * (first["chunk_size"] + 2)) // first["chunk_size"]
        size = args.chunk_size
        count = -(-args.samples // size)
        index["chunks"] = [
            dict(first, filename=f"chunk-0-{i}.bin", chunk_size=n, chunk_bytes=4 * (n + 2) + per_item * n)
            for i in range(count)
            for n in [min(size, args.samples - i * size)]
        ]
        big = os.path.join(tmp, "big-index.json")
        with open(big, "w") as f:
            json.dump(index, f)
        config = SimulationConfig(
            data,
            chunks="synthesise",
            index_path=big,
            cluster=ClusterModel(nodes=args.nodes, ranks_per_node=args.gpus, num_workers=args.workers),
            read=ReadSettings(batch_size=32, shuffle=True),
            network=NetworkModel(rtt=0.1, rate_limit=3000, burst=100),
        )
        started = time.perf_counter()
        report = simulate(config)
        wall = time.perf_counter() - started
    out = {
        "cluster": f"{args.nodes}x{args.gpus}x{args.workers}",
        "index_samples": args.samples,
        "samples_served": report.samples,
        "real_seconds": round(wall, 2),
        "virtual_seconds": round(report.epoch_seconds, 3),
        "time_to_first_batch_max": round(report.time_to_first_batch["max"], 3),
        "stall_fraction": round(report.stall_fraction, 4),
        "requests": report.requests,
        "throttled": report.throttled,
        "load_average": os.getloadavg(),
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
