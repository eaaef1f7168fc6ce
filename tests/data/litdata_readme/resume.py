# ruff: noqa
# LitData 0.2.76 README, "Pause, resume data streaming", as written except for sizes and paths: the
# dataset path comes from argv instead of s3://my-bucket/my-data, 2 workers, batches of 4, a
# checkpoint every 3 batches instead of 1000, and two additions so that a test can check it: each
# batch's "x" values are printed (one JSON line per batch) and CRASH_AT=N stops the run at batch N as
# a crash would. tests/test_litdata_readme_scripts.py runs it with LitData and with litstream.
import json
import os
import sys

import torch
from litdata import StreamingDataset, StreamingDataLoader

dataset = StreamingDataset(sys.argv[1], shuffle=True)
dataloader = StreamingDataLoader(dataset, num_workers=2, batch_size=4)

# Restore the dataLoader state if it exists
if os.path.isfile("dataloader_state.pt"):
    state_dict = torch.load("dataloader_state.pt")
    dataloader.load_state_dict(state_dict)

# Iterate over the data
for batch_idx, batch in enumerate(dataloader):
    if batch_idx == int(os.environ.get("CRASH_AT", "-1")):
        os._exit(3)  # the process dies: nothing after the last checkpoint is kept
    print(json.dumps([int(v) for v in batch["x"]]), flush=True)

    # Store the state every 1000 batches
    if batch_idx % 3 == 0:
        torch.save(dataloader.state_dict(), "dataloader_state.pt")
