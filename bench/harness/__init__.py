"""What every benchmark of bench/ shares.

- run: errors, commands, progress lines, signals, root, the run id and the main wrapper
  (``execute``) that writes the JSON and prints the report;
- provenance: the machine, the git revision, the objects and sources measured;
- stats: medians, quartiles, percentiles, ratios paired by round;
- pinning: which core does what, taskset, RPS masks;
- meters: /proc readings (core idle and steal, backlog drops, process CPU, snmp6, RSS);
- trials: rounds of configurations alternated A B A B, and rate ladders with bisection;
- topology: a veth pair of namespaces, a lab of srv6pm.lab brought up and always torn down;
- generators: the C generators and eBPF objects of bench/, compiled when stale;
- bpf: bpf_stats, a NET_RX softirq time probe, program run times;
- report: Markdown tables and the results file.
"""
