"""litstream: chunked binary shards (LitData's format) streamed into PyTorch and async services.

The public API; everything else lives in private modules.
"""

from __future__ import annotations

from ._combined_dataset import CombinedStreamingDataset as CombinedStreamingDataset
from ._dataloader import StreamingDataLoader as StreamingDataLoader
from ._dataset import StreamingDataset as StreamingDataset
from ._errors import ConfigurationError as ConfigurationError
from ._errors import DatasetNotFoundError as DatasetNotFoundError
from ._errors import DuplicateKeyError as DuplicateKeyError
from ._errors import EncryptionError as EncryptionError
from ._errors import FormatError as FormatError
from ._errors import KeyNotFoundError as KeyNotFoundError
from ._errors import LitstreamError as LitstreamError
from ._errors import ObjectNotFoundError as ObjectNotFoundError
from ._errors import OutputNotEmptyError as OutputNotEmptyError
from ._errors import PlanError as PlanError
from ._errors import RetriesExhaustedError as RetriesExhaustedError
from ._errors import StorageError as StorageError
from ._errors import WorkerError as WorkerError
from ._media_collate import litdata_collate as litdata_collate
from ._media_folder import iter_webdataset_tar as iter_webdataset_tar
from ._media_folder import list_media_folder as list_media_folder
from ._parallel_dataset import ParallelStreamingDataset as ParallelStreamingDataset
from ._split import train_test_split as train_test_split
from .format._encryption import Encryption as Encryption
from .format._encryption import FernetEncryption as FernetEncryption
from .format._encryption import RSAEncryption as RSAEncryption
from .format._loaders import PyTreeLoader as PyTreeLoader
from .format._loaders import TokensLoader as TokensLoader
from .format._media_audio import Audio as Audio
from .format._media_graph import Graph as Graph
from .format._media_image import Image as Image
from .format._media_image import Jpeg as Jpeg
from .format._media_image import JpegArray as JpegArray
from .format._media_image import Pil as Pil
from .format._media_image import Tiff as Tiff
from .format._media_mesh import Mesh as Mesh
from .format._media_mesh import Pdf as Pdf
from .format._media_nifti import Nifti as Nifti
from .format._media_tensor import Tensor as Tensor
from .format._media_text import File as File
from .format._media_text import Text as Text
from .format._media_video import Video as Video
from .format._parquet import ParquetLoader as ParquetLoader
from .read._astream import SampleStream as SampleStream
from .read._astream import astream as astream
from .storage._resolver import Dir as Dir
from .storage._store import LocalFileStore as LocalFileStore
from .storage._store import ObstoreStore as ObstoreStore
from .storage._store import Store as Store
from .storage._walk import walk as walk
from .write._complete import complete_dataset as complete_dataset
from .write._map import map as map
from .write._merge_datasets import merge_datasets as merge_datasets
from .write._optimize import optimize as optimize
from .write._parquet_index import index_parquet_dataset as index_parquet_dataset
from .write._summary import RunSummary as RunSummary
from .write._summary import WorkerSummary as WorkerSummary
from .write._update import build_keys_index as build_keys_index
from .write._update import dataset_update as dataset_update
from .write._uploader import AsyncUploader as AsyncUploader
from .write._uploader import UploaderStatistics as UploaderStatistics
from .write._writer import ChunkWriter as ChunkWriter

__version__ = "0.1.0"

__all__ = [
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


def _fix_module_names() -> None:
    for name in __all__:
        obj = globals()[name]
        if getattr(obj, "__module__", "").startswith("litstream."):
            try:
                obj.__module__ = "litstream"
            except (AttributeError, TypeError):  # pragma: no cover
                pass


_fix_module_names()
