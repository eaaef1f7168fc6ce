"""Indexing of Parquet files, Hub repositories and raw file trees, shared by read and write."""
