"""Infrastructure every room uses: errors, environment, tracing, distributed context, the sync/async bridge."""
