"""The parts of bench/vpp_forwarding.py: the VPP under test with its packet generator streams
(router), the groups, configurations and one measurement (measure), and the summary of a run
(summary)."""
