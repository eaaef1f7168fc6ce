"""Which items a (rank, worker, epoch) reads and in which order, and resume state. Pure: no I/O."""
