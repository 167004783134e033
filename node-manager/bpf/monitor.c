// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * srv6pm alternate marking (RFC 9341) and per-flow counting on tc clsact hooks.
 *
 * Three programs share the maps:
 *  - srv6pm_mark  (egress hook of the node that encapsulates: a flow's ingress). Finds the flow by
 *                 its SID list and marks the colour of the current block, by default with an
 *                 RFC 9343 AltMark option (FlowMonID, L = colour) in a Destination Options header
 *                 inserted before the SRH (where RFC 9343 puts it for SRv6), or in DSCP mode with two
 *                 bits of the outer Traffic Class. Counts per flow per colour.
 *  - srv6pm_count (ingress hook of transit and egress nodes): counts marked packets per colour,
 *                 by FlowMonID (one array index) or, in DSCP mode, by SID list.
 *  - srv6pm_guard (ingress hook of interfaces at the domain boundary): SRv6 packets that arrive
 *                 from outside already carrying our marks have them neutralised (the AltMark
 *                 option becomes PadN, the DSCP bits are cleared) and counted, so that no node
 *                 downstream counts them as ours.
 *
 * Packets are counted as they are on the wire: a GSO/GRO skb counts its segments, and the bytes
 * of every segment's repeated headers. What a program sees but cannot attribute is counted per
 * reason in srv6pm_stats.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/seg6.h>
#include <stddef.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define MAX_SEGMENTS 16
#define MAX_FLOWS 16384
#define MAX_FLOWMON_IDS (1 << 20) /* FlowMonID is 20 bits (RFC 9343) */
#define MAX_EXT_HEADERS 8
#define MAX_OPTIONS 8
#define MAX_GSO_HEADERS 10

#define IP6OPT_PAD1 0x00
#define IP6OPT_PADN 0x01
#define IP6OPT_ALTMARK 0x12 /* RFC 9343 (IANA Destination Options and Hop-by-Hop Options) */
#define ALTMARK_LEN 4
#define DOH_LEN 8 /* next header, length, option type, option length, 4 octets of data */
#define NEXTHDR_ETHERNET 143 /* RFC 8986 section 10.1 (L2 encapsulation) */
#define IPV6_HLEN 40
#define IPV6_MIN_MTU 1280 /* every IPv6 link carries this much (RFC 8200 section 5) */
#define L3_OFF ETH_HLEN
/* Let the packet go on to the next filter (the in-kernel STAMP reflector, an operator's own),
 * then the stack: TC_ACT_OK would end classification here. */
#define PASS TC_ACT_UNSPEC

/* What a program saw but could not count for a flow: srv6pm_stats's indexes (maps.Reason). */
enum reason {
	REASON_NOT_SRV6,     /* not IPv6, or IPv6 with neither an SRH nor our mark */
	REASON_UNMARKED,     /* SRv6 at a counting hook without our mark: a policy not monitored */
	REASON_NO_FLOW,      /* SID list or FlowMonID that no flow of this node's role has */
	REASON_PARSE_ERROR,  /* truncated or malformed headers, too many SIDs or extension headers */
	REASON_FOREIGN_MARK, /* arrived already marked: from outside the domain, or by another node */
	REASON_MARK_FAILED,  /* the AltMark option could not be inserted (not counted) */
	REASON_COUNTED,      /* attributed to a flow (segments) */
	NREASONS,
};

/* Enums one octet wide (a clang extension: C23's fixed underlying type) so the map values keep
 * their layout and their BTF names the enum; maps.py and srv6pm.common.srv6.Role mirror them,
 * and tests/test_contract_btf.py compares both by name and value. */
enum role : __u8 {
	ROLE_INGRESS = 1, /* encapsulates: marks and counts */
	ROLE_TRANSIT = 2,
	ROLE_EGRESS = 3,
};

enum marking_mode : __u8 {
	MODE_ALTMARK = 1, /* RFC 9343 option in a Destination Options header before the SRH */
	MODE_DSCP = 2,    /* two bits of the outer Traffic Class */
};

/* Enums no map's type names (they index arrays) reach the object's BTF through this variable.
 * No program uses it and libbpf skips its section: it is never loaded. */
struct btf_enums {
	enum reason reason;
} srv6pm_btf_enums SEC(".srv6pm.btf");

struct flow_value {
	__u32 slot;
	enum role role;
	__u8 nsegs;
	__u16 pad;
	__u32 flowmon_id; /* written into the AltMark option by the ingress node */
	__u32 pad2;
	struct in6_addr segs[MAX_SEGMENTS]; /* SRH order: segs[0] is the last segment */
};

/* FlowMonID -> counter slot, for transit and egress roles. */
struct flowmon_entry {
	__u16 slot;
	enum role role; /* 0: no flow */
	__u8 pad;
};

struct counter {
	__u64 packets;
	__u64 bytes;
};

struct config {
	__u64 period_ns;
	__u64 tai_offset_ns; /* CLOCK_TAI - CLOCK_REALTIME */
	__u32 generation;    /* bumped on every change so cached colours are dropped */
	__u8 monitored_bit;  /* DSCP mode: Traffic Class bits */
	__u8 colour_bit;
	enum marking_mode mode;
	__u8 pad;
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
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_FLOWMON_IDS);
	__type(key, __u32);
	__type(value, struct flowmon_entry);
} srv6pm_flowmon SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_FLOWS * 2);
	__type(key, __u32);
	__type(value, struct counter);
} srv6pm_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NREASONS);
	__type(key, __u32);
	__type(value, __u64);
} srv6pm_stats SEC(".maps");

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

