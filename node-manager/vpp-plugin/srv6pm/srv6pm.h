/*
 * srv6pm: alternate marking (RFC 9341) and exact per-flow, per-colour counting of SRv6 policies
 * in VPP, the same marks and counts as srv6pm's eBPF programs on Linux routers
 * (node-manager/bpf/monitor.c), so Linux and VPP nodes measure one flow together.
 *
 * Three feature nodes:
 *  - srv6pm-mark  (ip6-output of the ingress node's interfaces, after H.Encaps and the rewrite):
 *                 finds the flow by its SID list, marks the colour of the current block (AltMark
 *                 option in a Destination Options header before the SRH, or DSCP bits) and counts.
 *  - srv6pm-count (ip6-unicast of transit and egress nodes' interfaces, before the lookup and so
 *                 before an End.DT/DX decapsulates): counts marked packets per colour by FlowMonID
 *                 or, in DSCP mode, by SID list.
 *  - srv6pm-guard (ip6-unicast of the domain's boundary interfaces, before srv6pm-count):
 *                 neutralises marks that arrive from outside (AltMark -> PadN, DSCP bits cleared).
 */
#ifndef included_srv6pm_h
#define included_srv6pm_h

#include <vnet/vnet.h>
#include <vnet/ip/ip6_packet.h>
#include <vnet/ip/format.h>
#include <vnet/srv6/sr_packet.h>
#include <vppinfra/bihash_8_8.h>
#include <vppinfra/bihash_24_8.h>
#include <vppinfra/crc32.h>
#include <vppinfra/crypto/sha2.h>
#include <vnet/dpo/dpo.h>

#define SRV6PM_MAX_SEGMENTS 16
#define SRV6PM_MAX_FLOWS    65536
#define SRV6PM_MAX_FLOWMON  (1 << 20) /* FlowMonID is 20 bits (RFC 9343) */

#define SRV6PM_IP6OPT_PAD1    0x00
#define SRV6PM_IP6OPT_PADN    0x01
#define SRV6PM_IP6OPT_ALTMARK 0x12 /* RFC 9343 (IANA Destination and Hop-by-Hop Options) */
#define SRV6PM_ALTMARK_LEN    4
#define SRV6PM_DOH_LEN	      8 /* next header, length, option type and length, 4 octets */
#define SRV6PM_MAX_EXT_HEADERS 8
#define SRV6PM_MAX_OPTIONS     8

typedef enum
{
  SRV6PM_ROLE_NONE = 0,
  SRV6PM_ROLE_INGRESS = 1,
  SRV6PM_ROLE_TRANSIT = 2,
  SRV6PM_ROLE_EGRESS = 3,
} srv6pm_role_t;

typedef enum
{
  SRV6PM_MODE_ALTMARK = 1,
  SRV6PM_MODE_DSCP = 2,
} srv6pm_mode_t;

typedef enum
{
  SRV6PM_HOOK_MARK = 1,
  SRV6PM_HOOK_COUNT = 2,
  SRV6PM_HOOK_GUARD = 3,
  SRV6PM_N_HOOKS,
} srv6pm_hook_t;

/* What a node saw but could not count for a flow: the same reasons, in the same order, as the
 * eBPF programs' (maps.Reason), /srv6pm/packets in the stats segment. */
#define foreach_srv6pm_reason                                                 \
  _ (NOT_SRV6, "not SRv6: neither an SRH nor our mark")                      \
  _ (UNMARKED, "SRv6 without our mark: a policy not monitored")              \
  _ (NO_FLOW, "SID list or FlowMonID of no flow of this node")               \
  _ (PARSE_ERROR, "truncated or malformed headers")                          \
  _ (FOREIGN_MARK, "arrived already marked")                                 \
  _ (MARK_FAILED, "AltMark option not inserted: no room or over the MTU")    \
  _ (COUNTED, "counted for a flow")

typedef enum
{
#define _(sym, str) SRV6PM_REASON_##sym,
  foreach_srv6pm_reason
#undef _
    SRV6PM_N_REASONS,
} srv6pm_reason_t;

/* The SIDs of a flow kept in its first cache line: a lookup of a list of up to this many SIDs
 * reads that one line of the flow. */
#define SRV6PM_HOT_SEGMENTS 3

