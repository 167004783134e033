// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * srv6pm per-flow alternate marking (RFC 9341) and counting on tc clsact hooks.
 *
 * A flow is the segment list carried in the outer SRH (RFC 8754). Two programs share the maps:
 *  - srv6pm_mark  (egress hook of the encapsulating node): colour of the current wall-clock
 *                  block, block = floor(unix_ns / period), colour = block % 2; sets the
 *                  "monitored" and colour bits in the outer Traffic Class and counts per flow
 *                  per colour.
 *  - srv6pm_count (ingress hook of transit and decapsulating nodes): counts packets whose
 *                  "monitored" bit is set, per flow, per the colour bit they carry.
 *
 * Lookup is O(1) in the number of flows: the SID list is folded into a 64-bit key for a hash map
 * whose value holds the full list, compared before counting, so a hash collision can never count
 * a packet against the wrong flow. Counters are per-CPU, indexed slot * 2 + colour.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/seg6.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define MAX_SEGMENTS 16
#define MAX_FLOWS 16384

#define ROLE_INGRESS 1
#define ROLE_TRANSIT 2
#define ROLE_EGRESS 3

/* Keep in sync with srv6pm.node_manager.drivers.linux.maps. */
struct flow_value {
	__u32 slot;
	__u8 role;
	__u8 nsegs;
	__u16 pad;
	struct in6_addr segs[MAX_SEGMENTS]; /* SRH order: segs[0] is the last segment */
};

struct counter {
	__u64 packets;
	__u64 bytes;
};

struct config {
	__u64 period_ns;
	__u64 tai_offset_ns; /* CLOCK_TAI - CLOCK_REALTIME */
	__u32 generation;    /* bumped on every change so cached colours are dropped */
	__u8 monitored_bit;  /* Traffic Class bits */
	__u8 colour_bit;
	__u16 pad;
};

/* The colour of the current block, flipped at every block edge by a kernel timer (bpf_timer in
 * this pinned map): packets read it instead of a clock (a clock read costs ~80 ns per packet in a
 * VM), and it keeps flipping while no node manager runs. */
struct clock_state {
	struct bpf_timer timer;
	__u64 next_edge_ns;
	__u32 generation; /* config generation the timer was armed for; 0: not armed */
	__u32 colour;
	__u64 edges; /* timer firings, for tests and diagnosis */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_FLOWS);
	__type(key, __u64);
	__type(value, struct flow_value);
} srv6pm_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_FLOWS * 2);
	__type(key, __u32);
	__type(value, struct counter);
} srv6pm_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} srv6pm_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct clock_state);
} srv6pm_clock SEC(".maps");

static __always_inline __u64 mix(__u64 h, __u64 word)
{
	h = (h ^ word) * 0xff51afd7ed558ccdULL;
	return h ^ (h >> 32);
}

struct parsed {
	struct ipv6hdr *ip6;
	struct ipv6_sr_hdr *srh;
	__u64 key;
	__u32 nsegs;
};

/* Parse Ethernet + IPv6 + SRH (directly after the IPv6 header, as Linux encapsulates) and fold
 * the segment list into a key. Returns 0 when the packet is not an SRv6 packet we can key. */
static __always_inline int parse_srh(struct __sk_buff *skb, struct parsed *p)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	struct ipv6_sr_hdr *srh = (void *)(ip6 + 1);

	if ((void *)(srh + 1) > data_end)
		return 0;
	if (eth->h_proto != bpf_htons(ETH_P_IPV6) || ip6->nexthdr != IPPROTO_ROUTING ||
	    srh->type != IPV6_SRCRT_TYPE_4)
		return 0;
	__u32 nsegs = (__u32)srh->first_segment + 1;
	if (nsegs > MAX_SEGMENTS)
		return 0;

	__u64 *words = (void *)(srh + 1);
	__u64 h = 0x9e3779b97f4a7c15ULL ^ nsegs;
	/* Unrolled by hand: each step checks its own constant bound, which the verifier follows. */
#define FOLD(i)                                                                      \
	if (i < nsegs) {                                                                 \
		if ((void *)(words + 2 * i + 2) > data_end)                              \
			return 0;                                                          \
		h = mix(mix(h, words[2 * i]), words[2 * i + 1]);                          \
	}
	FOLD(0) FOLD(1) FOLD(2) FOLD(3) FOLD(4) FOLD(5) FOLD(6) FOLD(7)
	FOLD(8) FOLD(9) FOLD(10) FOLD(11) FOLD(12) FOLD(13) FOLD(14) FOLD(15)
#undef FOLD
	p->ip6 = ip6;
	p->srh = srh;
	p->key = h;
	p->nsegs = nsegs;
	return 1;
}

