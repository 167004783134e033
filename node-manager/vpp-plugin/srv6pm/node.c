/*
 * srv6pm graph nodes: srv6pm-mark (ip6-output), srv6pm-count and srv6pm-guard (ip6-unicast).
 * Every packet goes on along its feature arc, marked, counted or untouched; what a node cannot
 * attribute to a flow is counted per reason (/srv6pm/packets).
 */
#include <time.h>
#include <vlib/vlib.h>
#include <vnet/vnet.h>
#include <vnet/feature/feature.h>
#include <srv6pm/srv6pm.h>

typedef struct
{
  u32 slot;
  u8 colour;
  u8 reason;
} srv6pm_trace_t;

static u8 *
format_srv6pm_trace (u8 *s, va_list *args)
{
  CLIB_UNUSED (vlib_main_t * vm) = va_arg (*args, vlib_main_t *);
  CLIB_UNUSED (vlib_node_t * node) = va_arg (*args, vlib_node_t *);
  srv6pm_trace_t *t = va_arg (*args, srv6pm_trace_t *);

  if (t->reason == SRV6PM_REASON_COUNTED)
    return format (s, "srv6pm: flow slot %u colour %u", t->slot, t->colour);
  return format (s, "srv6pm: not counted, reason %u", t->reason);
}

/* Where the headers that matter sit, in octets from the outer IPv6 header. */
typedef struct
{
  u32 mark; /* the AltMark option's data, host order, when mark_off */
  u16 mark_off; /* the AltMark option (its type octet) before the SRH; 0: none */
  u16 srh_off;	/* the SRH; 0: none */
  u16 hbh_len;	/* a Hop-by-Hop Options header right after the IPv6 header; 0: none */
  u8 inner_proto;
  u8 n_segments;
  u8 segments_left;
  u8 tc; /* outer Traffic Class */
} srv6pm_pkt_t;

static_always_inline int
srv6pm_is_ext_header (u8 proto)
{
  return proto == IP_PROTOCOL_IP6_HOP_BY_HOP_OPTIONS ||
	 proto == IP_PROTOCOL_IP6_DESTINATION_OPTIONS || proto == IP_PROTOCOL_IPV6_ROUTE;
}

/* The AltMark option inside the options header at `off` (RFC 8200 section 4.2 TLVs), or 0. */
static_always_inline u16
srv6pm_find_altmark (const u8 *ip, u32 off, u32 end)
{
  u32 o = off + 2;

  for (int i = 0; i < SRV6PM_MAX_OPTIONS && o + 2 <= end; i++)
    {
      if (ip[o] == SRV6PM_IP6OPT_ALTMARK && ip[o + 1] == SRV6PM_ALTMARK_LEN &&
	  o + 2 + SRV6PM_ALTMARK_LEN <= end)
	return o;
      o += ip[o] == SRV6PM_IP6OPT_PAD1 ? 1 : 2 + ip[o + 1];
    }
  return 0;
}

/* Walks the extension headers up to the SRH (bounded, inside the first `len` octets), noting an
 * AltMark option before it. -1 when parsed, else the reason it is not. */
static_always_inline int
srv6pm_parse (const u8 *ip, i32 len, srv6pm_pkt_t *p)
{
  const ip6_header_t *ip6 = (const ip6_header_t *) ip;

  *p = (srv6pm_pkt_t){ 0 };
  if (len < (i32) sizeof (ip6_header_t) || (ip[0] >> 4) != 6)
    return SRV6PM_REASON_PARSE_ERROR;
  p->tc = ip6_traffic_class_network_order (ip6);
  u32 off = sizeof (ip6_header_t);
  u8 proto = ip6->protocol;
  for (int i = 0; i < SRV6PM_MAX_EXT_HEADERS && srv6pm_is_ext_header (proto); i++)
    {
      if (off + 8 > (u32) len)
	return SRV6PM_REASON_PARSE_ERROR;
      const u8 *h = ip + off;
      u32 hlen = ((u32) h[1] + 1) * 8;
      if (i == 0 && proto == IP_PROTOCOL_IP6_HOP_BY_HOP_OPTIONS)
	p->hbh_len = hlen;
      if (proto == IP_PROTOCOL_IPV6_ROUTE && h[2] == ROUTING_HEADER_TYPE_SR)
	{
	  p->srh_off = off;
	  p->n_segments = h[4] + 1; /* Last Entry */
	  p->segments_left = h[3];
	  if (p->n_segments > SRV6PM_MAX_SEGMENTS || hlen < 8 + 16 * (u32) p->n_segments ||
	      off + 8 + 16 * (u32) p->n_segments > (u32) len)
	    return SRV6PM_REASON_PARSE_ERROR;
	}
      else if (proto != IP_PROTOCOL_IPV6_ROUTE && !p->srh_off && !p->mark_off)
	{
	  p->mark_off = srv6pm_find_altmark (ip, off, clib_min (off + hlen, (u32) len));
	  if (p->mark_off)
	    p->mark = clib_net_to_host_u32 (clib_mem_unaligned (ip + p->mark_off + 2, u32));
	}
      proto = h[0];
      off += hlen;
    }
  if (srv6pm_is_ext_header (proto))
    return SRV6PM_REASON_PARSE_ERROR;
  p->inner_proto = proto;
  return -1;
}

