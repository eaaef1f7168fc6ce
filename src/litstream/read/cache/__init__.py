"""Local chunk files: the cache directory, eviction, the cached chunk source."""
