"""srv6pm collector: measurement records from Kafka to InfluxDB points, idempotently."""

__version__ = "0.1.0"
