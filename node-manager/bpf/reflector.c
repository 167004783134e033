// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * srv6pm STAMP Session-Reflector in the kernel (RFC 8762 section 4.3), on a tc ingress hook.
 *
 * srv6pm_reflect answers an unauthenticated STAMP test packet to the configured reflector address
 * and port in place: the probe becomes the reply, stateless (the sender's sequence number) or
 * stateful (a counter per sender address and SSID). The TLVs it knows are processed as the
 * userspace reflector does (RFC 8972 section 4, RFC 9503): Extra Padding is returned; Direct
 * Measurement gets this node's counts of the session's forward and reverse flows in the block
 * of the sender's timestamp (published by the node manager once the block is closed); a Return
 * Path naming the SID list declared for this sender and session is returned (the reply carries
 * the session's mark, which the node's rule for it steers into that SID list); Class of Service gets the DSCP and ECN the probe arrived with,
 * and the reply leaves with the DSCP it asks for unless the operator's list refuses it (RP set).
 * Each comes back with no flag set. A probe that
 * arrives SRv6-encapsulated for one of the node's decapsulating SIDs (End.DT6: segments left 0,
 * an IPv6 packet inside) is decapsulated first, as End.DT6 would. The reply then continues into
 * the kernel's routing: its destination is the sender, and its mark (reply_mark_base + SSID,
 * set when the session declared a return path for this sender) selects the node manager's
 * /128 SR policy for it, which encapsulates it into the session's return SID list, where it is
 * marked and counted as a packet of the reverse flow like any other.
 *
 * Everything else passes unchanged (TC_ACT_UNSPEC: the next filter, then the stack), to the
 * userspace reflector, which stays the reference: authenticated mode, other or malformed TLVs,
 * a block whose counts are not published, a Return Path not declared, TWAMP-Light lengths,
 * extension headers inside, and any probe while the reflector is not configured. What it passes
 * up, and why, is counted in srv6pm_reflector_stats.
 *
 * T2 is taken when the program starts, T3 just before it returns, both from CLOCK_TAI less the
 * TAI-UTC offset the node manager keeps in the configuration (the kernel has no UTC clock for
 * programs), in the format the probe's Error Estimate asks for (Z: PTPv2 truncated, TAI; else
 * NTP), as the userspace reflector writes them.
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
#define MAX_TLVS 8
#define MAX_TLV_BYTES 512
#define TLV_HLEN 4 /* struct tlv_header */
#define TLV_EXTRA_PADDING 1
#define TLV_CLASS_OF_SERVICE 4 /* DSCP1 (6 bits), DSCP2 (6), ECN (2), RP (2), reserved (16) */
#define TLV_DIRECT_MEASUREMENT 5 /* S_TxC, R_RxC, R_TxC */
#define TLV_RETURN_PATH 10
#define DM_LEN 12
#define COS_LEN 4
#define EE_Z 0x4000 /* Error Estimate: timestamps are PTPv2 truncated (RFC 8762 4.2.1) */
#define REPLY_DSCP_DEFAULT 0 /* the userspace reflector's socket sends with traffic class 0 */
#define MAX_RETURN_PATH_LEN (4 + 16 * 16) /* one SRv6 Segment List sub-TLV of 16 SIDs */
#define NTP_ERA_S (1ULL << 32)
#define NEXTHDR_ROUTING 43

/* What the program did with a packet for the reflector: srv6pm_reflector_stats's indexes
 * (kernel_reflector.Stat). */
enum reflector_stat {
	STAT_REFLECTED,	      /* answered here */
	STAT_PASSED_LENGTH,   /* shorter than the base (TWAMP-Light), or TLVs beyond the bound */
	STAT_PASSED_HEADERS,  /* extension headers around the UDP datagram */
	STAT_PASSED_DISABLED, /* no reflector configured */
	STAT_FAILED,	      /* a helper failed: the packet went on unchanged or was dropped */
	STAT_PASSED_TLV,      /* a TLV it does not process, or malformed */
	STAT_PASSED_COUNTS,   /* Direct Measurement for a block whose counts are not published */
	STAT_PASSED_RETURN_PATH, /* a Return Path not declared for this sender and session */
	STAT_PASSED_TIMESTAMP,	 /* Direct Measurement with a sender timestamp it cannot read */
	STAT_MAX,
};

/* Enums no map's type names (they index arrays) reach the object's BTF through this variable,
 * where tests/test_contract_btf.py compares them with Python by name and value. No program uses
 * it and libbpf skips its section: it is never loaded. */
struct btf_enums {
	enum reflector_stat stat;
} srv6pm_btf_enums SEC(".srv6pm.btf");