/* ---- headers ------------------------------------------------------------------------------- */

/* Where the headers that matter sit; offsets from skb->data (the Ethernet header). */
struct pkt {
	__u32 mark_off;  /* the AltMark option (type octet) before the SRH; 0: none */
	__u32 srh_off;   /* the SRH; 0: none */
	__u32 inner_off; /* the first header after the outer IPv6 header's extension headers */
	__u8 inner_proto;
	__u8 nsegs;   /* SIDs in the SRH (Last Entry + 1) */
	__u8 segleft; /* the SRH's Segments Left */
	__u8 tc;      /* outer Traffic Class */
	__u16 hbh_len; /* a Hop-by-Hop Options header right after the IPv6 header; 0: none */
	__u16 pad;
	__u32 mark;    /* the AltMark option's data, host order, when mark_off */
};

/* Segments a packet stands for on the wire (a GSO/GRO skb carries several). */
static __always_inline __u64 wire_segs(const struct __sk_buff *skb)
{
	return skb->gso_size && skb->gso_segs ? skb->gso_segs : 1;
}

static __always_inline void add_stat(__u32 reason, __u64 packets)
{
	__u64 *v = bpf_map_lookup_elem(&srv6pm_stats, &reason);

	if (v)
		*v += packets;
}

static __always_inline void stat(struct __sk_buff *skb, __u32 reason)
{
	add_stat(reason, wire_segs(skb));
}

static __always_inline int is_ext_header(__u8 proto)
{
	return proto == IPPROTO_HOPOPTS || proto == IPPROTO_DSTOPTS || proto == IPPROTO_ROUTING;
}

/* The AltMark option inside the options header at `off` (RFC 8200 section 4.2 TLVs), or 0. */
static __always_inline __u32 find_altmark(struct __sk_buff *skb, __u32 off, __u32 end)
{
	__u32 o = off + 2;

	for (int i = 0; i < MAX_OPTIONS; i++) {
		__u8 opt[2];

		if (o + 2 > end || bpf_skb_load_bytes(skb, o, opt, 2))
			return 0;
		if (opt[0] == IP6OPT_ALTMARK && opt[1] == ALTMARK_LEN && o + 2 + ALTMARK_LEN <= end)
			return o;
		o += opt[0] == IP6OPT_PAD1 ? 1 : 2 + opt[1];
	}
	return 0;
}

/* Walks the outer IPv6 header's extension headers up to the SRH (bounded), noting an AltMark
 * option in a Hop-by-Hop or Destination Options header before it. Returns a reason when the
 * packet cannot be parsed or is not IPv6, else -1. A global function: the verifier checks it
 * once, not once per path of its callers. */
