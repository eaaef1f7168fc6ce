"""The torch faces: StreamingDataset, StreamingDataLoader, Combined / Parallel, raw dataset, collate."""
