/*
 * srv6pm-reflect: the STAMP Session-Reflector (RFC 8762 section 4.3) in VPP. udp6 dispatch hands
 * it the test packets sent to its port on this node (after ip6-local, so after any End.DT6
 * decapsulation); it turns each into its reply in place and sends it on, without a trip to any
 * userspace process.
 *
 * As srv6pm's userspace reflector (twamp/reflector.py), which stays the reference:
 *  - unauthenticated (44 octets, TWAMP-Light senders from 14) and authenticated mode (112, the
 *    base HMAC-SHA-256 and the HMAC TLV of RFC 8972 section 4.8); stateless (the sender's
 *    sequence number) or stateful (a counter per sender address and SSID);
 *  - T2 and T3 in the format the probe's Error Estimate asks for (Z: PTPv2 truncated, TAI; else
 *    NTP); T2 when the frame reaches this node, T3 just before the checksum (and the HMAC);
 *  - TLVs flagged as RFC 8972 section 4 says: U on a type it does not process, M on a malformed
 *    one and U on every one after it, I on all when the HMAC TLV check fails; in authenticated
 *    mode the reply's TLVs end with one HMAC TLV (section 4.8), the probe's where it was, else a
 *    new one after them (a probe's missing, misplaced or repeated one is an I); processed:
 *    Extra Padding, Direct Measurement (this node's counts of the session's flows in the block
 *    of the sender's timestamp, published by the node manager from this plugin's counters; U
 *    when there are none), Class of Service (DSCP2 and ECN as received, the reply takes DSCP1
 *    unless the operator's list refuses it: RP), Return Path (RFC 9503: only the SID list
 *    declared for this sender and session; a Control Code asking for no reply is honoured, one
 *    asking for a reply on the incoming link gets U; sub-TLVs that do not parse: M);
 *  - the reply leaves by the session's declared return path (the SR policy the node manager
 *    named for this sender and SSID), else by the FIB.
 * Packets it cannot verify or parse are counted and dropped (a reflector never answers what it
 * cannot verify).
 */
#include <vlib/vlib.h>
#include <vnet/vnet.h>
#include <vnet/ip/ip6.h>
#include <vnet/ip/ip6_packet.h>
#include <vnet/udp/udp_packet.h>
#include <srv6pm/srv6pm.h>
#include <srv6pm/stamp_time.h>

#define STAMP_LEN	   44  /* unauthenticated base */
#define STAMP_AUTH_LEN	   112 /* authenticated base */
#define STAMP_HMAC_AT	   96  /* the base HMAC covers octets 0-95 */
#define STAMP_HMAC_LEN	   16
#define TWAMP_LIGHT_MIN    14 /* Sequence Number, Timestamp, Error Estimate */
#define REPLY_HOP_LIMIT	   64 /* what a local socket gives a reply */
#define EE_Z		   0x4000

#define TLV_HLEN	   4
#define TLV_FLAG_U	   0x80
#define TLV_FLAG_M	   0x40
#define TLV_FLAG_I	   0x20
#define TLV_EXTRA_PADDING  1
#define TLV_CLASS_OF_SERVICE 4
#define TLV_DIRECT_MEASUREMENT 5
#define TLV_HMAC	   8
#define TLV_RETURN_PATH	   10
#define TLV_LAST_KNOWN	   11 /* RFC 8972, RFC 9503, RFC 9534 types: 1 .. 11 */
#define SUB_TLV_CONTROL_CODE 1
#define SUB_TLV_RETURN_ADDRESS 2
#define SUB_TLV_SEGMENT_LIST 4

typedef enum
{
  SRV6PM_REFLECT_NEXT_DROP,
  SRV6PM_REFLECT_NEXT_LOOKUP,
  SRV6PM_REFLECT_N_NEXT,
} srv6pm_reflect_next_t;

typedef struct
{
  u32 stat;
  u16 ssid;
  u32 sender_seq;
} srv6pm_reflect_trace_t;

