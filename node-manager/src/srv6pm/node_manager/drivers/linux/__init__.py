"""The Linux kernel data plane: netlink (pyroute2) for routes, eBPF on tc for monitoring."""
