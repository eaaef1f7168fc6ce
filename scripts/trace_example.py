"""Record the example trace of ``docs/tracing.md``: a StreamingDataLoader (2 workers) over an S3 dataset.

Starts SeaweedFS (the test suite's S3 server, ``tests/servers.py``; ``scripts/install_servers.sh``
installs it), writes a zstd-compressed dataset of 32 chunks to it, enables the tracer, reads one
epoch with a small cache (so chunks are deleted as they are released), then writes the merged trace
and its rendering::

    python scripts/trace_example.py docs/img/trace-example.json docs/img/trace-example.png
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _sample(i: int) -> dict[str, Any]:
    rng = np.random.default_rng(i)
    return {"index": i, "image": rng.integers(0, 255, (64, 64, 3), dtype=np.uint8)}


def main() -> None:
    from trace_to_png import render

    import litstream
    from litstream.debugger import enable_tracer, merge_traces
    from servers import seaweedfs

    trace, png = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    with tempfile.TemporaryDirectory() as tmp, seaweedfs(Path(tmp)) as s3:
        url, options = f"s3://{s3.bucket}/trace-example", s3.options()
        litstream.optimize(fn=_sample, inputs=list(range(512)), output_dir=url, chunk_size=16, num_workers=2,
                           compression="zstd", storage_options=options)  # fmt: skip
        logger = enable_tracer("chunk", log_file=str(trace), flush_interval=0)
        dataset = litstream.StreamingDataset(url, storage_options=options, cache_dir=Path(tmp) / "cache",
                                             max_cache_size="1MB", shuffle=True)  # fmt: skip
        loader = litstream.StreamingDataLoader(dataset, batch_size=32, num_workers=2)
        logger.info("epoch 1 starts")
        batches = sum(1 for _ in loader)
        logger.info(f"epoch 1 done: {batches} batches")
        merge_traces()
        enable_tracer("off", log_file=str(trace))
    for part in trace.parent.glob(f"{trace.stem}.pid*{trace.suffix}"):
        part.unlink()
    render(trace, png, "litstream trace: StreamingDataLoader, 2 workers, S3 (rendering of the trace JSON)")
    print(trace, png)


if __name__ == "__main__":
    main()