__noinline int parse(struct __sk_buff *skb, struct pkt *p)
{
	struct ipv6hdr ip6;

	if (!p)
		return REASON_PARSE_ERROR;
	__builtin_memset(p, 0, sizeof(*p));
	if (skb->protocol != bpf_htons(ETH_P_IPV6))
		return REASON_NOT_SRV6;
	if (bpf_skb_load_bytes(skb, L3_OFF, &ip6, sizeof(ip6)))
		return REASON_PARSE_ERROR;
	if (ip6.version != 6)
		return REASON_PARSE_ERROR;
	p->tc = (ip6.priority << 4) | (ip6.flow_lbl[0] >> 4);

	__u32 off = L3_OFF + IPV6_HLEN;
	__u8 proto = ip6.nexthdr;
	for (int i = 0; i < MAX_EXT_HEADERS; i++) {
		__u8 h[8];

		if (!is_ext_header(proto))
			break;
		if (bpf_skb_load_bytes(skb, off, h, sizeof(h)))
			return REASON_PARSE_ERROR;
		__u32 len = ((__u32)h[1] + 1) * 8;
		if (i == 0 && proto == IPPROTO_HOPOPTS)
			p->hbh_len = len;
		if (proto == IPPROTO_ROUTING && h[2] == IPV6_SRCRT_TYPE_4) {
			p->srh_off = off;
			p->nsegs = h[4] + 1; /* Last Entry */
			p->segleft = h[3];
			if (p->nsegs > MAX_SEGMENTS || len < 8 + 16 * (__u32)p->nsegs)
				return REASON_PARSE_ERROR;
		} else if (proto != IPPROTO_ROUTING && !p->srh_off && !p->mark_off) {
			p->mark_off = find_altmark(skb, off, off + len);
			if (p->mark_off) {
				__be32 data;

				if (bpf_skb_load_bytes(skb, p->mark_off + 2, &data, 4))
					return REASON_PARSE_ERROR;
				p->mark = bpf_ntohl(data);
			}
		}
		proto = h[0];
		off += len;
	}
	if (is_ext_header(proto) || off > skb->len)
		return REASON_PARSE_ERROR;
	p->inner_off = off;
	p->inner_proto = proto;
	return -1;
}

/* The shapes Linux head-ends build, read in place: IPv6 + SRH, and IPv6 + our 8-octet AltMark
 * header + SRH. 1 when `p` is filled; 0 sends the packet through parse(). */
static __always_inline int parse_fast(struct __sk_buff *skb, struct pkt *p)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	__u8 *h = (void *)(ip6 + 1);
	__u32 off = L3_OFF + IPV6_HLEN;

	if ((void *)(h + 16) > data_end || eth->h_proto != bpf_htons(ETH_P_IPV6) ||
	    ip6->version != 6)
		return 0;
	__u8 proto = ip6->nexthdr;
	__u32 mark = 0, mark_off = 0;
	if (proto == IPPROTO_DSTOPTS) {
		if (h[1] != 0 || h[2] != IP6OPT_ALTMARK || h[3] != ALTMARK_LEN)
			return 0;
		mark_off = off + 2;
		mark = bpf_ntohl(*(__be32 *)(h + 4));
		proto = h[0];
		h += DOH_LEN;
		off += DOH_LEN;
	}
	if (proto != IPPROTO_ROUTING || h[2] != IPV6_SRCRT_TYPE_4)
		return 0;
	__u32 nsegs = (__u32)h[4] + 1;
	__u32 len = ((__u32)h[1] + 1) * 8;
	if (nsegs > MAX_SEGMENTS || len < 8 + 16 * nsegs || off + len > skb->len)
		return 0;
	p->mark_off = mark_off;
	p->mark = mark;
	p->srh_off = off;
	p->inner_off = off + len;
	p->inner_proto = h[0];
	p->nsegs = nsegs;
	p->segleft = h[3];
	p->tc = (ip6->priority << 4) | (ip6->flow_lbl[0] >> 4);
	p->hbh_len = 0;
	return 1;
}

