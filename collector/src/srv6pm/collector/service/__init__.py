"""The collector's use case: consume, write, commit."""