/* An encapsulated packet without an SRH: single-SID H.Encaps.Red (RFC 8986 section 5.2). */
static_always_inline int
srv6pm_is_reduced_single (const srv6pm_pkt_t *p)
{
  return !p->srh_off && (p->inner_proto == IP_PROTOCOL_IPV6 ||
			 p->inner_proto == IP_PROTOCOL_IP_IN_IP || p->inner_proto == 143);
}

/* The flow whose whole SID list is the packet's (with H.Encaps.Red, the first SID is only in
 * the destination address), keyed by SID list; its slot in `slot`. */
static_always_inline srv6pm_flow_t *
srv6pm_flow_by_sids (srv6pm_main_t *sm, const u8 *ip, const srv6pm_pkt_t *p, u32 *slot)
{
  const ip6_header_t *ip6 = (const ip6_header_t *) ip;
  ip6_address_t sids[SRV6PM_MAX_SEGMENTS];
  const ip6_address_t *list = &ip6->dst_address;
  u32 n = 1;

  if (p->srh_off)
    {
      n = p->n_segments;
      list = (const ip6_address_t *) (ip + p->srh_off + 8);
      if (p->segments_left == n)
	{
	  if (n >= SRV6PM_MAX_SEGMENTS)
	    return 0;
	  clib_memcpy_fast (sids, list, 16 * n);
	  sids[n++] = ip6->dst_address;
	  list = sids;
	}
    }
  u64 key = srv6pm_sids_key (list, n);
  clib_bihash_kv_8_8_t kv = { .key = key };
  if (clib_bihash_search_inline_with_hash_8_8 (&sm->slot_by_key, key, &kv))
    return 0;
  srv6pm_flow_t *f = vec_elt_at_index (sm->flows, kv.value);
  if (f->n_segments != n)
    return 0;
  /* the first SIDs from the flow's line, the others (rarely any) from its whole list */
  u64 diff = 0;
  u32 i;
  for (i = 0; i < n && i < SRV6PM_HOT_SEGMENTS; i++)
    diff |= (f->first[i].as_u64[0] ^ clib_mem_unaligned (&list[i].as_u64[0], u64)) |
	    (f->first[i].as_u64[1] ^ clib_mem_unaligned (&list[i].as_u64[1], u64));
  if (diff || (n > i && memcmp (&sm->sids[kv.value].segments[i], &list[i], 16 * (n - i))))
    return 0;
  *slot = kv.value;
  return f;
}

/* The colour of the current block, from the wall clock: floor(unix ns / T) % 2, as Linux nodes
 * compute it (their bpf_timer flips at the same edges). Read once per frame. */
static_always_inline u32
srv6pm_colour_now (const srv6pm_main_t *sm)
{
  struct timespec ts;

  clock_gettime (CLOCK_REALTIME, &ts);
  return (((u64) ts.tv_sec * 1000000000ULL + ts.tv_nsec) / sm->period_ns) & 1;
}

static_always_inline u8
srv6pm_dscp_tc (const srv6pm_main_t *sm, u8 tc, u32 colour)
{
  tc |= sm->monitored_bit;
  return colour ? (tc | sm->colour_bit) : (tc & ~sm->colour_bit);
}

/* Inserts a Destination Options header with the AltMark option after the IPv6 header (after its
 * Hop-by-Hop header, which stays first: RFC 8200 section 4.1). Everything before the new header
 * (L2 rewrite, IPv6, HBH) moves 8 octets back into the buffer's headroom. 0, or -1 (no room). */
