"""Raw streaming of never-optimized files."""