static u8 *
format_srv6pm_reflect_trace (u8 *s, va_list *args)
{
  CLIB_UNUSED (vlib_main_t * vm) = va_arg (*args, vlib_main_t *);
  CLIB_UNUSED (vlib_node_t * node) = va_arg (*args, vlib_node_t *);
  srv6pm_reflect_trace_t *t = va_arg (*args, srv6pm_reflect_trace_t *);

  return format (s, "srv6pm-reflect: ssid %u sender seq %u outcome %u", t->ssid, t->sender_seq,
		 t->stat);
}

static_always_inline void
srv6pm_hmac (const clib_sha2_hmac_key_data_t *key, const u8 *a, u32 a_len, const u8 *b,
	     u32 b_len, u8 *digest)
{
  clib_sha2_hmac_ctx_t ctx;
  u8 full[32];

  clib_sha2_hmac_init (&ctx, CLIB_SHA2_256, (clib_sha2_hmac_key_data_t *) key);
  clib_sha2_hmac_update (&ctx, a, a_len);
  if (b_len)
    clib_sha2_hmac_update (&ctx, b, b_len);
  clib_sha2_hmac_final (&ctx, full);
  clib_memcpy (digest, full, STAMP_HMAC_LEN);
}

static_always_inline int
srv6pm_same_digest (const u8 *a, const u8 *b)
{
  u8 diff = 0; /* constant time */

  for (int i = 0; i < STAMP_HMAC_LEN; i++)
    diff |= a[i] ^ b[i];
  return diff == 0;
}

/* Where the TLVs of a packet are (offsets from the STAMP packet): they start at its base and
 * follow one another by their Length, up to `wellformed`; then the first malformed one (the
 * rest of the packet), and the first well-formed HMAC TLV. */
typedef struct
{
  u16 start;	  /* the base's end */
  u16 n;	  /* well-formed TLVs */
  u16 wellformed; /* where they end */
  u16 malformed; /* offset of a TLV whose header or Length runs past the end; 0: none */
  u16 hmac;	 /* offset of the first HMAC TLV of 16 octets; 0: none */
  u16 end;	 /* where the last TLV ends (the end of the packet after a malformed one) */
  u8 hmac_last;	 /* only Extra Padding after it */
  u8 covered;	 /* TLVs other than Extra Padding are present: the HMAC TLV is required */
} srv6pm_tlvs_t;

static_always_inline u16
srv6pm_tlv_len (const u8 *p, u16 off)
{
  return clib_net_to_host_u16 (clib_mem_unaligned (p + off + 2, u16));
}

static_always_inline void
srv6pm_frame_tlvs (const u8 *p, u32 start, u32 end, srv6pm_tlvs_t *t)
{
  u32 off = start, zeros = end;

  clib_memset (t, 0, sizeof (*t));
  t->start = start;
  /* zeros from where a TLV would start to the end: MBZ padding, not TLVs (type 0 is
   * reserved); found once, so a packet of empty TLVs costs one walk */
  while (zeros > start && !p[zeros - 1])
    zeros--;
  while (off < end)
    {
      if (off >= zeros)
	break;
      if (end - off < TLV_HLEN || off + TLV_HLEN + srv6pm_tlv_len (p, off) > end)
	{
	  t->malformed = off;
	  break;
	}
      u8 type = p[off + 1];
      if (type == TLV_HMAC && srv6pm_tlv_len (p, off) == STAMP_HMAC_LEN && !t->hmac)
	{
	  t->hmac = off;
	  t->hmac_last = 1;
	}
      else if (type != TLV_EXTRA_PADDING)
	{
	  /* an HMAC TLV of another length is malformed, not an HMAC TLV: covered too */
	  t->covered = 1;
	  t->hmac_last = 0;
	}
      t->n++;
      off += TLV_HLEN + srv6pm_tlv_len (p, off);
    }
  t->wellformed = t->malformed ? t->malformed : off;
  t->end = t->malformed ? end : off;
  if (t->malformed)
    {
      /* whatever it is, it is not Extra Padding, and the HMAC TLV is not the last TLV */
      t->covered = 1;
      t->hmac_last = 0;
    }
}

/* A Return Path TLV's sub-TLVs (RFC 9503 section 4.1), read as the userspace reflector reads
 * them; 1 when they do not parse (the TLV is malformed). */
