"""The parts of bench/forwarding.py: what the router, the flows and the frames are (common,
frames, groups), r1 driven through its node manager (r1), one measurement and the bpf_stats pass
(measure), and the summary of a run (summary)."""
