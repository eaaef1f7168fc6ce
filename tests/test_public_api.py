from __future__ import annotations

import litstream


def test_public_names_are_exactly_these() -> None:
    assert litstream.__all__ == sorted(litstream.__all__)
    assert litstream.__all__ == [
        "AsyncUploader",
        "Audio",
        "ChunkWriter",
        "CombinedStreamingDataset",
        "ConfigurationError",
        "DatasetNotFoundError",
        "Dir",
        "DuplicateKeyError",
        "Encryption",
        "EncryptionError",
        "FernetEncryption",
        "File",
        "FormatError",
        "Graph",
        "Image",
        "Jpeg",
        "JpegArray",
        "KeyNotFoundError",
        "LitstreamError",
        "LocalFileStore",
        "Mesh",
        "Nifti",
        "ObjectNotFoundError",
        "ObstoreStore",
        "OutputNotEmptyError",
        "ParallelStreamingDataset",
        "ParquetLoader",
        "Pdf",
        "Pil",
        "PlanError",
        "RSAEncryption",
        "RetriesExhaustedError",
        "RunSummary",
        "SampleStream",
        "StorageError",
        "Store",
        "StreamingDataLoader",
        "StreamingDataset",
        "Tensor",
        "Text",
        "Tiff",
        "TokensLoader",
        "UploaderStatistics",
        "Video",
        "WorkerError",
        "WorkerSummary",
        "astream",
        "build_keys_index",
        "complete_dataset",
        "dataset_update",
        "index_parquet_dataset",
        "iter_webdataset_tar",
        "list_media_folder",
        "litdata_collate",
        "map",
        "merge_datasets",
        "optimize",
        "train_test_split",
        "walk",
    ]
    for name in litstream.__all__:
        assert getattr(litstream, name).__module__ == "litstream", name


def test_every_error_is_a_litstream_error_built_from_one_message() -> None:
    for name in litstream.__all__:
        obj = getattr(litstream, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, litstream.LitstreamError)
            err = obj("a message")
            assert str(err) == "a message"
    assert issubclass(litstream.FormatError, ValueError)
    assert issubclass(litstream.EncryptionError, litstream.FormatError)
    assert issubclass(litstream.DatasetNotFoundError, FileNotFoundError)