static __always_inline int parse_any(struct __sk_buff *skb, struct pkt *p)
{
	return parse_fast(skb, p) ? -1 : parse(skb, p);
}

/* Octets of the headers that each segment of a GSO skb repeats: up to the end of the innermost
 * transport header. 0 when they cannot be told. */
__noinline __u32 gso_header_len(struct __sk_buff *skb, const struct pkt *p)
{
	if (!p)
		return 0;
	__u32 off = p->inner_off;
	__u8 proto = p->inner_proto;

	for (int i = 0; i < MAX_GSO_HEADERS; i++) {
		__u8 h[14];

		switch (proto) {
		case IPPROTO_TCP:
			if (bpf_skb_load_bytes(skb, off + 12, h, 1))
				return 0;
			return off + (h[0] >> 4) * 4;
		case IPPROTO_UDP:
			return off + 8;
		case IPPROTO_IPV6:
			if (bpf_skb_load_bytes(skb, off, h, 8))
				return 0;
			proto = h[6];
			off += IPV6_HLEN;
			break;
		case IPPROTO_IPIP:
			if (bpf_skb_load_bytes(skb, off, h, 10))
				return 0;
			proto = h[9];
			off += (h[0] & 0x0f) * 4;
			break;
		case IPPROTO_HOPOPTS:
		case IPPROTO_DSTOPTS:
		case IPPROTO_ROUTING:
			if (bpf_skb_load_bytes(skb, off, h, 2))
				return 0;
			proto = h[0];
			off += ((__u32)h[1] + 1) * 8;
			break;
		case NEXTHDR_ETHERNET:
			if (bpf_skb_load_bytes(skb, off, h, 14))
				return 0;
			if (h[12] == 0x86 && h[13] == 0xdd)
				proto = IPPROTO_IPV6;
			else if (h[12] == 0x08 && h[13] == 0x00)
				proto = IPPROTO_IPIP;
			else
				return 0;
			off += ETH_HLEN;
			break;
		default:
			return 0;
		}
	}
	return 0;
}

/* The header octets each segment of a GSO skb repeats, or 0 (not GSO, or not known). */
static __always_inline __u32 segment_headers(struct __sk_buff *skb, const struct pkt *p)
{
	return skb->gso_size ? gso_header_len(skb, p) : 0;
}

/* Counts the packet as the segments it is on the wire, for counter `index`; `hdr` is what
 * segment_headers() said. */
static __always_inline void count(struct __sk_buff *skb, __u32 hdr, __u32 index)
{
	struct counter *c = bpf_map_lookup_elem(&srv6pm_counters, &index);
	__u64 segs = 1, bytes = skb->len;

	if (skb->gso_size) {
		segs = skb->gso_segs;
		/* gso_segs is 0 when a helper resized the skb and left it to be recomputed */
		if (!segs && hdr && skb->len > hdr)
			segs = (skb->len - hdr + skb->gso_size - 1) / skb->gso_size;
		if (!segs)
			segs = 1;
		if (hdr)
			bytes += (segs - 1) * hdr;
	}
	if (c) {
		c->packets += segs;
		c->bytes += bytes;
	}
	add_stat(REASON_COUNTED, segs);
}

/* ---- flows by SID list ----------------------------------------------------------------------- */

/* The flow key: a SID list folded into 64 bits, the same in domain/flowkey.py (which keys the
 * flows it installs with it); tests/test_bpf_flowkey.py shows both fold random lists alike. */
#define FLOW_KEY_SEED 0x9e3779b97f4a7c15ULL
#define FLOW_KEY_MULTIPLIER 0xff51afd7ed558ccdULL

static __always_inline __u64 mix(__u64 h, __u64 word)
{
	h = (h ^ word) * FLOW_KEY_MULTIPLIER;
	return h ^ (h >> 32);
}

struct flow_hit {
	__u32 slot;
	__u32 flowmon_id;
	__u32 role;
};

