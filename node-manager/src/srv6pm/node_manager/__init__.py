"""srv6pm node manager: one per router; programs SRv6 policies, marking and per-flow counters."""

__version__ = "0.1.0"
