"""Adapters to the servers and stores around the node manager (its journal, Kafka, metrics)."""