/* The flow whose full SID list equals the packet's: 0 and `hit` filled, or -1. The list is the
 * SRH's; with H.Encaps.Red (Segments Left = Last Entry + 1) the first SID is only in the
 * destination address, and a single-SID H.Encaps.Red packet has no SRH at all (RFC 8986 section
 * 5.2). A global function, with the SID list on its own stack. */
__noinline int flow_by_sids(struct __sk_buff *skb, const struct pkt *p, struct flow_hit *hit)
{
	__u64 sids[2 * MAX_SEGMENTS];

	if (!p || !hit)
		return -1;
	__u32 n = p->nsegs;

	if (p->srh_off) {
		if (n < 1 || n > MAX_SEGMENTS)
			return -1;
		/* 16 to 256 octets in a form the verifier can bound (n is 1..16 here) */
		__u32 len = (((n - 1) & (MAX_SEGMENTS - 1)) + 1) * 16;
		if (bpf_skb_load_bytes(skb, p->srh_off + 8, sids, len))
			return -1;
		if (p->segleft == n) {
			if (n >= MAX_SEGMENTS)
				return -1;
			if (bpf_skb_load_bytes(skb, L3_OFF + 24, &sids[2 * (n & (MAX_SEGMENTS - 1))], 16))
				return -1;
			n++;
		}
	} else {
		if (bpf_skb_load_bytes(skb, L3_OFF + 24, sids, 16))
			return -1;
		n = 1;
	}

	__u64 h = FLOW_KEY_SEED ^ n;
	/* Unrolled by hand: each step has a constant index, which the verifier follows. */
#define FOLD(i)                                                          \
	if (i < n)                                                       \
		h = mix(mix(h, sids[2 * i]), sids[2 * i + 1]);
	FOLD(0) FOLD(1) FOLD(2) FOLD(3) FOLD(4) FOLD(5) FOLD(6) FOLD(7)
	FOLD(8) FOLD(9) FOLD(10) FOLD(11) FOLD(12) FOLD(13) FOLD(14) FOLD(15)
#undef FOLD
	struct flow_value *flow = bpf_map_lookup_elem(&srv6pm_flows, &h);
	if (!flow || flow->nsegs != n)
		return -1;
	__u64 *want = (void *)flow->segs;
#define SAME(i)                                                                      \
	if (i < n && (sids[2 * i] != want[2 * i] || sids[2 * i + 1] != want[2 * i + 1])) \
		return -1;
	SAME(0) SAME(1) SAME(2) SAME(3) SAME(4) SAME(5) SAME(6) SAME(7)
	SAME(8) SAME(9) SAME(10) SAME(11) SAME(12) SAME(13) SAME(14) SAME(15)
#undef SAME
	hit->slot = flow->slot;
	hit->flowmon_id = flow->flowmon_id;
	hit->role = flow->role;
	return 0;
}

/* flow_by_sids() for the usual packet, whose SRH holds the whole list in the skb's linear data:
 * hashed and compared in place, without a copy. -2: not that packet, ask flow_by_sids(). */
__noinline int flow_by_sids_in_place(struct __sk_buff *skb, const struct pkt *p,
				     struct flow_hit *hit)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;

	if (!p || !hit)
		return -1;
	__u32 n = p->nsegs;
	__u32 off = p->srh_off;
	if (!off || p->segleft == n || n < 1 || n > MAX_SEGMENTS || off > 256)
		return -2;
	__u64 *words = data + off + 8;
	if ((void *)(words + 2 * n) > data_end)
		return -2;

	__u64 h = FLOW_KEY_SEED ^ n;
#define FOLD(i)                                                                      \
	if (i < n) {                                                                 \
		if ((void *)(words + 2 * i + 2) > data_end)                          \
			return -2;                                                     \
		h = mix(mix(h, words[2 * i]), words[2 * i + 1]);                      \
	}
	FOLD(0) FOLD(1) FOLD(2) FOLD(3) FOLD(4) FOLD(5) FOLD(6) FOLD(7)
	FOLD(8) FOLD(9) FOLD(10) FOLD(11) FOLD(12) FOLD(13) FOLD(14) FOLD(15)