static_always_inline int
srv6pm_insert_altmark (vlib_buffer_t *b, u32 l2_len, u32 hbh_len, u32 word)
{
  if (b->current_data - SRV6PM_DOH_LEN < -VLIB_BUFFER_PRE_DATA_SIZE)
    return -1;
  u8 *old = vlib_buffer_get_current (b);
  u32 moved = l2_len + sizeof (ip6_header_t) + hbh_len;
  vlib_buffer_advance (b, -SRV6PM_DOH_LEN);
  u8 *start = vlib_buffer_get_current (b);
  memmove (start, old, moved);
  ip6_header_t *ip6 = (ip6_header_t *) (start + l2_len);
  u8 *next_header = hbh_len ? (u8 *) (ip6 + 1) : &ip6->protocol;
  u8 *doh = start + moved;
  doh[0] = *next_header;
  doh[1] = 0; /* 8 octets */
  doh[2] = SRV6PM_IP6OPT_ALTMARK;
  doh[3] = SRV6PM_ALTMARK_LEN;
  clib_mem_unaligned (doh + 4, u32) = clib_host_to_net_u32 (word);
  *next_header = IP_PROTOCOL_IP6_DESTINATION_OPTIONS;
  /* a zero payload length (RFC 2675 jumbogram) stays zero */
  if (ip6->payload_length)
    ip6->payload_length =
      clib_host_to_net_u16 (clib_net_to_host_u16 (ip6->payload_length) + SRV6PM_DOH_LEN);
  /* offsets into what moved (the outer headers) move with it */
  i16 moved_end = b->current_data + SRV6PM_DOH_LEN + moved;
  if ((b->flags & VNET_BUFFER_F_L2_HDR_OFFSET_VALID) &&
      vnet_buffer (b)->l2_hdr_offset < moved_end)
    vnet_buffer (b)->l2_hdr_offset -= SRV6PM_DOH_LEN;
  if ((b->flags & VNET_BUFFER_F_L3_HDR_OFFSET_VALID) &&
      vnet_buffer (b)->l3_hdr_offset < moved_end)
    vnet_buffer (b)->l3_hdr_offset -= SRV6PM_DOH_LEN;
  return 0;
}

static_always_inline void
srv6pm_reason (srv6pm_main_t *sm, u32 thread, int reason, srv6pm_trace_t *t)
{
  vlib_increment_simple_counter (&sm->reasons, thread, reason, 1);
  t->reason = reason;
}

static_always_inline void
srv6pm_count (srv6pm_main_t *sm, u32 thread, u32 slot, u32 colour, u32 bytes, srv6pm_trace_t *t)
{
  vlib_increment_combined_counter (&sm->counters, thread, 2 * slot + colour, 1, bytes);
  srv6pm_reason (sm, thread, SRV6PM_REASON_COUNTED, t);
  t->slot = slot;
  t->colour = colour;
}

/* Ingress: the packet as it leaves (current = L2 rewrite, then the outer IPv6 header). */
static_always_inline void
srv6pm_mark_one (vlib_main_t *vm, srv6pm_main_t *sm, vlib_buffer_t *b, u32 colour,
		 srv6pm_trace_t *t)
{
  u32 thread = vm->thread_index, slot;
  u32 l2_len = vnet_buffer (b)->ip.save_rewrite_length;
  u8 *ip = (u8 *) vlib_buffer_get_current (b) + l2_len;
  srv6pm_pkt_t p;
  int reason = srv6pm_parse (ip, (i32) b->current_length - (i32) l2_len, &p);

  if (reason >= 0)
    return srv6pm_reason (sm, thread, reason, t);
  if (!p.srh_off && !srv6pm_is_reduced_single (&p))
    return srv6pm_reason (sm, thread, SRV6PM_REASON_NOT_SRV6, t);
  srv6pm_flow_t *f = srv6pm_flow_by_sids (sm, ip, &p, &slot);
  if (!f || f->role != SRV6PM_ROLE_INGRESS)
    return srv6pm_reason (sm, thread, SRV6PM_REASON_NO_FLOW, t);
  if (sm->mode == SRV6PM_MODE_DSCP)
    ip6_set_traffic_class_network_order ((ip6_header_t *) ip, srv6pm_dscp_tc (sm, p.tc, colour));
  else
    {
      /* Not encapsulated here: an SRv6 packet that carries a mark already is not ours. */
      if (p.mark_off)
	return srv6pm_reason (sm, thread, SRV6PM_REASON_FOREIGN_MARK, t);
      /* Over the MTU with the option, or a GSO packet (cut later, into segments not counted
       * one by one): it goes out unmarked and uncounted, so no node reports it lost. */
      u32 mtu = vnet_sw_interface_get_mtu (sm->vnet_main, vnet_buffer (b)->sw_if_index[VLIB_TX],
					   VNET_MTU_IP6);
      u32 ip_len = vlib_buffer_length_in_chain (vm, b) - l2_len;
      u32 word = (f->flowmon_id & 0xfffff) << 12 | (colour & 1) << 11;
      if ((b->flags & VNET_BUFFER_F_GSO) || ip_len + SRV6PM_DOH_LEN > mtu ||
	  srv6pm_insert_altmark (b, l2_len, p.hbh_len, word))
	return srv6pm_reason (sm, thread, SRV6PM_REASON_MARK_FAILED, t);
    }
  srv6pm_count (sm, thread, slot, colour, vlib_buffer_length_in_chain (vm, b), t);
}