typedef struct
{
  u8 control_code;  /* a Control Code sub-TLV is present */
  u8 reply_wanted;  /* its Reply Requested flag */
  u8 segment_list;  /* an SRv6 Segment List sub-TLV is present, not empty */
  u8 other;	    /* a Return Address, an SR-MPLS label stack or an unknown sub-TLV */
} srv6pm_return_path_t;

static_always_inline int
srv6pm_return_path_parse (const u8 *v, u16 len, srv6pm_return_path_t *rp)
{
  u8 seen_address = 0, seen_list = 0;

  clib_memset (rp, 0, sizeof (*rp));
  for (u32 off = 0; off < len;)
    {
      if (len - off < TLV_HLEN || off + TLV_HLEN + srv6pm_tlv_len (v, off) > len)
	return 1;
      u8 type = v[off + 1];
      u16 l = srv6pm_tlv_len (v, off);
      if (type == SUB_TLV_CONTROL_CODE)
	{
	  if (rp->control_code || l != 4)
	    return 1;
	  rp->control_code = 1;
	  rp->reply_wanted = v[off + TLV_HLEN + 3] & 1;
	}
      else if (type == SUB_TLV_RETURN_ADDRESS)
	{
	  if (seen_address || (l != 4 && l != 16))
	    return 1;
	  seen_address = rp->other = 1;
	}
      else if (type == SUB_TLV_SEGMENT_LIST)
	{
	  if (seen_list || l % 16)
	    return 1;
	  seen_list = 1;
	  rp->segment_list = l > 0;
	}
      else
	rp->other = 1;
      off += TLV_HLEN + l;
    }
  return 0;
}

/* What processing the TLVs decided about the reply. */
typedef struct
{
  u8 wanted;	  /* 0: a Control Code asked for no reply */
  u8 tc;	  /* the reply's Traffic Class */
} srv6pm_reply_t;

static_always_inline int
srv6pm_block_counts (srv6pm_reflector_t *r, u16 ssid, u64 sender_ns, u32 *rx, u32 *tx)
{
  if (!r->period_ns || !sender_ns || sender_ns / r->period_ns == 0)
    return 0;
  uword *p = hash_get (r->blocks_by_ssid, ssid);
  if (!p)
    return 0;
  srv6pm_stamp_blocks_t *b = pool_elt_at_index (r->blocks, p[0]);
  u64 block = sender_ns / r->period_ns - 1; /* the probe reports the block before its own */
  u32 slot = block & 1;
  if (!b->valid[slot] || b->block[slot] != block)
    return 0;
  *rx = b->rx[slot];
  *tx = b->tx[slot];
  return 1;
}

static_always_inline int
srv6pm_declared_path (srv6pm_reflector_t *r, const ip6_address_t *sender, u16 ssid,
		      const u8 *value, u16 len)
{
  clib_bihash_kv_24_8_t kv;

  srv6pm_session_key (&kv, sender, ssid, 0);
  if (clib_bihash_search_24_8 (&r->path_by_session, &kv, &kv))
    return 0;
  srv6pm_stamp_path_t *path = pool_elt_at_index (r->paths, kv.value);
  /* one Segment List sub-TLV: its flags are not part of the path */
  return path->len == len && !memcmp (path->value + 1, value + 1, len - 1);
}

