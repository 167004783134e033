"""The parts of bench/results_pipeline.py: records like a node's (workload), the servers and
the collectors under test (servers), and one module per phase (journal, throughput, latency,
breakdown)."""
