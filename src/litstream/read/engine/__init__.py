"""Bytes into samples: ordered chunk prefetch, decoding, the sync pump, memory budgets."""
