"""Pure parts of the collector: records to InfluxDB points."""
