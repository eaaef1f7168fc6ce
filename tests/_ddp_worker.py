"""One rank of the real two-process ``torch.distributed`` test in ``test_lengths_and_ddp.py``.

Usage: ``python _ddp_worker.py DATA_DIR OUT_JSON START_METHOD`` with ``MASTER_ADDR``, ``MASTER_PORT``,
``RANK`` and ``WORLD_SIZE`` in the environment (``env://`` rendezvous, gloo backend).

The process joins the group, then removes ``RANK``/``WORLD_SIZE`` (and LitData's ``GLOBAL_RANK``) from
its environment, so litstream can learn its place only from ``torch.distributed`` (as after
``init_process_group(init_method="tcp://...", rank=r, world_size=w)`` in an ``mp.spawn`` launcher).
It iterates one epoch of ``StreamingDataLoader(StreamingDataset(DATA_DIR, shuffle=True),
batch_size=4, num_workers=1)`` with DataLoader workers started by START_METHOD, all-gathers what
every rank saw and writes it as JSON to OUT_JSON.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import timedelta

import torch.distributed as dist

from litstream import StreamingDataLoader, StreamingDataset
from litstream._core._distributed import detect_distributed


def main(argv: list[str]) -> int:
    data_dir, out_path, start_method = argv[1], argv[2], argv[3]
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    for name in ("RANK", "WORLD_SIZE", "GLOBAL_RANK", "LOCAL_RANK"):
        os.environ.pop(name, None)
    env = detect_distributed()

    loader = StreamingDataLoader(
        StreamingDataset(data_dir, shuffle=True),
        batch_size=4,
        num_workers=1,
        multiprocessing_context=start_method,
    )
    announced = len(loader)
    items: list[int] = []
    sizes: list[int] = []
    for batch in loader:
        values = [int(v) for v in batch.tolist()]
        items.extend(values)
        sizes.append(len(values))

    mine = {
        "rank": rank,
        "detected": [env.rank, env.world_size],
        "announced": announced,
        "items": items,
        "sizes": sizes,
    }
    gathered: list[object] = [None] * world
    dist.all_gather_object(gathered, mine)
    dist.barrier()
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump({"rank": rank, "world": world, "gathered": gathered}, f)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
