"""Typed domain errors, mapped once to gRPC status codes in api/."""


class NodeManagerError(Exception):
    """Base of every error an operator is shown."""


class InvalidArgument(NodeManagerError):
    """The request itself is wrong (bad address, too many SIDs, duplicate name)."""


class FailedPrecondition(NodeManagerError):
    """The request is well-formed but this node cannot honour it now."""


class NotFound(NodeManagerError):
    """A named object (flow) does not exist on this node."""
