// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* An empty tc program: attached alone on r1's egress hook it measures what the hook itself
 * costs, the floor under any monitoring program there. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

SEC("tc")
int bench_empty(struct __sk_buff *skb)
{
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
