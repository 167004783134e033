"""srv6pm CLI: the operators' command line over the controller's REST API (docs/CLI.md)."""

__version__ = "0.1.0"
