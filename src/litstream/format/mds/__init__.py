"""MosaicML MDS datasets."""
