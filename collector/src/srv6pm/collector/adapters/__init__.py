"""Kafka, InfluxDB and HTTP (metrics, health) around the collector."""
