# ruff: noqa
# LitData 0.2.76 README, "LLM Pre-training": tokenize zstd-compressed JSON-lines files into a
# TokensLoader dataset, then stream windows of tokens. The README's two snippets, as one script, with
# sizes and paths changed so that it runs in a test: the raw files are made by the test, Tokenizer is
# the small one in tokenizer.py next to this file, chunks of 9 * 20 tokens instead of 2049 * 8012,
# blocks of 8 + 1 instead of 2048 + 1, 1 optimize worker (LitData's several workers share a queue,
# so which tokens land in which chunk varies from run to run), 2 loader workers, the inputs sorted
# (rglob order depends on the file system), and the loop records the batches and prints them.
# tests/test_litdata_readme_scripts.py runs it with LitData and with litstream.
import json
from pathlib import Path
import zstandard as zstd
from litdata import optimize, TokensLoader
from tokenizer import Tokenizer
from functools import partial


# 1. Define a function to convert the text within the jsonl files into tokens
def tokenize_fn(filepath, tokenizer=None):
    with zstd.open(open(filepath, "rb"), "rt", encoding="utf-8") as f:
        for row in f:
            text = json.loads(row)["text"]
            if json.loads(row)["meta"]["redpajama_set_name"] == "RedPajamaGithub":
                continue  # exclude the GitHub data since it overlaps with starcoder
            text_ids = tokenizer.encode(text, bos=False, eos=True)
            yield text_ids


if __name__ == "__main__":
    # 2. Generate the inputs (we are going to optimize all the compressed json files from SlimPajama dataset )
    input_dir = "./slimpajama-raw"
    inputs = sorted(str(file) for file in Path(f"{input_dir}/SlimPajama-627B/train").rglob("*.zst"))

    # 3. Store the optimized data wherever you want under "/teamspace/datasets" or "/teamspace/s3_connections"
    outputs = optimize(
        fn=partial(
            tokenize_fn, tokenizer=Tokenizer(f"{input_dir}/checkpoints/Llama-2-7b-hf")
        ),  # Note: You can use HF tokenizer or any others
        inputs=inputs,
        output_dir="./slimpajama-optimized/train",
        chunk_size=(9 * 20),
        # This is important to inform LitData that we are encoding contiguous 1D array (tokens).
        # LitData skips storing metadata for each sample e.g all the tokens are concatenated to form one large tensor.
        item_loader=TokensLoader(),
        num_workers=1,
    )

    import os
    from litdata import StreamingDataset, StreamingDataLoader, TokensLoader
    from tqdm import tqdm

    # Increase by one because we need the next word as well
    dataset = StreamingDataset(
        input_dir=f"./slimpajama-optimized/train",
        item_loader=TokensLoader(block_size=8 + 1),
        shuffle=True,
        drop_last=True,
    )

    train_dataloader = StreamingDataLoader(dataset, batch_size=8, pin_memory=True, num_workers=2)

    # Iterate over the SlimPajama dataset
    batches = []
    for batch in tqdm(train_dataloader):
        batches.append(batch.tolist())
    print(json.dumps(batches))
