"""The process runner of ``optimize`` / ``map``: workers, input feeds, multi-node."""
