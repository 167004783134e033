// SPDX-License-Identifier: GPL-2.0-only
/*
 * Time spent in the NET_RX softirq, per CPU, for the forwarding benchmark (bench/forwarding.py).
 *
 * Why: with RPS steering r1's receive queue to one core, everything r1 does for a forwarded
 * packet (IPv6 receive, route lookup, SRv6 encapsulation, tc egress, veth transmit) runs inside
 * NET_RX on that core. Its duration per forwarded packet is the router's cost per packet without
 * what the busy fraction also holds: idle entry and exit of a virtual CPU (HLT, IPI delivery)
 * and whatever else the scheduler puts on that core. This kernel has no IRQ time accounting, so
 * /proc/stat cannot give it.
 *
 * Two raw tracepoints; two per-CPU counters: total nanoseconds and number of softirq runs.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define NET_RX_SOFTIRQ 3

struct net_rx_time {
	__u64 start_ns; /* 0 when not inside NET_RX */
	__u64 total_ns;
	__u64 runs;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct net_rx_time);
} bench_net_rx SEC(".maps");

SEC("raw_tracepoint/softirq_entry")
int bench_softirq_entry(struct bpf_raw_tracepoint_args *ctx)
{
	__u32 zero = 0;
	struct net_rx_time *t;

	if (ctx->args[0] != NET_RX_SOFTIRQ)
		return 0;
	t = bpf_map_lookup_elem(&bench_net_rx, &zero);
	if (t)
		t->start_ns = bpf_ktime_get_ns();
	return 0;
}

SEC("raw_tracepoint/softirq_exit")
int bench_softirq_exit(struct bpf_raw_tracepoint_args *ctx)
{
	__u32 zero = 0;
	struct net_rx_time *t;

	if (ctx->args[0] != NET_RX_SOFTIRQ)
		return 0;
	t = bpf_map_lookup_elem(&bench_net_rx, &zero);
	if (t && t->start_ns) {
		t->total_ns += bpf_ktime_get_ns() - t->start_ns;
		t->runs += 1;
		t->start_ns = 0;
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
