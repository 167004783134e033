"""gRPC boundary: proto messages <-> domain objects, domain errors -> status codes."""