#undef FOLD
	struct flow_value *flow = bpf_map_lookup_elem(&srv6pm_flows, &h);
	if (!flow || flow->nsegs != n)
		return -1;
	__u64 *want = (void *)flow->segs;
#define SAME(i)                                                                      \
	if (i < n) {                                                                 \
		if ((void *)(words + 2 * i + 2) > data_end)                          \
			return -2;                                                     \
		if (words[2 * i] != want[2 * i] || words[2 * i + 1] != want[2 * i + 1]) \
			return -1;                                                     \
	}
	SAME(0) SAME(1) SAME(2) SAME(3) SAME(4) SAME(5) SAME(6) SAME(7)
	SAME(8) SAME(9) SAME(10) SAME(11) SAME(12) SAME(13) SAME(14) SAME(15)
#undef SAME
	hit->slot = flow->slot;
	hit->flowmon_id = flow->flowmon_id;
	hit->role = flow->role;
	return 0;
}

static __always_inline int find_flow(struct __sk_buff *skb, const struct pkt *p,
				     struct flow_hit *hit)
{
	int found = flow_by_sids_in_place(skb, p, hit);

	return found == -2 ? flow_by_sids(skb, p, hit) : found;
}

static __always_inline int is_srv6(const struct pkt *p)
{
	return p->srh_off != 0;
}

/* An encapsulated packet without an SRH: single-SID H.Encaps.Red. */
static __always_inline int is_reduced_single(const struct pkt *p)
{
	return !p->srh_off && (p->inner_proto == IPPROTO_IPV6 || p->inner_proto == IPPROTO_IPIP ||
			       p->inner_proto == NEXTHDR_ETHERNET);
}

/* ---- colour clock ---------------------------------------------------------------------------- */

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

static __always_inline struct config *config(void)
{
	__u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&srv6pm_config, &zero);

	return cfg && cfg->period_ns ? cfg : NULL;
}

/* ---- marking --------------------------------------------------------------------------------- */

struct altmark_doh {
	__u8 nexthdr;
	__u8 hdrlen;
	__u8 type;
	__u8 len;
	__be32 data; /* FlowMonID (20 bits), L, D, reserved (10 bits) */
};

#define MAX_HBH_CHUNKS 32 /* a Hop-by-Hop header of up to 256 octets is moved for the DOH */

/* Inserts a Destination Options header with the AltMark option after the IPv6 header, or after
 * its Hop-by-Hop header, which must stay first (RFC 8200 section 4.1). BPF_F_ADJ_ROOM_FIXED_GSO
 * keeps a GSO skb's segment size, so it is cut into the segments it was counted as (each 8 octets
 * longer); without it the kernel shrinks gso_size and the wire would carry more segments than
 * were counted. Returns 0, -1 (untouched) or -2 (damaged: drop). A global function: its own
 * stack frame. */