/* The flags of every TLV, and the recognised ones acted on (RFC 8972 section 4). */
static_always_inline void
srv6pm_process_tlvs (vlib_main_t *vm, srv6pm_reflector_t *r, u8 *p, const srv6pm_tlvs_t *t,
		     int integrity_failed, const ip6_address_t *sender, u16 ssid, u64 sender_ns,
		     u8 received_tc, srv6pm_reply_t *reply, u32 thread_index)
{
  u8 stopped = 0, extra = integrity_failed ? TLV_FLAG_I : 0;
  srv6pm_return_path_t rp;

  for (u32 off = t->start, len; off < t->wellformed; off += TLV_HLEN + len)
    {
      len = srv6pm_tlv_len (p, off);
      u8 type = p[off + 1], *v = p + off + TLV_HLEN, flags = 0;

      if (stopped && type != TLV_HMAC)
	flags = TLV_FLAG_U;
      else if (type == 0 || type > TLV_LAST_KNOWN)
	flags = TLV_FLAG_U;
      else if ((type == TLV_DIRECT_MEASUREMENT && len != 12) ||
	       (type == TLV_CLASS_OF_SERVICE && len != 4) || (type == TLV_HMAC && len != 16) ||
	       (type == TLV_RETURN_PATH && srv6pm_return_path_parse (v, len, &rp)))
	{
	  flags = TLV_FLAG_M;
	  stopped = 1;
	}
      else if (integrity_failed)
	;
      else if (type == TLV_DIRECT_MEASUREMENT)
	{
	  u32 rx, tx;
	  if (srv6pm_block_counts (r, ssid, sender_ns, &rx, &tx))
	    {
	      clib_mem_unaligned (v + 4, u32) = clib_host_to_net_u32 (rx);
	      clib_mem_unaligned (v + 8, u32) = clib_host_to_net_u32 (tx);
	    }
	  else
	    {
	      /* no counts for this block: said with U, never with zeros read as a measurement */
	      flags = TLV_FLAG_U;
	      vlib_increment_simple_counter (&r->stats, thread_index,
					     SRV6PM_REFLECTOR_COUNTERS_UNAVAILABLE, 1);
	    }
	}
      else if (type == TLV_CLASS_OF_SERVICE)
	{
	  u8 dscp1 = v[0] >> 2;
	  u32 refused = !((r->allowed_dscp >> dscp1) & 1);
	  if (!refused)
	    reply->tc = dscp1 << 2;
	  clib_mem_unaligned (v, u32) =
	    clib_host_to_net_u32 ((u32) dscp1 << 26 | (u32) received_tc << 18 | refused << 16);
	}
      else if (type == TLV_RETURN_PATH)
	{
	  if (rp.control_code && !rp.reply_wanted)
	    reply->wanted = 0; /* no reply requested (one-way measurement) */
	  else if (rp.control_code)
	    flags = TLV_FLAG_U; /* a reply on the link it came by: not pinned here */
	  else if (!rp.segment_list || rp.other || !srv6pm_declared_path (r, sender, ssid, v, len))
	    {
	      flags = TLV_FLAG_U; /* nothing on the wire changes where replies go */
	      vlib_increment_simple_counter (&r->stats, thread_index,
					     SRV6PM_REFLECTOR_RETURN_PATHS_REFUSED, 1);
	    }
	}
      else if (type != TLV_EXTRA_PADDING && type != TLV_HMAC)
	flags = TLV_FLAG_U; /* known, but not processed here */
      p[off] = flags | extra;
    }
  if (t->malformed)
    p[t->malformed] = TLV_FLAG_M | extra;
}

/* The TLVs less the sender's HMAC TLVs, then a new HMAC TLV after them, with the flags the
 * sender's first one got (its value is written last); returns its offset. */
static_always_inline u32
srv6pm_append_hmac (u8 *p, const srv6pm_tlvs_t *t)
{
  u32 w = t->start;
  u8 flags = 0, seen = 0;

  for (u32 off = t->start, l; off < t->wellformed; off += l)
    {
      l = TLV_HLEN + srv6pm_tlv_len (p, off);
      if (p[off + 1] == TLV_HMAC && l == TLV_HLEN + STAMP_HMAC_LEN)
	{
	  flags = seen ? flags : p[off];
	  seen = 1;
	  continue;
	}
      memmove (p + w, p + off, l); /* w <= off: to the left, over what was read */
      w += l;
    }
  if (t->malformed)
    {
      memmove (p + w, p + t->malformed, t->end - t->malformed);
      w += t->end - t->malformed;
    }
  p[w] = flags;
  p[w + 1] = TLV_HMAC;
  clib_mem_unaligned (p + w + 2, u16) = clib_host_to_net_u16 (STAMP_HMAC_LEN);
  return w;
}

