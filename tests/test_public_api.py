from __future__ import annotations

import litstream


def test_public_names_are_exactly_these() -> None:
    assert litstream.__all__ == sorted(litstream.__all__)
    assert litstream.__all__ == [
        "AsyncUploader",
        "Audio",
        "AudioSerializer",
        "BaseIndexer",
        "BaseReader",
        "Cache",
        "ChecksumError",
        "ChunkWaitTimeoutError",
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
        "FileIndexer",
        "FileMetadata",
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
        "NumaAffinity",
        "ObjectNotFoundError",
        "ObstoreStore",
        "OutputLockedError",
        "OutputNotEmptyError",
        "ParallelStreamingDataset",
        "ParquetLoader",
        "ParquetReader",
        "Pdf",
        "PickleRefusedError",
        "Pil",
        "PlanError",
        "RSAEncryption",
        "RetriesExhaustedError",
        "RunSummary",
        "SampleStream",
        "Serializer",
        "StorageError",
        "Store",
        "StreamingDataLoader",
        "StreamingDataset",
        "StreamingRawDataset",
        "TemporalArrayLoader",
        "Tensor",
        "Text",
        "Tiff",
        "TokensLoader",
        "UploaderStatistics",
        "VersionInfo",
        "VersionNotFoundError",
        "Video",
        "VideoSerializer",
        "WorkerError",
        "WorkerSummary",
        "astream",
        "breakpoint",
        "build_keys_index",
        "collect_garbage",
        "complete_dataset",
        "dataset_update",
        "get_gpu_affinity",
        "get_numa_affinity",
        "index_hf_dataset",
        "index_parquet_dataset",
        "is_complete_dataset",
        "iter_webdataset_tar",
        "list_media_folder",
        "list_versions",
        "litdata_collate",
        "map",
        "merge_datasets",
        "optimize",
        "optimize_hf",
        "set_allow_pickle",
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
