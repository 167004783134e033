"""The node's use cases (apply state, read counters and blocks) over a data plane driver."""