static_always_inline u32
srv6pm_next_sequence (srv6pm_reflector_t *r, const ip6_address_t *sender, u16 ssid,
		      u32 thread_index)
{
  clib_bihash_kv_24_8_t kv;
  u32 seq = 0;

  srv6pm_session_key (&kv, sender, ssid, 0);
  if (!clib_bihash_search_24_8 (&r->sequences, &kv, &kv))
    seq = kv.value;
  else if (r->n_sequences >= SRV6PM_STAMP_MAX_SEQUENCES)
    {
      /* a flood of new senders: they are answered with 0, the senders known keep theirs */
      vlib_increment_simple_counter (&r->stats, thread_index, SRV6PM_REFLECTOR_SEQUENCES_FULL,
				     1);
      return 0;
    }
  else
    clib_atomic_fetch_add (&r->n_sequences, 1);
  kv.value = (u32) (seq + 1);
  clib_bihash_add_del_24_8 (&r->sequences, &kv, 1);
  return seq;
}

/* One probe made its reply in place; the statistic that says what happened. */
static_always_inline u32
srv6pm_reflect_one (vlib_main_t *vm, vlib_node_runtime_t *node, srv6pm_reflector_t *r,
		    vlib_buffer_t *b, u64 received_ns, u32 *next, u16 *ssid_out, u32 *seq_out,
		    u32 thread_index)
{
  u8 *p = vlib_buffer_get_current (b);
  udp_header_t *udp = (udp_header_t *) (p - sizeof (udp_header_t));
  ip6_header_t *ip6 = (ip6_header_t *) ((u8 *) udp - sizeof (ip6_header_t));
  int auth = r->authenticated;
  u32 base = auth ? STAMP_AUTH_LEN : STAMP_LEN;

  *next = SRV6PM_REFLECT_NEXT_DROP;
  if (!r->enabled || (!ip6_address_is_zero (&r->address) &&
		      !ip6_address_is_equal (&ip6->dst_address, &r->address)))
    return SRV6PM_REFLECTOR_NOT_FOR_US;
  if (b->current_data < (i16) (sizeof (*ip6) + sizeof (*udp)) || ip6->protocol != IP_PROTOCOL_UDP ||
      (b->flags & VLIB_BUFFER_NEXT_PRESENT))
    return SRV6PM_REFLECTOR_MALFORMED;
  u32 len = clib_net_to_host_u16 (udp->length) - sizeof (*udp);
  if (len > b->current_length || len < (auth ? STAMP_AUTH_LEN : TWAMP_LIGHT_MIN))
    return SRV6PM_REFLECTOR_MALFORMED;
  if (auth)
    {
      u8 digest[STAMP_HMAC_LEN];
      srv6pm_hmac (&r->key, p, STAMP_HMAC_AT, 0, 0, digest);
      if (!srv6pm_same_digest (digest, p + STAMP_HMAC_AT))
	return SRV6PM_REFLECTOR_AUTH_FAILURES;
    }
  /* a TWAMP-Light probe shorter than the base: the reply is the whole base */
  u32 reply_len = clib_max (len, base);
  if (reply_len > len)
    {
      if (b->current_data + sizeof (*ip6) + reply_len > vlib_buffer_get_default_data_size (vm))
	return SRV6PM_REFLECTOR_MALFORMED;
      clib_memset (p + len, 0, reply_len - len);
    }

  /* the probe's fields, before its octets become the reply's */
  u32 sender_seq = clib_mem_unaligned (p, u32);
  u8 sender_ts[8], sender_ee[2] = {}, ssid_net[2] = {};
  clib_memcpy (sender_ts, p + (auth ? 16 : 4), 8);
  clib_memcpy (sender_ee, p + (auth ? 24 : 12), 2);
  if (auth || len >= 16)
    clib_memcpy (ssid_net, p + (auth ? 26 : 14), 2);
  u16 ssid = clib_net_to_host_u16 (clib_mem_unaligned (ssid_net, u16));
  int ptp = sender_ee[0] & (EE_Z >> 8);
  u8 sender_ttl = ip6->hop_limit;
  u8 received_tc = ip6_traffic_class_network_order (ip6);
  ip6_address_t sender = ip6->src_address, reached = ip6->dst_address;
  *ssid_out = ssid;
  *seq_out = clib_net_to_host_u32 (sender_seq);

  srv6pm_tlvs_t tlvs;
  int integrity_failed = 0;
  srv6pm_frame_tlvs (p, base, len, &tlvs);
  /* authenticated, with TLVs: the reply has an HMAC TLV, maybe one the probe had not */
  int hmac_reply = auth && (tlvs.n || tlvs.malformed);
  u32 room = vlib_buffer_get_default_data_size (vm) - b->current_data;
  if (hmac_reply && !(tlvs.hmac && tlvs.hmac_last) && tlvs.end + TLV_HLEN + STAMP_HMAC_LEN > room)
    return SRV6PM_REFLECTOR_MALFORMED;
  if (auth && tlvs.covered)
    {
      u8 digest[STAMP_HMAC_LEN];
      integrity_failed = 1;
      if (tlvs.hmac && tlvs.hmac_last)
	{
	  srv6pm_hmac (&r->key, p, 4, p + base, tlvs.hmac - base, digest);
	  integrity_failed = !srv6pm_same_digest (digest, p + tlvs.hmac + TLV_HLEN);
	}
      if (integrity_failed)
	vlib_increment_simple_counter (&r->stats, thread_index,
				       SRV6PM_REFLECTOR_TLV_INTEGRITY_FAILURES, 1);
    }
  srv6pm_reply_t reply = { .wanted = 1, .tc = 0 };
  srv6pm_process_tlvs (vm, r, p, &tlvs, integrity_failed, &sender, ssid,
		       srv6pm_stamp_unix_ns (sender_ts, ptp), received_tc, &reply, thread_index);
  if (!reply.wanted)
    return SRV6PM_REFLECTOR_REPLIES_SUPPRESSED;

  /* RFC 8972 section 4.8: in authenticated mode the HMAC TLV follows every TLV but Extra
   * Padding. One the probe had where it belongs stays there; otherwise (missing, misplaced,
   * repeated) the reply's goes after the TLVs it returns, so the sender can verify them. */
  u32 hmac_at = 0;
  if (hmac_reply && tlvs.hmac && tlvs.hmac_last)
    hmac_at = tlvs.hmac;
  else if (hmac_reply)
    {
      hmac_at = srv6pm_append_hmac (p, &tlvs);
      u32 hmac_end = hmac_at + TLV_HLEN + STAMP_HMAC_LEN;
      reply_len = clib_max (reply_len, hmac_end);
      clib_memset (p + hmac_end, 0, reply_len - hmac_end); /* what was left of the probe */
    }

  /* the reply's base (RFC 8762 section 4.3.1), its MBZ octets zero */
  u32 seq = r->stateful ? clib_host_to_net_u32 (srv6pm_next_sequence (r, &sender, ssid,
								       thread_index)) :
			  sender_seq;
  u16 ee = (r->error_estimate & ~EE_Z) | (ptp ? EE_Z : 0);
  clib_memset (p, 0, base);
  clib_mem_unaligned (p, u32) = seq;
  u32 t3_at = auth ? 16 : 4;
  clib_mem_unaligned (p + (auth ? 24 : 12), u16) = clib_host_to_net_u16 (ee);
  clib_memcpy (p + (auth ? 26 : 14), ssid_net, 2);
  srv6pm_stamp_time (received_ns, ptp, p + (auth ? 32 : 16));
  clib_mem_unaligned (p + (auth ? 48 : 24), u32) = sender_seq;
  clib_memcpy (p + (auth ? 64 : 28), sender_ts, 8);
  clib_memcpy (p + (auth ? 72 : 36), sender_ee, 2);
  p[auth ? 80 : 40] = sender_ttl;

  /* addresses and ports swap places; the flow label stays */
  ip6->dst_address = sender;
  ip6->src_address = reached;
  ip6->hop_limit = REPLY_HOP_LIMIT;
  ip6_set_traffic_class_network_order (ip6, reply.tc);
  u16 sender_port = udp->src_port;
  udp->src_port = udp->dst_port;
  udp->dst_port = sender_port;
  udp->length = clib_host_to_net_u16 (sizeof (*udp) + reply_len);
  ip6->payload_length = udp->length;

  /* T3 as late as it can be: the checksum and the HMACs cover it */
  srv6pm_stamp_time (srv6pm_unix_ns (), ptp, p + t3_at);
  if (auth)
    {
      srv6pm_hmac (&r->key, p, STAMP_HMAC_AT, 0, 0, p + STAMP_HMAC_AT);
      if (hmac_at)
	srv6pm_hmac (&r->key, p, 4, p + base, hmac_at - base, p + hmac_at + TLV_HLEN);
    }
  vlib_buffer_advance (b, -(word) (sizeof (*ip6) + sizeof (*udp)));
  b->current_length = sizeof (*ip6) + sizeof (*udp) + reply_len;
  b->flags &= ~(VNET_BUFFER_F_L4_CHECKSUM_COMPUTED | VNET_BUFFER_F_L4_CHECKSUM_CORRECT);
  b->flags |= VNET_BUFFER_F_LOCALLY_ORIGINATED;
  int bogus = 0;
  udp->checksum = 0;
  udp->checksum = ip6_tcp_udp_icmp_compute_checksum (vm, b, ip6, &bogus);
  if (!udp->checksum)
    udp->checksum = 0xffff;

  /* the session's declared return path, else the FIB */
  clib_bihash_kv_24_8_t kv;
  srv6pm_session_key (&kv, &sender, ssid, SRV6PM_STEER_REPLY);
  if (!clib_bihash_search_24_8 (&r->steer_by_session, &kv, &kv))
    {
      srv6pm_stamp_steer_t *steer = pool_elt_at_index (r->steers, kv.value);
      vnet_buffer (b)->ip.adj_index[VLIB_TX] = steer->dpo.dpoi_index;
      *next = steer->dpo.dpoi_next_node;
    }
  else
    *next = SRV6PM_REFLECT_NEXT_LOOKUP;
  return SRV6PM_REFLECTOR_REFLECTED;
}

