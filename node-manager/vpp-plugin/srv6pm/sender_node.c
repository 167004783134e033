/*
 * srv6pm-stamp-send: sends the probes the API made (sender.c) on into the session's SR policy
 * or the FIB, as decided when each was made, writing T1 into those that ask for it: the time
 * the frame reached the graph, as late as the sender's side of VPP can take it.
 * srv6pm-stamp-receive: udp6 dispatch hands it the packets to the senders' ports (replies); it
 * queues each with T4, the time its frame reached the node, for the node manager to read.
 */
#include <vlib/vlib.h>
#include <vnet/vnet.h>
#include <vnet/ip/ip6_packet.h>
#include <vnet/udp/udp_packet.h>
#include <srv6pm/srv6pm.h>
#include <srv6pm/stamp_time.h>

VLIB_NODE_FN (srv6pm_stamp_send_node)
(vlib_main_t *vm, vlib_node_runtime_t *node, vlib_frame_t *frame)
{
  u32 *from = vlib_frame_vector_args (frame), n = frame->n_vectors;
  vlib_buffer_t *bufs[VLIB_FRAME_SIZE];
  u16 nexts[VLIB_FRAME_SIZE];

  u64 now_ns = srv6pm_unix_ns (); /* T1 */
  vlib_get_buffers (vm, from, bufs, n);
  for (u32 i = 0; i < n; i++)
    {
      if (srv6pm_buffer (bufs[i])->t1_format)
	srv6pm_stamp_write_t1 (vm, bufs[i], now_ns);
      nexts[i] = srv6pm_buffer (bufs[i])->next_index;
    }
  vlib_buffer_enqueue_to_next (vm, node, from, nexts, n);
  return n;
}

VLIB_REGISTER_NODE (srv6pm_stamp_send_node) = {
  .name = "srv6pm-stamp-send",
  .vector_size = sizeof (u32),
  .type = VLIB_NODE_TYPE_INTERNAL,
  .n_next_nodes = SRV6PM_STAMP_SEND_N_NEXT,
  .next_nodes = {
    [SRV6PM_STAMP_SEND_NEXT_LOOKUP] = "ip6-lookup",
  },
};

VLIB_NODE_FN (srv6pm_stamp_receive_node)
(vlib_main_t *vm, vlib_node_runtime_t *node, vlib_frame_t *frame)
{
  srv6pm_sender_t *s = &srv6pm_main.sender;
  u32 *from = vlib_frame_vector_args (frame), n = frame->n_vectors;
  vlib_buffer_t *bufs[VLIB_FRAME_SIZE];
  u64 received_ns = srv6pm_unix_ns (); /* T4 */
  vlib_get_buffers (vm, from, bufs, n);
  clib_spinlock_lock (&s->lock);
  for (u32 i = 0; i < n; i++)
    {
      vlib_buffer_t *b = bufs[i];
      u8 *payload = vlib_buffer_get_current (b);
      udp_header_t *udp = (udp_header_t *) (payload - sizeof (udp_header_t));
      ip6_header_t *ip6 = (ip6_header_t *) ((u8 *) udp - sizeof (ip6_header_t));
      u32 len = clib_net_to_host_u16 (udp->length) - sizeof (*udp);

      if (ip6->protocol != IP_PROTOCOL_UDP || len > b->current_length ||
	  len > SRV6PM_STAMP_MAX_DATA || (b->flags & VLIB_BUFFER_NEXT_PRESENT) ||
	  vec_len (s->queue) >= SRV6PM_STAMP_MAX_QUEUED)
	{
	  s->dropped++;
	  continue;
	}
      srv6pm_stamp_received_t *q;
      vec_add2 (s->queue, q, 1);
      q->received_ns = received_ns;
      q->source = ip6->src_address;
      q->destination = ip6->dst_address;
      q->source_port = clib_net_to_host_u16 (udp->src_port);
      q->destination_port = clib_net_to_host_u16 (udp->dst_port);
      q->hop_limit = ip6->hop_limit;
      q->traffic_class = ip6_traffic_class_network_order (ip6);
      q->len = len;
      clib_memcpy (q->data, payload, len);
    }
  clib_spinlock_unlock (&s->lock);
  vlib_buffer_free (vm, from, n);
  return n;
}

VLIB_REGISTER_NODE (srv6pm_stamp_receive_node) = {
  .name = "srv6pm-stamp-receive",
  .vector_size = sizeof (u32),
  .type = VLIB_NODE_TYPE_INTERNAL,
};
