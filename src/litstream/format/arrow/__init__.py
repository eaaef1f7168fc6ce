"""Arrow IPC chunks and Parquet files."""