/* A flow as the nodes read it: one cache line, what a lookup by SID list checks (the key, the
 * role, the number of SIDs and the first SIDs) and what a count needs (the FlowMonID). */
typedef struct
{
  CLIB_CACHE_LINE_ALIGN_MARK (cacheline0);
  u64 key; /* srv6pm_sids_key() of the whole list */
  u32 flowmon_id;
  u8 n_segments;
  u8 role; /* srv6pm_role_t; NONE: a free slot */
  u8 pad[2];
  /* SRH order (first[0] is the last segment), as packets carry them */
  ip6_address_t first[SRV6PM_HOT_SEGMENTS];
} srv6pm_flow_t;

STATIC_ASSERT_SIZEOF (srv6pm_flow_t, CLIB_CACHE_LINE_BYTES);

/* A flow's whole SID list (SRH order), apart: read by a lookup only past the first
 * SRV6PM_HOT_SEGMENTS SIDs, and by the API and CLI. */
typedef struct
{
  ip6_address_t segments[SRV6PM_MAX_SEGMENTS];
} srv6pm_sids_t;

/* ---- STAMP Session-Reflector (reflect.c, reflect_node.c) ------------------------------------ */

/* What the reflector did with a STAMP packet sent to its port: /srv6pm/reflector in the stats
 * segment, in this order (the vpp driver reads them by these names). */
#define foreach_srv6pm_reflector_stat                                                \
  _ (RECEIVED, received, "STAMP packets received on the reflector's port")          \
  _ (REFLECTED, reflected, "answered")                                              \
  _ (NOT_FOR_US, not_for_us, "to another address, or the reflector disabled")       \
  _ (MALFORMED, malformed, "shorter than a test packet, or headers it cannot answer") \
  _ (AUTH_FAILURES, auth_failures, "authenticated: the base HMAC did not match")    \
  _ (TLV_INTEGRITY_FAILURES, tlv_integrity_failures, "HMAC TLV missing or wrong: TLVs returned with I") \
  _ (COUNTERS_UNAVAILABLE, counters_unavailable, "Direct Measurement of a block with no counts: U") \
  _ (RETURN_PATHS_REFUSED, return_paths_refused, "Return Path not declared for the sender: U") \
  _ (REPLIES_SUPPRESSED, replies_suppressed, "Return Path Control Code: no reply wanted") \
  _ (SEQUENCES_FULL, sequences_full, "stateful: a new sender beyond the bound, answered with 0")

typedef enum
{
#define _(sym, name, str) SRV6PM_REFLECTOR_##sym,
  foreach_srv6pm_reflector_stat
#undef _
    SRV6PM_REFLECTOR_N_STATS,
} srv6pm_reflector_stat_t;

#define SRV6PM_STAMP_MAX_SEQUENCES (1 << 16)
#define SRV6PM_STAMP_MAX_RETURN_PATH (4 + 16 * SRV6PM_MAX_SEGMENTS) /* one Segment List sub-TLV */
#define SRV6PM_STAMP_MAX_KEY 64

/* A session's counts at this node of its last two closed blocks (slot = block % 2), published by
 * the node manager when a block closes, from this plugin's counters. */
typedef struct
{
  u64 block[2];
  u32 rx[2]; /* the forward flow: the probes came in with it */
  u32 tx[2]; /* the reverse flow: the replies leave with it */
  u8 valid[2];
} srv6pm_stamp_blocks_t;

/* The Return Path TLV value a sender may send for a session: the SID list declared for it. */
typedef struct
{
  u16 len;
  u8 value[SRV6PM_STAMP_MAX_RETURN_PATH];
} srv6pm_stamp_path_t;

/* Where packets of one (address, SSID) go: the SR policy of a BSID, its DPO stacked on the
 * reflector node (replies) */
typedef struct
{
  ip6_address_t bsid;
  dpo_id_t dpo;
} srv6pm_stamp_steer_t;

typedef enum
{
  SRV6PM_STEER_REPLY = 1, /* the reflector's replies to a sender for a session */
  SRV6PM_STEER_PROBE = 2, /* a sender's probes to a reflector for a session */
} srv6pm_steer_kind_t;

