/*
 * srv6pm STAMP Session-Sender's packets in VPP. The node manager's sender (twamp/sender.py: the
 * sessions, their schedule, results and journal, the same code for Linux and VPP nodes) hands
 * each probe to the plugin, which sends it from this node into the session's SR policy in VPP
 * (the PROBE steering entry of the reflector's address and SSID, else the FIB), T1 written by
 * srv6pm-stamp-send as the probe enters the graph; replies to the senders' UDP ports are queued with T4 (sender_node.c) until the node
 * manager reads them. Nothing leaves VPP for a Linux socket.
 */
#include <vnet/udp/udp_local.h>
#include <vnet/ip/ip6.h>
#include <srv6pm/srv6pm.h>
#include <srv6pm/stamp_time.h>

#define STAMP_T1_AT	   4 /* the unauthenticated Timestamp: octets 4-11 */
#define PROBE_HOP_LIMIT	   64 /* what a local socket gives a probe */

int
srv6pm_sender_port_add_del (u16 port, int is_add)
{
  srv6pm_sender_t *s = &srv6pm_main.sender;
  vlib_main_t *vm = vlib_get_main ();

  if (!port)
    return VNET_API_ERROR_INVALID_VALUE;
  if (is_add == clib_bitmap_get (s->ports, port))
    return 0;
  if (is_add && udp_is_valid_dst_port (port, 0))
    return VNET_API_ERROR_UDP_PORT_TAKEN;
  vlib_worker_thread_barrier_sync (vm);
  if (is_add)
    udp_register_dst_port (vm, port, srv6pm_stamp_receive_node.index, 0 /* is_ip4 */);
  else
    udp_unregister_dst_port (vm, port, 0 /* is_ip4 */);
  s->ports = clib_bitmap_set (s->ports, port, is_add);
  vlib_worker_thread_barrier_release (vm);
  return 0;
}

static void
srv6pm_udp_checksum (vlib_main_t *vm, vlib_buffer_t *b)
{
  ip6_header_t *ip6 = vlib_buffer_get_current (b);
  udp_header_t *udp = (udp_header_t *) (ip6 + 1);
  int bogus = 0;

  udp->checksum = 0;
  udp->checksum = ip6_tcp_udp_icmp_compute_checksum (vm, b, ip6, &bogus);
  if (!udp->checksum)
    udp->checksum = 0xffff;
}

/* T1 written into a probe srv6pm_stamp_send made, as it leaves (srv6pm-stamp-send). */
void
srv6pm_stamp_write_t1 (vlib_main_t *vm, vlib_buffer_t *b, u64 unix_ns)
{
  u8 *payload = (u8 *) vlib_buffer_get_current (b) + sizeof (ip6_header_t) + sizeof (udp_header_t);

  srv6pm_stamp_time (unix_ns, srv6pm_buffer (b)->t1_format == SRV6PM_T1_PTP,
		     payload + STAMP_T1_AT);
  srv6pm_udp_checksum (vm, b);
}

int
srv6pm_stamp_send (const ip6_address_t *source, const ip6_address_t *destination,
		   u16 source_port, u16 destination_port, u16 ssid, u8 traffic_class,
		   u8 write_t1, const u8 *data, u16 len)
{
  vlib_main_t *vm = vlib_get_main ();
  srv6pm_reflector_t *r = &srv6pm_main.reflector;
  u32 bi, headers = sizeof (ip6_header_t) + sizeof (udp_header_t);

  if (!len || len > SRV6PM_STAMP_MAX_DATA || (write_t1 && len < STAMP_T1_AT + 8))
    return VNET_API_ERROR_INVALID_VALUE;
  if (vlib_buffer_alloc (vm, &bi, 1) != 1)
    return VNET_API_ERROR_LIMIT_EXCEEDED;
  vlib_buffer_t *b = vlib_get_buffer (vm, bi);
  ip6_header_t *ip6 = vlib_buffer_get_current (b);
  udp_header_t *udp = (udp_header_t *) (ip6 + 1);
  u8 *payload = (u8 *) (udp + 1);

  clib_memset (ip6, 0, headers);
  ip6->ip_version_traffic_class_and_flow_label =
    clib_host_to_net_u32 (0x60000000 | (u32) traffic_class << 20);
  ip6->payload_length = clib_host_to_net_u16 (sizeof (*udp) + len);
  ip6->protocol = IP_PROTOCOL_UDP;
  ip6->hop_limit = PROBE_HOP_LIMIT;
  ip6->src_address = *source;
  ip6->dst_address = *destination;
  udp->src_port = clib_host_to_net_u16 (source_port);
  udp->dst_port = clib_host_to_net_u16 (destination_port);
  udp->length = ip6->payload_length;
  clib_memcpy (payload, data, len);
  b->current_length = headers + len;
  b->flags |= VNET_BUFFER_F_LOCALLY_ORIGINATED;
  vnet_buffer (b)->sw_if_index[VLIB_RX] = 0; /* table 0, as a local socket's */
  vnet_buffer (b)->sw_if_index[VLIB_TX] = ~0;

  /* the session's SID list (its probe route), else the FIB */
  clib_bihash_kv_24_8_t kv;
  srv6pm_session_key (&kv, destination, ssid, SRV6PM_STEER_PROBE);
  srv6pm_buffer (b)->next_index = SRV6PM_STAMP_SEND_NEXT_LOOKUP;
  if (!clib_bihash_search_24_8 (&r->steer_by_session, &kv, &kv))
    {
      srv6pm_stamp_steer_t *steer = pool_elt_at_index (r->steers, kv.value);
      vnet_buffer (b)->ip.adj_index[VLIB_TX] = steer->dpo.dpoi_index;
      srv6pm_buffer (b)->next_index = steer->dpo.dpoi_next_node;
    }

  srv6pm_buffer (b)->t1_format = write_t1;
  if (!write_t1)
    srv6pm_udp_checksum (vm, b); /* else once T1 is in */

  vlib_frame_t *f = vlib_get_frame_to_node (vm, srv6pm_stamp_send_node.index);
  u32 *to_next = vlib_frame_vector_args (f);
  to_next[0] = bi;
  f->n_vectors = 1;
  vlib_put_frame_to_node (vm, srv6pm_stamp_send_node.index, f);
  return 0;
}

u32
srv6pm_stamp_take (srv6pm_stamp_received_t *out, u32 max, u64 *dropped)
{
  srv6pm_sender_t *s = &srv6pm_main.sender;
  u32 n;

  clib_spinlock_lock (&s->lock);
  n = clib_min (max, vec_len (s->queue));
  if (n)
    {
      clib_memcpy (out, s->queue, n * sizeof (s->queue[0]));
      vec_delete (s->queue, n, 0);
    }
  *dropped = s->dropped;
  clib_spinlock_unlock (&s->lock);
  return n;
}

static clib_error_t *
srv6pm_sender_init (vlib_main_t *vm)
{
  clib_spinlock_init (&srv6pm_main.sender.lock);
  return 0;
}

VLIB_INIT_FUNCTION (srv6pm_sender_init);