/* Transit and egress: the packet as it arrived (current = the outer IPv6 header), counted
 * with its Ethernet header as Linux nodes count it. */
static_always_inline void
srv6pm_count_one (vlib_main_t *vm, srv6pm_main_t *sm, vlib_buffer_t *b, srv6pm_trace_t *t)
{
  u32 thread = vm->thread_index, slot;
  u8 *ip = vlib_buffer_get_current (b);
  srv6pm_pkt_t p;
  int reason = srv6pm_parse (ip, b->current_length, &p);

  if (reason >= 0)
    return srv6pm_reason (sm, thread, reason, t);
  u32 bytes = vlib_buffer_length_in_chain (vm, b);
  if (b->flags & VNET_BUFFER_F_L2_HDR_OFFSET_VALID)
    bytes += b->current_data - vnet_buffer (b)->l2_hdr_offset;
  if (sm->mode == SRV6PM_MODE_DSCP)
    {
      /* a single-SID policy may come without an SRH (H.Encaps.Red; VPP's H.Encaps) */
      if (!p.srh_off && !srv6pm_is_reduced_single (&p))
	return srv6pm_reason (sm, thread, SRV6PM_REASON_NOT_SRV6, t);
      if (!(p.tc & sm->monitored_bit))
	return srv6pm_reason (sm, thread, SRV6PM_REASON_UNMARKED, t);
      srv6pm_flow_t *f = srv6pm_flow_by_sids (sm, ip, &p, &slot);
      if (!f || f->role == SRV6PM_ROLE_INGRESS)
	return srv6pm_reason (sm, thread, SRV6PM_REASON_NO_FLOW, t);
      return srv6pm_count (sm, thread, slot, !!(p.tc & sm->colour_bit), bytes, t);
    }
  if (!p.mark_off)
    return srv6pm_reason (sm, thread,
			  p.srh_off || srv6pm_is_reduced_single (&p) ? SRV6PM_REASON_UNMARKED :
								       SRV6PM_REASON_NOT_SRV6,
			  t);
  u32 id = p.mark >> 12;
  u32 held = sm->slot_by_flowmon[id];
  if (!held || sm->flows[held - 1].role == SRV6PM_ROLE_INGRESS)
    return srv6pm_reason (sm, thread, SRV6PM_REASON_NO_FLOW, t);
  srv6pm_count (sm, thread, held - 1, (p.mark >> 11) & 1, bytes, t);
}

/* Domain boundary: our marks on packets from outside are neutralised (the option becomes PadN
 * of the same length, which every node skips; the DSCP bits are cleared) and counted. */
static_always_inline void
srv6pm_guard_one (vlib_main_t *vm, srv6pm_main_t *sm, vlib_buffer_t *b, srv6pm_trace_t *t)
{
  u8 *ip = vlib_buffer_get_current (b);
  srv6pm_pkt_t p;

  if (srv6pm_parse (ip, b->current_length, &p) >= 0 ||
      (!p.srh_off && !srv6pm_is_reduced_single (&p)))
    return;
  if (sm->mode == SRV6PM_MODE_DSCP)
    {
      if (!(p.tc & sm->monitored_bit))
	return;
      ip6_set_traffic_class_network_order ((ip6_header_t *) ip,
					   p.tc & ~(sm->monitored_bit | sm->colour_bit));
    }
  else
    {
      if (!p.mark_off)
	return;
      ip[p.mark_off] = SRV6PM_IP6OPT_PADN;
      clib_memset (ip + p.mark_off + 2, 0, SRV6PM_ALTMARK_LEN);
    }
  srv6pm_reason (sm, vm->thread_index, SRV6PM_REASON_FOREIGN_MARK, t);
}