typedef struct
{
  u8 enabled;
  u8 stateful;
  u8 authenticated;
  u16 port; /* host order; registered with udp6 while enabled */
  u16 error_estimate; /* host order, its own (the Z bit is the probe's) */
  ip6_address_t address;
  u64 period_ns; /* Direct Measurement's blocks */
  u64 allowed_dscp; /* bit d: replies may take DSCP d */
  clib_sha2_hmac_key_data_t key;

  srv6pm_stamp_blocks_t *blocks;       /* pool */
  uword *blocks_by_ssid;	       /* SSID -> pool index */
  srv6pm_stamp_path_t *paths;	       /* pool */
  clib_bihash_24_8_t path_by_session;  /* (sender, SSID) -> paths index */
  srv6pm_stamp_steer_t *steers;        /* pool */
  clib_bihash_24_8_t steer_by_session; /* (address, SSID, kind) -> steers index */
  clib_bihash_24_8_t sequences;	       /* (sender, SSID) -> next stateful sequence number */
  u32 n_sequences;

  vlib_simple_counter_main_t stats; /* srv6pm_reflector_stat_t */
} srv6pm_reflector_t;

/* ---- STAMP Session-Sender's packets (sender.c, sender_node.c) ------------------------------ */

#define SRV6PM_STAMP_MAX_DATA	1024 /* octets of a STAMP packet carried through the API */
#define SRV6PM_STAMP_MAX_QUEUED 65536

/* A packet to a sender's port, waiting for the node manager to read it. */
typedef struct
{
  u64 received_ns; /* T4: the frame reached srv6pm-stamp-receive */
  ip6_address_t source;
  ip6_address_t destination;
  u16 source_port;
  u16 destination_port;
  u8 hop_limit;
  u8 traffic_class;
  u16 len;
  u8 data[SRV6PM_STAMP_MAX_DATA];
} srv6pm_stamp_received_t;

typedef struct
{
  clib_spinlock_t lock;
  srv6pm_stamp_received_t *queue; /* vector, oldest first */
  u64 dropped;			  /* queue full, or longer than SRV6PM_STAMP_MAX_DATA */
  uword *ports;			  /* bitmap of the senders' UDP ports */
} srv6pm_sender_t;

typedef enum
{
  SRV6PM_STAMP_SEND_NEXT_LOOKUP,
  SRV6PM_STAMP_SEND_N_NEXT,
} srv6pm_stamp_send_next_t;

typedef enum
{
  SRV6PM_T1_KEEP = 0, /* the probe's own (authenticated: its HMAC covers it) */
  SRV6PM_T1_NTP = 1,
  SRV6PM_T1_PTP = 2,
} srv6pm_t1_format_t;

/* The next node a locally made probe takes from srv6pm-stamp-send. */
typedef struct
{
  u32 next_index;
  u8 t1_format; /* srv6pm_t1_format_t: srv6pm-stamp-send writes T1 */
} srv6pm_buffer_opaque_t;

#define srv6pm_buffer(b) ((srv6pm_buffer_opaque_t *) (b)->opaque2)

typedef struct
{
  u64 period_ns; /* 0: not configured, nothing is marked or counted */
  u64 instance_id;
  u8 mode; /* srv6pm_mode_t */
  u8 monitored_bit;
  u8 colour_bit;

  srv6pm_flow_t *flows; /* vector indexed by slot, cache-line aligned */
  srv6pm_sids_t *sids;	/* vector indexed by slot: the flows' whole SID lists */
  u32 n_flows;
  /* srv6pm_sids_key() -> slot, flows found by SID list; the key is its own bucket hash */
  clib_bihash_8_8_t slot_by_key;
  u32 *slot_by_flowmon; /* FlowMonID -> slot + 1 (0: none), transit and egress flows */

  vlib_combined_counter_main_t counters; /* slot * 2 + colour */
  vlib_simple_counter_main_t reasons;	 /* srv6pm_reason_t */
  uword *hooks[SRV6PM_N_HOOKS];		 /* bitmap of sw_if_index per hook */

  srv6pm_reflector_t reflector;
  srv6pm_sender_t sender;

  u16 msg_id_base;
  vnet_main_t *vnet_main;
} srv6pm_main_t;

extern srv6pm_main_t srv6pm_main;
extern vlib_node_registration_t srv6pm_mark_node;
extern vlib_node_registration_t srv6pm_count_node;
extern vlib_node_registration_t srv6pm_guard_node;
extern vlib_node_registration_t srv6pm_reflect_node;
extern vlib_node_registration_t srv6pm_stamp_send_node;
extern vlib_node_registration_t srv6pm_stamp_receive_node;