/* The flow whose full segment list equals the packet's, or NULL. */
static __always_inline struct flow_value *lookup_flow(struct __sk_buff *skb, struct parsed *p)
{
	void *data_end = (void *)(long)skb->data_end;
	struct flow_value *flow = bpf_map_lookup_elem(&srv6pm_flows, &p->key);

	if (!flow || flow->nsegs != p->nsegs)
		return NULL;
	__u64 *words = (void *)(p->srh + 1);
	__u64 *want = (void *)flow->segs;
#define SAME(i)                                                                      \
	if (i < p->nsegs) {                                                              \
		if ((void *)(words + 2 * i + 2) > data_end)                              \
			return NULL;                                                       \
		if (words[2 * i] != want[2 * i] || words[2 * i + 1] != want[2 * i + 1])  \
			return NULL;                                                       \
	}
	SAME(0) SAME(1) SAME(2) SAME(3) SAME(4) SAME(5) SAME(6) SAME(7)
	SAME(8) SAME(9) SAME(10) SAME(11) SAME(12) SAME(13) SAME(14) SAME(15)
#undef SAME
	return flow;
}

static __always_inline void count(struct __sk_buff *skb, __u32 slot, __u32 colour)
{
	__u32 index = slot * 2 + colour;
	struct counter *c = bpf_map_lookup_elem(&srv6pm_counters, &index);

	if (c) {
		c->packets += 1;
		c->bytes += skb->len;
	}
}

static __always_inline __u8 traffic_class(const struct ipv6hdr *ip6)
{
	return (ip6->priority << 4) | (ip6->flow_lbl[0] >> 4);
}

#define CLOCK_MONOTONIC 1

/* Sets the colour of the current block; returns the time left until the next edge. The timer is
 * armed relative to that: the kernel keeps relative timers on the monotonic clock, which runs at
 * the wall clock's rate, and each edge recomputes the block from the wall clock, so an early or
 * late wake-up (or a clock step) is corrected at the next edge. */
static __always_inline __u64 set_block(struct clock_state *st, const struct config *cfg)
{
	__u64 now = bpf_ktime_get_tai_ns() - cfg->tai_offset_ns;
	__u64 block = now / cfg->period_ns;

	st->colour = block & 1;
	st->next_edge_ns = (block + 1) * cfg->period_ns;
	return st->next_edge_ns - now;
}

static int on_block_edge(void *map, __u32 *key, struct clock_state *st)
{
	__u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&srv6pm_config, &zero);

	if (!cfg || cfg->period_ns == 0)
		return 0;
	st->edges++;
	bpf_timer_start(&st->timer, set_block(st, cfg), 0);
	return 0;
}

/* Slow path, once per configuration: compute the colour from the clock and arm the timer. */
static __noinline __u32 arm_clock(struct clock_state *st, const struct config *cfg)
{
	bpf_timer_init(&st->timer, &srv6pm_clock, CLOCK_MONOTONIC); /* -EBUSY once done */
	bpf_timer_set_callback(&st->timer, on_block_edge);
	bpf_timer_start(&st->timer, set_block(st, cfg), 0);
	st->generation = cfg->generation;
	return st->colour;
}

static __always_inline __u32 current_colour(const struct config *cfg)
{
	__u32 zero = 0;
	struct clock_state *st = bpf_map_lookup_elem(&srv6pm_clock, &zero);

	if (!st)
		return 0;
	if (st->generation != cfg->generation)
		return arm_clock(st, cfg);
	return st->colour;
}

SEC("tc")
int srv6pm_mark(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&srv6pm_config, &zero);
	struct parsed p;

	if (!cfg || cfg->period_ns == 0 || !parse_srh(skb, &p))
		return TC_ACT_OK;
	struct flow_value *flow = lookup_flow(skb, &p);
	if (!flow || flow->role != ROLE_INGRESS)
		return TC_ACT_OK;

	__u32 colour = current_colour(cfg);
	__u8 tc = traffic_class(p.ip6) | cfg->monitored_bit;
	tc = colour ? (tc | cfg->colour_bit) : (tc & ~cfg->colour_bit);
	/* IPv6 has no header checksum: rewriting the Traffic Class needs no fix-up. */
	p.ip6->priority = tc >> 4;
	p.ip6->flow_lbl[0] = (p.ip6->flow_lbl[0] & 0x0f) | (tc << 4);
	count(skb, flow->slot, colour);
	return TC_ACT_OK;
}

SEC("tc")
int srv6pm_count(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&srv6pm_config, &zero);
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ipv6hdr *ip6 = data + sizeof(struct ethhdr);
	struct parsed p;

	/* Unmarked traffic leaves before any parsing of the SRH or lookup. */
	if (!cfg || (void *)(ip6 + 1) > data_end || !(traffic_class(ip6) & cfg->monitored_bit))
		return TC_ACT_OK;
	if (!parse_srh(skb, &p))
		return TC_ACT_OK;
	struct flow_value *flow = lookup_flow(skb, &p);
	if (!flow || flow->role == ROLE_INGRESS)
		return TC_ACT_OK;
	count(skb, flow->slot, (traffic_class(p.ip6) & cfg->colour_bit) ? 1 : 0);
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