VLIB_NODE_FN (srv6pm_reflect_node)
(vlib_main_t *vm, vlib_node_runtime_t *node, vlib_frame_t *frame)
{
  srv6pm_reflector_t *r = &srv6pm_main.reflector;
  u32 *from = vlib_frame_vector_args (frame), n_left = frame->n_vectors;
  u32 thread_index = vm->thread_index;
  vlib_buffer_t *bufs[VLIB_FRAME_SIZE], **b = bufs;
  u16 nexts[VLIB_FRAME_SIZE], *next = nexts;
  u64 received_ns = srv6pm_unix_ns (); /* T2: the frame reached the reflector */

  vlib_get_buffers (vm, from, bufs, n_left);
  while (n_left > 0)
    {
      u32 next0, seq = 0;
      u16 ssid = 0;
      u32 stat =
	srv6pm_reflect_one (vm, node, r, b[0], received_ns, &next0, &ssid, &seq, thread_index);
      vlib_increment_simple_counter (&r->stats, thread_index, SRV6PM_REFLECTOR_RECEIVED, 1);
      vlib_increment_simple_counter (&r->stats, thread_index, stat, 1);
      next[0] = next0;
      if (PREDICT_FALSE (b[0]->flags & VLIB_BUFFER_IS_TRACED))
	{
	  srv6pm_reflect_trace_t *t = vlib_add_trace (vm, node, b[0], sizeof (*t));
	  t->stat = stat;
	  t->ssid = ssid;
	  t->sender_seq = seq;
	}
      b++;
      next++;
      n_left--;
    }
  vlib_buffer_enqueue_to_next (vm, node, from, nexts, frame->n_vectors);
  return frame->n_vectors;
}

VLIB_REGISTER_NODE (srv6pm_reflect_node) = {
  .name = "srv6pm-reflect",
  .vector_size = sizeof (u32),
  .format_trace = format_srv6pm_reflect_trace,
  .type = VLIB_NODE_TYPE_INTERNAL,
  .n_next_nodes = SRV6PM_REFLECT_N_NEXT,
  .next_nodes = {
    [SRV6PM_REFLECT_NEXT_DROP] = "ip6-drop",
    [SRV6PM_REFLECT_NEXT_LOOKUP] = "ip6-lookup",
  },
};
