// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * srv6pm STAMP Session-Reflector in the kernel (RFC 8762 section 4.3), on a tc ingress hook.
 *
 * srv6pm_reflect answers an unauthenticated STAMP test packet (the 44-octet base, no TLVs) to the
 * configured reflector address and port in place: the probe becomes the reply, stateless (the
 * sender's sequence number) or stateful (a counter per sender address and SSID). A probe that
 * arrives SRv6-encapsulated for one of the node's decapsulating SIDs (End.DT6: segments left 0,
 * an IPv6 packet inside) is decapsulated first, as End.DT6 would. The reply then continues into
 * the kernel's routing: its destination is the sender, whose /128 SR policy (the session's
 * declared return path) encapsulates it, so it leaves on the return SID list and is marked and
 * counted as a packet of the reverse flow like any other.
 *
 * Everything else passes unchanged (TC_ACT_UNSPEC: the next filter, then the stack), to the
 * userspace reflector, which stays the reference: authenticated mode, TLVs, TWAMP-Light lengths,
 * extension headers inside, and any probe while the reflector is not configured. What it passes
 * up, and why, is counted in srv6pm_reflector_stats.
 *
 * T2 is taken when the program starts, T3 just before it returns, both from CLOCK_TAI less the
 * TAI-UTC offset the node manager keeps in the configuration (the kernel has no UTC clock for
 * programs), in NTP format, as the userspace reflector writes them.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/seg6.h>
#include <linux/udp.h>
#include <stddef.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define IPV6_HLEN 40
#define L3_OFF ETH_HLEN
#define STAMP_LEN 44	      /* unauthenticated base, RFC 8762 section 4.2.1 */
#define MAX_OUTER_HEADERS 3  /* hop-by-hop or destination options, the SRH */
#define MAX_OUTER_LEN 512    /* outer IPv6, an 8-octet AltMark option, an SRH of 16 SIDs: 312 */
#define REPLY_HOP_LIMIT 64    /* what a local socket gives a reply (net.ipv6.conf.*.hop_limit) */
#define MAX_SEQUENCES 65536   /* stateful counters kept, least recently used go first */
#define NTP_UNIX_OFFSET_S 2208988800ULL
#define NS_PER_S 1000000000ULL
#define NEXTHDR_IPV6 41
#define NEXTHDR_ROUTING 43

/* What the program did with a packet for the reflector; keep in sync with maps.py. */
enum reflector_stat {
	STAT_REFLECTED,	      /* answered here */
	STAT_PASSED_LENGTH,   /* not the 44-octet base: TLVs, authenticated, TWAMP-Light */
	STAT_PASSED_HEADERS,  /* extension headers around the UDP datagram */
	STAT_PASSED_DISABLED, /* no reflector configured */
	STAT_FAILED,	      /* a helper failed: the packet went on unchanged or was dropped */
	STAT_MAX,
};

struct reflector_config {
	__u8 address[16];	 /* the reflector address probes are sent to */
	__u64 tai_offset_ns;	 /* CLOCK_TAI - CLOCK_REALTIME */
	__u16 port;		 /* network order */
	__u16 error_estimate;	 /* the reflector's own, network order (RFC 8762 4.2.1) */
	__u8 enabled;
	__u8 stateful;
	__u8 pad[2];
};

struct sequence_key {
	__u8 sender[16];
	__u16 ssid; /* network order */
	__u8 pad[2];
};

struct stamp_reply {
	__be32 seq;
	__be32 timestamp_s;
	__be32 timestamp_frac;
	__be16 error_estimate;
	__be16 ssid;
	__be32 receive_s;
	__be32 receive_frac;
	__be32 sender_seq;
	__be32 sender_timestamp_s;
	__be32 sender_timestamp_frac;
	__be16 sender_error_estimate;
	__be16 mbz1;
	__u8 sender_ttl;
	__u8 mbz2[3];
};

_Static_assert(sizeof(struct stamp_reply) == STAMP_LEN, "RFC 8762 reflector layout");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct reflector_config);
} srv6pm_reflector_config SEC(".maps");

