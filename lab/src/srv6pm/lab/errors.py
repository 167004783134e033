"""The lab's one exception, in a module of its own: the programs run inside namespaces
(traffic, tcp) raise it from their host-side helpers without importing the topology's
pydantic models."""

from __future__ import annotations


class LabError(Exception):
    """Any lab failure with a message meant for the user."""