struct reflector_config {
	__u8 address[16];	 /* the reflector address probes are sent to */
	__u64 tai_offset_ns;	 /* CLOCK_TAI - CLOCK_REALTIME */
	__u64 period_ns;	 /* the marking period: Direct Measurement's blocks */
	__u64 ptp_offset_ns;	 /* TAI - UTC as PTP timestamps count it */
	__u64 allowed_dscp;	 /* Class of Service: bit d set = replies may take DSCP d */
	__u16 port;		 /* network order */
	__u16 error_estimate;	 /* the reflector's own, network order (RFC 8762 4.2.1) */
	__u8 enabled;
	__u8 stateful;
	__u8 pad[2];
	__u32 reply_mark_base;	 /* replies of a declared return path carry this + SSID (0: none) */
	__u8 pad2[4];
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

/* A session's counts at this node of its last two closed blocks (slot = block % 2). */
struct block_counts {
	__u64 block[2];
	__u32 rx[2]; /* the forward flow: the session's probes came in with it */
	__u32 tx[2]; /* the reverse flow: the replies go out with it */
};

/* The Return Path TLV value a sender may send for a session: the declared SID list. */
struct return_path {
	__u32 len;
	__u8 value[MAX_RETURN_PATH_LEN];
};


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

/* By SSID (host order): written by the node manager when a block closes. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct block_counts);
} srv6pm_reflector_blocks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct sequence_key);
	__type(value, struct return_path);
} srv6pm_reflector_paths SEC(".maps");

/* A Return Path TLV's value as received, to compare (too large for the stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct return_path);
} srv6pm_reflector_scratch SEC(".maps");

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

/* A STAMP timestamp of CLOCK_TAI time `tai_ns`: PTPv2 truncated (TAI) or NTP (UTC). */
static __always_inline void stamp_time(const struct reflector_config *cfg, __u64 tai_ns, int ptp,
				       __be32 *s, __be32 *frac)
{
	__u64 utc_ns = tai_ns - cfg->tai_offset_ns;

	if (ptp) {
		__u64 ptp_ns = utc_ns + cfg->ptp_offset_ns;

		*s = bpf_htonl((__u32)(ptp_ns / NS_PER_S));
		*frac = bpf_htonl((__u32)(ptp_ns % NS_PER_S));
		return;
	}
	ntp(utc_ns, s, frac);
}

/* Unix ns of the sender's timestamp as its Error Estimate's Z bit says; 0 when unreadable. */
static __always_inline __u64 sender_unix_ns(const struct reflector_config *cfg, const __u8 *probe)
{
	__u64 s = bpf_ntohl(*(__be32 *)(probe + 4)), frac = bpf_ntohl(*(__be32 *)(probe + 8));
	__u64 ptp_ns;

	if (*(__be16 *)(probe + 12) & bpf_htons(EE_Z)) {
		if (frac >= NS_PER_S)
			return 0; /* nanoseconds out of range: the reference reads nothing either */
		ptp_ns = s * NS_PER_S + frac;
		return ptp_ns > cfg->ptp_offset_ns ? ptp_ns - cfg->ptp_offset_ns : 0;
	}
	if (!(s & 0x80000000))
		s += NTP_ERA_S; /* era 1: 2036 .. 2104, as the userspace reflector reads it */
	return (s - NTP_UNIX_OFFSET_S) * NS_PER_S + ((frac * NS_PER_S + (1ULL << 31)) >> 32);
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

static __always_inline __u32 reply_seq(const struct reflector_config *cfg,
				       struct sequence_key *key, __be32 sender_seq)
{
	__u32 first = 1, *next;

	if (!cfg->stateful)
		return sender_seq;
	next = bpf_map_lookup_elem(&srv6pm_reflector_seq, key);
	if (!next) {
		bpf_map_update_elem(&srv6pm_reflector_seq, key, &first, BPF_NOEXIST);
		return 0;
	}
	return bpf_htonl(__sync_fetch_and_add(next, 1));
}

struct tlv_header {
	__u8 flags; /* U, M, I (RFC 8972 section 4.1) */
	__u8 type;
	__be16 len;
};

/* Two values compared 4 octets at a time (a bpf_loop callback's state). */
struct word_compare {
	const __u8 *got;
	const __u8 *declared;
	__u32 len;
	int differ;
};

/* What a walk over a probe's TLVs needs and finds (bpf_loop callbacks share it). */
struct tlv_walk {
	struct __sk_buff *skb;
	const struct reflector_config *cfg;
	struct sequence_key key;
	__u64 sender_ns; /* the sender's timestamp: the Direct Measurement block */
	__u32 off;	 /* the next TLV, from L3 */
	__u32 end;
	__u32 l4;
	__u32 dm_off; /* R_RxC of the Direct Measurement TLV, from the UDP header; 0: none */
	__u32 cos_off; /* the Class of Service TLV's value, from the UDP header; 0: none */
	__u8 dscp1;    /* the DSCP it asks the reply to take */
	__be32 rx;
	__be32 tx;
	__s64 csum;
	int why; /* the statistic of a TLV it does not process; 0: all processed */
};

static long same_words(__u32 i, void *data)
{
	struct word_compare *cmp = data;
	__u32 at = i * 4;

	if (at >= cmp->len || at > MAX_RETURN_PATH_LEN - 4)
		return 1;
	if (*(__u32 *)(cmp->got + at) != *(__u32 *)(cmp->declared + at)) {
		cmp->differ = 1;
		return 1;
	}
	return 0;
}

static __always_inline int same_return_path(struct tlv_walk *w, __u32 off, __u32 len)
{
	struct return_path *declared = bpf_map_lookup_elem(&srv6pm_reflector_paths, &w->key);
	struct return_path *got;
	__u32 zero = 0;

	/* the SRv6 Segment List sub-TLV: 4 + 16 n octets */
	if (!declared || declared->len != len || len < 4 || len > MAX_RETURN_PATH_LEN || len % 4)
		return 0;
	got = bpf_map_lookup_elem(&srv6pm_reflector_scratch, &zero);
	if (!got || bpf_skb_load_bytes(w->skb, off, got->value, len) < 0)
		return 0;
	struct word_compare cmp = {got->value, declared->value, len, 0};
	bpf_loop(MAX_RETURN_PATH_LEN / 4, same_words, &cmp, 0);
	return !cmp.differ;
}

/* One TLV checked, and Direct Measurement's counts found; stops at the end or a refusal. */
static long check_tlv(__u32 i, void *data)
{
	struct tlv_walk *w = data;
	struct tlv_header tlv;
	__u32 len;

	if (w->off >= w->end)
		return 1;
	if (w->off + TLV_HLEN > w->end ||
	    bpf_skb_load_bytes(w->skb, w->off, &tlv, sizeof(tlv)) < 0) {
		w->why = STAT_PASSED_TLV;
		return 1;
	}
	len = bpf_ntohs(tlv.len);
	if (w->off + TLV_HLEN + len > w->end) {
		w->why = STAT_PASSED_TLV; /* malformed: the reference sets M */
		return 1;
	}
	if (tlv.type == TLV_DIRECT_MEASUREMENT) {
		__u32 ssid = bpf_ntohs(w->key.ssid);
		struct block_counts *counts;
		__u64 block;
		__u32 slot;

		if (len != DM_LEN || !w->cfg->period_ns || w->dm_off) {
			w->why = STAT_PASSED_TLV;
			return 1;
		}
		if (!w->sender_ns) {
			w->why = STAT_PASSED_TIMESTAMP;
			return 1;
		}
		block = w->sender_ns / w->cfg->period_ns - 1;
		slot = block & 1;
		counts = bpf_map_lookup_elem(&srv6pm_reflector_blocks, &ssid);
		if (!counts || counts->block[slot] != block) {
			w->why = STAT_PASSED_COUNTS;
			return 1;
		}
		w->dm_off = w->off + TLV_HLEN + 4 - w->l4;
		w->rx = bpf_htonl(counts->rx[slot]);
		w->tx = bpf_htonl(counts->tx[slot]);
	} else if (tlv.type == TLV_CLASS_OF_SERVICE) {
		__u8 first;

		if (len != COS_LEN || w->cos_off ||
		    bpf_skb_load_bytes(w->skb, w->off + TLV_HLEN, &first, 1) < 0) {
			w->why = STAT_PASSED_TLV;
			return 1;
		}
		w->cos_off = w->off + TLV_HLEN - w->l4;
		w->dscp1 = first >> 2;
	} else if (tlv.type == TLV_RETURN_PATH) {
		if (!same_return_path(w, w->off + TLV_HLEN, len)) {
			w->why = STAT_PASSED_RETURN_PATH;
			return 1;
		}
	} else if (tlv.type != TLV_EXTRA_PADDING) {
		w->why = STAT_PASSED_TLV;
		return 1;
	}
	w->off += TLV_HLEN + len;
	return 0;
}

/*
 * `len` (1 or 4) octets at `off` (from the UDP header) set to `value`, the change folded into
 * `csum`. One's complement sums add 16-bit words and do not care which word is which, so the old
 * and new octets are compared in place in their words (an odd offset is a word's second octet)
 * with zeros around them: nothing beyond them is read, even at the end of the packet.
 */
static __always_inline int patch(struct __sk_buff *skb, __u32 l4, __u32 off, const __u8 *value,
				 __u32 len, __s64 *csum)
{
	__u8 old[8] = {}, new[8] = {};
	__u32 at = off & 1;

	/* hidden from the compiler, which would OR it into the stack address: the verifier
	 * allows only adds to pointers */
	asm volatile("" : "+r"(at));
	if (bpf_skb_load_bytes(skb, l4 + off, old + at, len) < 0)
		return -1;
#pragma unroll
	for (__u32 i = 0; i < 4; i++)
		if (i < len)
			new[at + i] = value[i];
	*csum = bpf_csum_diff((__be32 *)old, sizeof(old), (__be32 *)new, sizeof(new), *csum);
	return *csum < 0 || bpf_skb_store_bytes(skb, l4 + off, value, len, 0) < 0 ? -1 : 0;
}

/* One TLV of the reply with its flags cleared: the TLVs it processes come back with none. */
static long clear_flags(__u32 i, void *data)
{
	struct tlv_walk *w = data;
	struct tlv_header tlv;
	__u8 zero = 0;

	if (w->off >= w->end)
		return 1;
	if (bpf_skb_load_bytes(w->skb, w->off, &tlv, sizeof(tlv)) < 0) {
		w->why = STAT_FAILED;
		return 1;
	}
	if (tlv.flags && patch(w->skb, w->l4, w->off - w->l4, &zero, 1, &w->csum) < 0) {
		w->why = STAT_FAILED;
		return 1;
	}
	w->off += TLV_HLEN + bpf_ntohs(tlv.len);
	return 0;
}

SEC("tc")
int srv6pm_reflect(struct __sk_buff *skb)
{
	__u64 received = bpf_ktime_get_tai_ns();
	const struct reflector_config *cfg;
	struct stamp_reply reply = {};
	struct tlv_walk w = {};
	__u8 probe[STAMP_LEN];
	struct ipv6hdr ip6;
	struct udphdr udp;
	__u32 zero = 0, l4, udp_len;
	__u8 received_class, reply_class;
	__s64 csum;
	__be16 ptp;
	int outer;

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
	l4 = L3_OFF + outer + IPV6_HLEN;
	if (bpf_skb_load_bytes(skb, l4, &udp, sizeof(udp)) < 0 || udp.dest != cfg->port)
		return TC_ACT_UNSPEC;
	if (!cfg->enabled) {
		count(STAT_PASSED_DISABLED);
		return TC_ACT_UNSPEC;
	}
	udp_len = bpf_ntohs(udp.len);
	if (udp_len < sizeof(udp) + STAMP_LEN || udp_len > sizeof(udp) + STAMP_LEN + MAX_TLV_BYTES ||
	    bpf_ntohs(ip6.payload_len) != udp_len) {
		count(STAT_PASSED_LENGTH);
		return TC_ACT_UNSPEC;
	}
	if (bpf_skb_load_bytes(skb, l4 + sizeof(udp), probe, STAMP_LEN) < 0)
		return TC_ACT_UNSPEC;
	w.skb = skb;
	w.cfg = cfg;
	__builtin_memcpy(w.key.sender, &ip6.saddr, 16);
	__builtin_memcpy(&w.key.ssid, probe + 14, 2);
	w.sender_ns = sender_unix_ns(cfg, probe);
	w.off = l4 + sizeof(udp) + STAMP_LEN;
	w.end = l4 + udp_len;
	w.l4 = l4;
	bpf_loop(MAX_TLVS, check_tlv, &w, 0);
	if (!w.why && w.off < w.end)
		w.why = STAT_PASSED_TLV; /* more TLVs than it walks */
	if (w.why) {
		count(w.why);
		return TC_ACT_UNSPEC;
	}

	/* The reply, from the probe's fields (RFC 8762 4.3.1); octets 16-43 of a probe are MBZ. */
	__builtin_memcpy(&reply.sender_seq, probe, 4);
	__builtin_memcpy(&reply.sender_timestamp_s, probe + 4, 8);
	__builtin_memcpy(&reply.sender_error_estimate, probe + 12, 2);
	reply.ssid = w.key.ssid;
	reply.sender_ttl = ip6.hop_limit;
	/* the reflector's own error, in the timestamp format the sender asked for */
	ptp = reply.sender_error_estimate & bpf_htons(EE_Z);
	reply.error_estimate = (cfg->error_estimate & ~bpf_htons(EE_Z)) | ptp;
	reply.seq = reply_seq(cfg, &w.key, reply.sender_seq);
	stamp_time(cfg, received, ptp, &reply.receive_s, &reply.receive_frac);
	received_class = (((__u8 *)&ip6)[0] << 4) | (((__u8 *)&ip6)[1] >> 4);
	if (w.cos_off && (cfg->allowed_dscp >> w.dscp1) & 1)
		reply_class = w.dscp1 << 2;
	else
		reply_class = REPLY_DSCP_DEFAULT << 2;

	/* From here on the packet changes: a failure drops it rather than pass a half-made one. */
	if (outer && bpf_skb_adjust_room(skb, -outer, BPF_ADJ_ROOM_MAC, 0) < 0) {
		count(STAT_FAILED);
		return TC_ACT_UNSPEC; /* nothing changed yet */
	}
	l4 = L3_OFF + IPV6_HLEN;
	{
		struct in6_addr sender = ip6.saddr;
		__be16 sender_port = udp.source;
		__u8 hop_limit = REPLY_HOP_LIMIT;
		/* version, the reply's traffic class, the flow label as received */
		__u8 first[2] = {0x60 | reply_class >> 4,
				 (__u8)(reply_class << 4) | (((__u8 *)&ip6)[1] & 0x0F)};

		/* Addresses and ports swap places: the UDP checksum does not change for them. */
		if (bpf_skb_store_bytes(skb, L3_OFF, first, 2, 0) < 0 ||
		    bpf_skb_store_bytes(skb, L3_OFF + offsetof(struct ipv6hdr, saddr), &ip6.daddr, 16,
					0) < 0 ||
		    bpf_skb_store_bytes(skb, L3_OFF + offsetof(struct ipv6hdr, daddr), &sender, 16,
					0) < 0 ||
		    bpf_skb_store_bytes(skb, L3_OFF + offsetof(struct ipv6hdr, hop_limit), &hop_limit,
					1, 0) < 0 ||
		    bpf_skb_store_bytes(skb, l4 + offsetof(struct udphdr, source), &udp.dest, 2, 0) <
			    0 ||
		    bpf_skb_store_bytes(skb, l4 + offsetof(struct udphdr, dest), &sender_port, 2, 0) <
			    0)
			goto failed;
	}
	/* The TLVs: each returned with no flag set, Direct Measurement with this node's counts. */
	w.l4 = l4;
	w.off = l4 + sizeof(udp) + STAMP_LEN;
	w.end = l4 + udp_len;
	bpf_loop(MAX_TLVS, clear_flags, &w, 0);
	csum = w.csum;
	if (w.why || (w.dm_off && (patch(skb, l4, w.dm_off, (__u8 *)&w.rx, 4, &csum) < 0 ||
				   patch(skb, l4, w.dm_off + 4, (__u8 *)&w.tx, 4, &csum) < 0)))
		goto failed;
	if (w.cos_off) {
		/* DSCP1 as asked, DSCP2 and ECN as received, RP: the operator refused DSCP1 */
		__u32 rp = !((cfg->allowed_dscp >> w.dscp1) & 1);
		__be32 cos = bpf_htonl((__u32)w.dscp1 << 26 | (__u32)received_class << 18 | rp << 16);

		if (patch(skb, l4, w.cos_off, (__u8 *)&cos, 4, &csum) < 0)
			goto failed;
	}
	stamp_time(cfg, bpf_ktime_get_tai_ns(), ptp, &reply.timestamp_s, &reply.timestamp_frac);
	csum = bpf_csum_diff((__be32 *)probe, STAMP_LEN, (__be32 *)&reply, STAMP_LEN, csum);
	if (csum < 0 || bpf_skb_store_bytes(skb, l4 + sizeof(udp), &reply, STAMP_LEN, 0) < 0 ||
	    bpf_l4_csum_replace(skb, l4 + offsetof(struct udphdr, check), 0, csum,
				BPF_F_MARK_MANGLED_0) < 0)
		goto failed;
	/* The mark steers the reply into the session's declared return path (the node manager's
	 * rule and table for it), whatever the sender's address is routed by. */
	if (cfg->reply_mark_base && bpf_map_lookup_elem(&srv6pm_reflector_paths, &w.key))
		skb->mark = cfg->reply_mark_base + bpf_ntohs(w.key.ssid);
	count(STAT_REFLECTED);
	return TC_ACT_UNSPEC;
failed:
	count(STAT_FAILED);
	return TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
