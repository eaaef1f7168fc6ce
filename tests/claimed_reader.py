"""Run as a script by tests/read/test_claimed_items.py: read one dataset in a fresh process and report, as
one JSON line, how the read ended and how much the peak resident memory grew while it ran.

Argument: a JSON object with ``url``, ``shuffle`` and optionally ``storage_options``, ``cache_dir``,
``resume_workers`` (resume from a checkpoint taken with that many workers after one sample: an elastic
resume, since this read runs in the main process) and ``as_limit`` (bytes of address space: a regression
that allocates a claimed item count then fails with ``MemoryError`` instead of taking the machine down).
"""

from __future__ import annotations

import json
import resource
import sys


def main() -> None:
    config = json.loads(sys.argv[1])
    if config.get("as_limit"):
        resource.setrlimit(resource.RLIMIT_AS, (config["as_limit"], config["as_limit"]))
    from litstream import LitstreamError, StreamingDataset

    def dataset() -> StreamingDataset:
        return StreamingDataset(
            config["url"],
            storage_options=config.get("storage_options"),
            cache_dir=config.get("cache_dir"),
            shuffle=config["shuffle"],
            # The address-space limit above is a safety net against a regression, not a memory budget to plan
            # with: without this, the loader's budget would refuse the claimed chunk sizes before any read.
            max_memory="off",
        )

    ds = dataset()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    outcome: dict[str, object] = {}
    try:
        outcome["claimed"] = len(ds)  # opens the index (a local one may be refused here already)
        if config.get("resume_workers"):
            workers = config["resume_workers"]
            state = ds.state_dict(1, workers, 1, worker_samples_yielded=[1] + [0] * (workers - 1))
            ds = dataset()
            ds.load_state_dict(state)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        served = sum(1 for _ in ds)  # not list(ds): list() would size itself by len() first
        outcome.update(kind="data", served=served)
    except LitstreamError as exc:
        outcome.update(kind=type(exc).__name__, message=str(exc))
    except MemoryError as exc:
        outcome.update(kind="MemoryError", message=str(exc))
    outcome["growth"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    print(json.dumps(outcome))


if __name__ == "__main__":
    main()