typedef enum
{
  SRV6PM_NODE_MARK,
  SRV6PM_NODE_COUNT,
  SRV6PM_NODE_GUARD,
} srv6pm_node_kind_t;

static_always_inline uword
srv6pm_node_inline (vlib_main_t *vm, vlib_node_runtime_t *node, vlib_frame_t *frame,
		    srv6pm_node_kind_t kind)
{
  srv6pm_main_t *sm = &srv6pm_main;
  u32 *from = vlib_frame_vector_args (frame);
  u32 n_left = frame->n_vectors;
  vlib_buffer_t *bufs[VLIB_FRAME_SIZE], **b = bufs;
  u16 nexts[VLIB_FRAME_SIZE], *next = nexts;
  int configured = sm->period_ns != 0;
  u32 colour = configured && kind == SRV6PM_NODE_MARK ? srv6pm_colour_now (sm) : 0;
  int tracing = node->flags & VLIB_NODE_FLAG_TRACE;

  vlib_get_buffers (vm, from, bufs, n_left);
  while (n_left > 0)
    {
      if (n_left > 1)
	{
	  vlib_prefetch_buffer_header (b[1], STORE);
	  CLIB_PREFETCH (b[1]->data + b[1]->current_data, 2 * CLIB_CACHE_LINE_BYTES, STORE);
	}
      u32 next0;
      srv6pm_trace_t t = { .reason = SRV6PM_N_REASONS };
      vnet_feature_next (&next0, b[0]);
      next[0] = next0;
      if (configured)
	{
	  if (kind == SRV6PM_NODE_MARK)
	    srv6pm_mark_one (vm, sm, b[0], colour, &t);
	  else if (kind == SRV6PM_NODE_COUNT)
	    srv6pm_count_one (vm, sm, b[0], &t);
	  else
	    srv6pm_guard_one (vm, sm, b[0], &t);
	}
      if (tracing && (b[0]->flags & VLIB_BUFFER_IS_TRACED))
	*(srv6pm_trace_t *) vlib_add_trace (vm, node, b[0], sizeof (t)) = t;
      b++;
      next++;
      n_left--;
    }
  vlib_buffer_enqueue_to_next (vm, node, from, nexts, frame->n_vectors);
  return frame->n_vectors;
}

VLIB_NODE_FN (srv6pm_mark_node)
(vlib_main_t *vm, vlib_node_runtime_t *node, vlib_frame_t *frame)
{
  return srv6pm_node_inline (vm, node, frame, SRV6PM_NODE_MARK);
}

VLIB_NODE_FN (srv6pm_count_node)
(vlib_main_t *vm, vlib_node_runtime_t *node, vlib_frame_t *frame)
{
  return srv6pm_node_inline (vm, node, frame, SRV6PM_NODE_COUNT);
}

VLIB_NODE_FN (srv6pm_guard_node)
(vlib_main_t *vm, vlib_node_runtime_t *node, vlib_frame_t *frame)
{
  return srv6pm_node_inline (vm, node, frame, SRV6PM_NODE_GUARD);
}

VLIB_REGISTER_NODE (srv6pm_mark_node) = {
  .name = "srv6pm-mark",
  .vector_size = sizeof (u32),
  .format_trace = format_srv6pm_trace,
  .type = VLIB_NODE_TYPE_INTERNAL,
};

VLIB_REGISTER_NODE (srv6pm_count_node) = {
  .name = "srv6pm-count",
  .vector_size = sizeof (u32),
  .format_trace = format_srv6pm_trace,
  .type = VLIB_NODE_TYPE_INTERNAL,
};

VLIB_REGISTER_NODE (srv6pm_guard_node) = {
  .name = "srv6pm-guard",
  .vector_size = sizeof (u32),
  .format_trace = format_srv6pm_trace,
  .type = VLIB_NODE_TYPE_INTERNAL,
};