/* The node's decapsulating SIDs (End.DT6): a probe inside one of them is for this node. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct in6_addr);
	__type(value, __u8);
} srv6pm_reflector_decap SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_SEQUENCES);
	__type(key, struct sequence_key);
	__type(value, __u32);
} srv6pm_reflector_seq SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} srv6pm_reflector_stats SEC(".maps");

static __always_inline void count(__u32 stat)
{
	__u64 *n = bpf_map_lookup_elem(&srv6pm_reflector_stats, &stat);

	if (n)
		*n += 1;
}

static __always_inline void ntp(__u64 unix_ns, __be32 *s, __be32 *frac)
{
	__u64 ns = unix_ns % NS_PER_S;

	*s = bpf_htonl((__u32)(unix_ns / NS_PER_S + NTP_UNIX_OFFSET_S));
	/* rounded to nearest, as the userspace reflector does; below 2^32 for ns < 10^9 */
	*frac = bpf_htonl((__u32)(((ns << 32) + NS_PER_S / 2) / NS_PER_S));
}

static __always_inline int same_address(const __u8 *a, const struct in6_addr *b)
{
	const __u64 *x = (const __u64 *)a;
	const __u64 *y = (const __u64 *)b;

	return x[0] == y[0] && x[1] == y[1];
}

/*
 * Where the probe's IPv6 header starts once any SRv6 encapsulation for this node is removed: 0
 * for a plain probe, the outer headers' length for an encapsulated one (outer IPv6, options such
 * as the AltMark Destination Options header the marking inserts before the SRH, the SRH); -1
 * when it is not a probe for this node.
 */
static __always_inline int outer_length(struct __sk_buff *skb, struct ipv6hdr *ip6)
{
	__u8 nexthdr = ip6->nexthdr;
	int off = IPV6_HLEN;

	if (nexthdr == IPPROTO_UDP)
		return 0;
	if (!bpf_map_lookup_elem(&srv6pm_reflector_decap, &ip6->daddr))
		return -1;
#pragma unroll
	for (int i = 0; i < MAX_OUTER_HEADERS; i++) {
		struct ipv6_sr_hdr h; /* the first octets of any extension header, or an SRH */

		if (nexthdr == NEXTHDR_IPV6)
			return off;
		if (off > MAX_OUTER_LEN || bpf_skb_load_bytes(skb, L3_OFF + off, &h, sizeof(h)) < 0)
			return -1;
		if (nexthdr == NEXTHDR_ROUTING &&
		    (h.type != IPV6_SRCRT_TYPE_4 || h.segments_left != 0))
			return -1; /* not at its last segment here: End.DT6 would not decapsulate */
		if (nexthdr != NEXTHDR_ROUTING && nexthdr != IPPROTO_DSTOPTS &&
		    nexthdr != IPPROTO_HOPOPTS)
			return -1;
		nexthdr = h.nexthdr;
		off += (h.hdrlen + 1) * 8;
	}
	return -1;
}

static __always_inline __u32 reply_seq(const struct reflector_config *cfg, struct ipv6hdr *ip6,
				       __be16 ssid, __be32 sender_seq)
{
	struct sequence_key key = {.ssid = ssid};
	__u32 first = 1, *next;

	if (!cfg->stateful)
		return sender_seq;
	__builtin_memcpy(key.sender, &ip6->saddr, 16);
	next = bpf_map_lookup_elem(&srv6pm_reflector_seq, &key);
	if (!next) {
		bpf_map_update_elem(&srv6pm_reflector_seq, &key, &first, BPF_NOEXIST);
		return 0;
	}
	return bpf_htonl(__sync_fetch_and_add(next, 1));
}