__noinline int insert_altmark(struct __sk_buff *skb, const struct pkt *p, __u32 flowmon_id,
			      __u32 colour)
{
	__u32 nexthdr_off = L3_OFF + offsetof(struct ipv6hdr, nexthdr);
	__u32 hbh_len = p ? p->hbh_len : 0;
	struct {
		__be32 vtc_flow;
		__be16 payload_len;
		__u8 nexthdr;
		__u8 hop_limit;
	} head; /* the IPv6 header's first 8 octets */

	if (!p || hbh_len > MAX_HBH_CHUNKS * 8)
		return -1;
	if (hbh_len)
		nexthdr_off = L3_OFF + IPV6_HLEN; /* the HBH's own next header field */
	struct altmark_doh doh = {
		.hdrlen = 0,
		.type = IP6OPT_ALTMARK,
		.len = ALTMARK_LEN,
		.data = bpf_htonl((flowmon_id & 0xfffff) << 12 | (colour & 1) << 11),
	};
	if (bpf_skb_load_bytes(skb, L3_OFF, &head, 8) ||
	    bpf_skb_load_bytes(skb, nexthdr_off, &doh.nexthdr, 1))
		return -1;
	/* a zero payload length (RFC 2675 jumbogram, BIG TCP) stays zero */
	__be16 plen = head.payload_len ? bpf_htons(bpf_ntohs(head.payload_len) + DOH_LEN) : 0;
	if (bpf_skb_adjust_room(skb, DOH_LEN, BPF_ADJ_ROOM_NET, BPF_F_ADJ_ROOM_FIXED_GSO))
		return -1;

	if (!hbh_len) { /* the usual packet: written in place, the headers being linear now */
		void *data = (void *)(long)skb->data;
		void *data_end = (void *)(long)skb->data_end;
		struct ipv6hdr *ip6 = data + L3_OFF;
		struct altmark_doh *room = (void *)(ip6 + 1);

		if ((void *)(room + 1) <= data_end) {
			*room = doh;
			ip6->nexthdr = IPPROTO_DSTOPTS;
			ip6->payload_len = plen;
			return 0;
		}
	}
	/* the room is right after the IPv6 header: move a Hop-by-Hop header back in front of it */
	for (int i = 0; i < MAX_HBH_CHUNKS; i++) {
		__u64 chunk;
		__u32 at = L3_OFF + IPV6_HLEN + i * 8;

		if (i * 8 >= hbh_len)
			break;
		if (bpf_skb_load_bytes(skb, at + DOH_LEN, &chunk, 8) ||
		    bpf_skb_store_bytes(skb, at, &chunk, 8, 0))
			return -2;
	}
	__u8 dstopts = IPPROTO_DSTOPTS;
	if (bpf_skb_store_bytes(skb, L3_OFF + IPV6_HLEN + hbh_len, &doh, sizeof(doh), 0) ||
	    bpf_skb_store_bytes(skb, nexthdr_off, &dstopts, 1, 0) ||
	    bpf_skb_store_bytes(skb, L3_OFF + offsetof(struct ipv6hdr, payload_len), &plen, 2, 0))
		return -2;
	return 0;
}

/* DSCP mode: sets the monitored bit and the colour bit of the outer Traffic Class. IPv6 has no
 * header checksum, so the rewrite needs no fix-up. */
static __always_inline int set_dscp(struct __sk_buff *skb, __u8 tc)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ipv6hdr *ip6 = data + L3_OFF;
	__u8 first[2];

	if ((void *)(ip6 + 1) <= data_end) {
		ip6->priority = tc >> 4;
		ip6->flow_lbl[0] = (ip6->flow_lbl[0] & 0x0f) | (tc << 4);
		return 0;
	}
	if (bpf_skb_load_bytes(skb, L3_OFF, first, 2))
		return -1;
	first[0] = (first[0] & 0xf0) | (tc >> 4);
	first[1] = (first[1] & 0x0f) | (tc << 4);
	return bpf_skb_store_bytes(skb, L3_OFF, first, 2, 0);
}

/* The configuration, with the packet parsed into `p`; NULL (counted by reason) when the
 * program has nothing to do. */
static __always_inline struct config *begin(struct __sk_buff *skb, struct pkt *p)
{
	struct config *cfg = config();
	int reason;

	if (!cfg)
		return NULL;
	reason = parse_any(skb, p);
	if (reason >= 0) {
		stat(skb, reason);
		return NULL;
	}
	return cfg;
}

