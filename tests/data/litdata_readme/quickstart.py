# ruff: noqa
# LitData 0.2.76 README, "Quick start": step 1 (optimize) and step 3 (stream during training), as one
# script. Changes to the README's code, all in sizes and paths so that it runs in a test: 100 inputs
# instead of 1000, 2 workers, a local folder (argv) instead of s3://my-bucket/fast_data, and the
# collate function keeps "index" so that the test can check the samples; the last lines print what
# the loop saw. tests/test_litdata_readme_scripts.py runs it with litstream.
import json
import sys

import numpy as np
import litdata as ld


def random_images(index):
    # Replace with your files: Image(path="photo.jpg") or Image(bytes=...).
    # Wrappers pick the serializer (a caption string is not an image).
    # quality/format encode JPEG — not uncompressed PIL RAW.
    array = np.random.randint(0, 256, (32, 32, 3), dtype=np.uint8)
    return {
        "index": index,
        "image": ld.Image(array=array, quality=95, format="jpeg"),
        "class": np.random.randint(10),
    }


# Custom collate function to handle the batch (optional)
def collate_fn(batch):
    return {
        "index": [sample["index"] for sample in batch],
        "image": [sample["image"] for sample in batch],
        "class": [sample["class"] for sample in batch],
    }


if __name__ == "__main__":
    output_dir = sys.argv[1]
    # Exactly one of chunk_bytes or chunk_size
    ld.optimize(
        fn=random_images,  # the function applied to each input
        inputs=list(range(100)),  # the inputs to the function (here it's a list of numbers)
        output_dir=output_dir,  # optimized data is stored here
        num_workers=2,  # the number of workers on the same machine
        chunk_bytes="64MB",  # default; see FAQ for larger samples
    )

    dataset = ld.StreamingDataset(
        output_dir,
        shuffle=True,
        drop_last=True,  # important for multi-GPU so every rank sees the same length
        seed=42,
    )

    dataloader = ld.StreamingDataLoader(dataset, batch_size=64, collate_fn=collate_fn)
    seen, shapes, classes = [], set(), set()
    for sample in dataloader:
        img, cls = sample["image"], sample["class"]
        seen += [int(i) for i in sample["index"]]
        shapes |= {tuple(np.asarray(i).shape) for i in img}
        classes |= {int(c) for c in cls}
    print(json.dumps({"indices": seen, "shapes": sorted(shapes), "classes": sorted(classes)}))