SEC("tc")
int srv6pm_reflect(struct __sk_buff *skb)
{
	__u64 received = bpf_ktime_get_tai_ns();
	const struct reflector_config *cfg;
	struct stamp_reply reply = {};
	__u8 probe[STAMP_LEN];
	struct ipv6hdr ip6;
	struct udphdr udp;
	__u32 zero = 0;
	__s64 csum;
	int outer;
	__u64 now;

	if (skb->protocol != bpf_htons(ETH_P_IPV6))
		return TC_ACT_UNSPEC;
	if (bpf_skb_load_bytes(skb, L3_OFF, &ip6, sizeof(ip6)) < 0)
		return TC_ACT_UNSPEC;
	outer = outer_length(skb, &ip6);
	if (outer < 0 || outer > MAX_OUTER_LEN + 8 * 256)
		return TC_ACT_UNSPEC;
	if (outer && bpf_skb_load_bytes(skb, L3_OFF + outer, &ip6, sizeof(ip6)) < 0)
		return TC_ACT_UNSPEC;
	cfg = bpf_map_lookup_elem(&srv6pm_reflector_config, &zero);
	if (!cfg || !same_address(cfg->address, &ip6.daddr))
		return TC_ACT_UNSPEC;
	if (ip6.nexthdr != IPPROTO_UDP) {
		count(STAT_PASSED_HEADERS);
		return TC_ACT_UNSPEC;
	}
	if (bpf_skb_load_bytes(skb, L3_OFF + outer + IPV6_HLEN, &udp, sizeof(udp)) < 0 ||
	    udp.dest != cfg->port)
		return TC_ACT_UNSPEC;
	if (!cfg->enabled) {
		count(STAT_PASSED_DISABLED);
		return TC_ACT_UNSPEC;
	}
	if (bpf_ntohs(udp.len) != sizeof(udp) + STAMP_LEN ||
	    bpf_ntohs(ip6.payload_len) != sizeof(udp) + STAMP_LEN) {
		count(STAT_PASSED_LENGTH);
		return TC_ACT_UNSPEC;
	}
	if (bpf_skb_load_bytes(skb, L3_OFF + outer + IPV6_HLEN + sizeof(udp), probe, STAMP_LEN) < 0)
		return TC_ACT_UNSPEC;

	/* The reply, from the probe's fields (RFC 8762 4.3.1); octets 16-43 of a probe are MBZ. */
	__builtin_memcpy(&reply.sender_seq, probe, 4);
	__builtin_memcpy(&reply.sender_timestamp_s, probe + 4, 8);
	__builtin_memcpy(&reply.sender_error_estimate, probe + 12, 2);
	__builtin_memcpy(&reply.ssid, probe + 14, 2);
	reply.sender_ttl = ip6.hop_limit;
	reply.error_estimate = cfg->error_estimate;
	reply.seq = reply_seq(cfg, &ip6, reply.ssid, reply.sender_seq);
	ntp(received - cfg->tai_offset_ns, &reply.receive_s, &reply.receive_frac);

	/* From here on the packet changes: a failure drops it rather than pass a half-made one. */
	if (outer && bpf_skb_adjust_room(skb, -outer, BPF_ADJ_ROOM_MAC, 0) < 0) {
		count(STAT_FAILED);
		return TC_ACT_UNSPEC; /* nothing changed yet */
	}
	{
		struct in6_addr sender = ip6.saddr;
		__be16 sender_port = udp.source;
		__u8 hop_limit = REPLY_HOP_LIMIT;

		/* Addresses and ports swap places: the UDP checksum does not change for them. */
		if (bpf_skb_store_bytes(skb, L3_OFF + offsetof(struct ipv6hdr, saddr), &ip6.daddr, 16,
					0) < 0 ||
		    bpf_skb_store_bytes(skb, L3_OFF + offsetof(struct ipv6hdr, daddr), &sender, 16,
					0) < 0 ||
		    bpf_skb_store_bytes(skb, L3_OFF + offsetof(struct ipv6hdr, hop_limit), &hop_limit,
					1, 0) < 0 ||
		    bpf_skb_store_bytes(skb, L3_OFF + IPV6_HLEN + offsetof(struct udphdr, source),
					&udp.dest, 2, 0) < 0 ||
		    bpf_skb_store_bytes(skb, L3_OFF + IPV6_HLEN + offsetof(struct udphdr, dest),
					&sender_port, 2, 0) < 0)
			goto failed;
	}
	now = bpf_ktime_get_tai_ns();
	ntp(now - cfg->tai_offset_ns, &reply.timestamp_s, &reply.timestamp_frac);
	csum = bpf_csum_diff((__be32 *)probe, STAMP_LEN, (__be32 *)&reply, STAMP_LEN, 0);
	if (csum < 0 ||
	    bpf_skb_store_bytes(skb, L3_OFF + IPV6_HLEN + sizeof(udp), &reply, STAMP_LEN, 0) < 0 ||
	    bpf_l4_csum_replace(skb, L3_OFF + IPV6_HLEN + offsetof(struct udphdr, check), 0, csum,
				BPF_F_MARK_MANGLED_0) < 0)
		goto failed;
	count(STAT_REFLECTED);
	return TC_ACT_UNSPEC;
failed:
	count(STAT_FAILED);
	return TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