/* The flow key: a SID list (SRH order) folded into 64 bits. It only spreads flows (the whole
 * list is compared before a packet is counted) and only this plugin computes it, for the flows
 * it installs and the packets it sees: no other component reads it, so it need not be the fold
 * of the eBPF programs and domain/flowkey.py. Two CRC32C chains, one over the first and one over
 * the second half of every SID, run side by side: one crc32 instruction per word (SSE4.2, in
 * every x86-64-v2 build; the ARMv8 CRC32 extension), 2 x 3 cycles of latency for a 2-SID list,
 * where the multiply-xorshift fold took 4 dependent multiplies per SID. The key serves as the
 * bihash's bucket hash too (clib_bihash_*_with_hash), so its low half mixes both chains: a list
 * that differs only in the second half of its SIDs (::<i>) spreads like one that differs only in
 * the first. (high, low) = (A, A ^ B) keeps every bit of both chains. */
#define SRV6PM_KEY_SEED 0x9e3779b9U

#ifndef clib_crc32c_uses_intrinsics
#error "srv6pm needs the CRC32C instructions (x86-64 SSE4.2 or ARMv8 CRC32)"
#endif

static_always_inline u64
srv6pm_sids_key (const ip6_address_t *sids, u32 n)
{
  u32 a = SRV6PM_KEY_SEED ^ n, b = ~SRV6PM_KEY_SEED ^ n;
  for (u32 i = 0; i < n; i++)
    {
      a = clib_crc32c_u64 (a, clib_mem_unaligned (&sids[i].as_u64[0], u64));
      b = clib_crc32c_u64 (b, clib_mem_unaligned (&sids[i].as_u64[1], u64));
    }
  return (u64) a << 32 | (a ^ b);
}

int srv6pm_config_set (u64 period_ns, u8 mode, u8 monitored_bit, u8 colour_bit);
int srv6pm_flow_add (u32 slot, u8 role, u32 flowmon_id, const ip6_address_t *travel_order,
		     u8 n_segments);
int srv6pm_flow_del (u32 slot);
int srv6pm_hook_enable_disable (u32 sw_if_index, u8 hook, int enable);
u64 srv6pm_reason_total (srv6pm_reason_t reason);

/* The key of the reflector's tables: an address, an SSID and what the entry is for. */
static_always_inline void
srv6pm_session_key (clib_bihash_kv_24_8_t *kv, const ip6_address_t *address, u16 ssid, u8 kind)
{
  kv->key[0] = address->as_u64[0];
  kv->key[1] = address->as_u64[1];
  kv->key[2] = (u64) ssid | (u64) kind << 16;
  kv->value = 0;
}

typedef struct
{
  u8 enabled;
  u8 stateful;
  u16 port;
  u16 error_estimate;
  ip6_address_t address;
  u64 period_ns;
  u64 allowed_dscp;
  u8 key_len; /* 0: unauthenticated */
  u8 key[SRV6PM_STAMP_MAX_KEY];
} srv6pm_reflector_config_t;

int srv6pm_reflector_set (const srv6pm_reflector_config_t *c);
int srv6pm_reflector_blocks_set (u16 ssid, u64 block, u32 rx, u32 tx);
int srv6pm_reflector_blocks_clear (void);
int srv6pm_reflector_path_add_del (const ip6_address_t *sender, u16 ssid, const u8 *value,
				   u16 len, int is_add);
int srv6pm_sender_port_add_del (u16 port, int is_add);
int srv6pm_stamp_send (const ip6_address_t *source, const ip6_address_t *destination,
		       u16 source_port, u16 destination_port, u16 ssid, u8 traffic_class,
		       u8 t1_format, const u8 *data, u16 len);
void srv6pm_stamp_write_t1 (vlib_main_t *vm, vlib_buffer_t *b, u64 unix_ns);
u32 srv6pm_stamp_take (srv6pm_stamp_received_t *out, u32 max, u64 *dropped);
int srv6pm_steer_add_del (const ip6_address_t *address, u16 ssid, u8 kind,
			  const ip6_address_t *bsid, int is_add);

#endif /* included_srv6pm_h */
