"""Typed errors of the controller's use cases, mapped once to HTTP problem details (api/)."""

from __future__ import annotations


class ControllerError(Exception):
    """Base class; `title` is the problem type's short summary."""

    title = "Error"


class NotFound(ControllerError):
    title = "Not found"


class Conflict(ControllerError):
    """The request is valid but clashes with what exists (a name taken, an object in use)."""

    title = "Conflict"


class Invalid(ControllerError):
    """The request is well-formed but makes no sense against the domain (a SID no node holds)."""

    title = "Invalid desired state"


class Exhausted(ControllerError):
    """No identifier left to allocate (FlowMonIDs, SSIDs)."""

    title = "Identifiers exhausted"


class ResultsUnavailable(Exception):
    """The results store (InfluxDB) could not answer; the message says why. Not the request's
    fault: the desired state is still served."""
