"""Opening a dataset: where it is, its index and version, its decoder, checks on what it holds."""