SEC("tc")
int srv6pm_mark(struct __sk_buff *skb)
{
	struct pkt p;
	struct config *cfg = begin(skb, &p);

	if (!cfg)
		return PASS;
	if (!is_srv6(&p) && !is_reduced_single(&p)) {
		stat(skb, REASON_NOT_SRV6);
		return PASS;
	}
	struct flow_hit flow;
	if (find_flow(skb, &p, &flow) || flow.role != ROLE_INGRESS) {
		stat(skb, REASON_NO_FLOW);
		return PASS;
	}
	__u32 colour = current_colour(cfg);
	__u32 hdr = segment_headers(skb, &p);

	if (cfg->mode == MODE_DSCP) {
		__u8 tc = p.tc | cfg->monitored_bit;
		tc = colour ? (tc | cfg->colour_bit) : (tc & ~cfg->colour_bit);
		if (set_dscp(skb, tc)) {
			stat(skb, REASON_MARK_FAILED);
			return PASS;
		}
	} else {
		/* Not encapsulated here: an SRv6 packet that carries a mark already is not ours. */
		if (p.mark_off) {
			stat(skb, REASON_FOREIGN_MARK);
			return PASS;
		}
		/* A packet the option would take over the MTU goes out unmarked (and uncounted, so
		 * no node reports it lost) rather than be dropped further on. */
		__u32 mtu = 0;
		if ((skb->len + DOH_LEN > ETH_HLEN + IPV6_MIN_MTU || hdr) &&
		    (bpf_check_mtu(skb, 0, &mtu, DOH_LEN, 0) ||
		     (hdr && hdr + DOH_LEN + skb->gso_size > mtu + ETH_HLEN))) {
			stat(skb, REASON_MARK_FAILED);
			return PASS;
		}
		int err = insert_altmark(skb, &p, flow.flowmon_id, colour);
		if (err) {
			stat(skb, REASON_MARK_FAILED);
			return err == -2 ? TC_ACT_SHOT : PASS;
		}
		if (hdr)
			hdr += DOH_LEN;
	}
	count(skb, hdr, flow.slot * 2 + colour);
	return PASS;
}

/* ---- counting -------------------------------------------------------------------------------- */

SEC("tc")
int srv6pm_count(struct __sk_buff *skb)
{
	struct pkt p;
	struct config *cfg = begin(skb, &p);

	if (!cfg)
		return PASS;
	if (cfg->mode == MODE_DSCP) {
		/* a single-SID policy may come without an SRH (H.Encaps.Red; VPP's H.Encaps) */
		if (!is_srv6(&p) && !is_reduced_single(&p)) {
			stat(skb, REASON_NOT_SRV6);
			return PASS;
		}
		if (!(p.tc & cfg->monitored_bit)) {
			stat(skb, REASON_UNMARKED);
			return PASS;
		}
		struct flow_hit flow;
		if (find_flow(skb, &p, &flow) || flow.role == ROLE_INGRESS) {
			stat(skb, REASON_NO_FLOW);
			return PASS;
		}
		count(skb, segment_headers(skb, &p), flow.slot * 2 + ((p.tc & cfg->colour_bit) ? 1 : 0));
		return PASS;
	}
	if (!p.mark_off) {
		stat(skb, is_srv6(&p) || is_reduced_single(&p) ? REASON_UNMARKED : REASON_NOT_SRV6);
		return PASS;
	}
	__u32 word = p.mark;
	__u32 id = word >> 12;
	struct flowmon_entry *e = bpf_map_lookup_elem(&srv6pm_flowmon, &id);
	if (!e || !e->role || e->role == ROLE_INGRESS) {
		stat(skb, REASON_NO_FLOW);
		return PASS;
	}
	count(skb, segment_headers(skb, &p), (__u32)e->slot * 2 + ((word >> 11) & 1));
	return PASS;
}

/* ---- domain boundary ------------------------------------------------------------------------- */

SEC("tc")
int srv6pm_guard(struct __sk_buff *skb)
{
	struct config *cfg = config();
	struct pkt p;

	if (!cfg || parse_any(skb, &p) >= 0 || (!is_srv6(&p) && !is_reduced_single(&p)))
		return PASS;
	if (cfg->mode == MODE_DSCP) {
		if (!(p.tc & cfg->monitored_bit))
			return PASS;
		set_dscp(skb, p.tc & ~(cfg->monitored_bit | cfg->colour_bit));
	} else {
		if (!p.mark_off)
			return PASS;
		/* PadN of the same length: every node skips it (RFC 8200 section 4.2; Linux checks
		 * that PadN data is zero). */
		__u64 padn = IP6OPT_PADN | ALTMARK_LEN << 8; /* little-endian: type, length, zeros */
		bpf_skb_store_bytes(skb, p.mark_off, &padn, 2 + ALTMARK_LEN, 0);
	}
	stat(skb, REASON_FOREIGN_MARK);
	return PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
