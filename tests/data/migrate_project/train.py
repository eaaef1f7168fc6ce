# ruff: noqa
"""Prepares the dataset, then streams it the ways a training script does; prints what it saw as JSON."""

import json
import sys

import litdata as ld
from litdata.streaming import StreamingDataLoader
from litdata.streaming.dataset import StreamingDataset
from pipeline.prepare import prepare


def main(root):
    prepare(f"{root}/data")
    dataset = StreamingDataset(f"{root}/data", shuffle=True, seed=7)
    loader = StreamingDataLoader(dataset, batch_size=4, num_workers=0)
    batches = [batch["index"].tolist() for batch in loader]
    again = ld.StreamingDataset(input_dir=f"{root}/data")
    first = again[3]
    mixed = ld.CombinedStreamingDataset(
        [StreamingDataset(f"{root}/data"), ld.StreamingDataset(f"{root}/data", shuffle=True, seed=1)],
        seed=3,
        weights=(0.5, 0.5),
        iterate_over_all=False,
    )
    mixture = [int(sample["index"]) for _, sample in zip(range(20), mixed)]
    print(
        json.dumps(
            {
                "length": len(dataset),
                "batches": batches,
                "item3": [int(first["index"]), first["name"], first["features"].tolist()],
                "mixture": mixture,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1])
