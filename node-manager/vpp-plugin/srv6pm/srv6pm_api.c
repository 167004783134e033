/*
 * srv6pm plugin: binary API handlers (srv6pm.api).
 */
#include <vnet/vnet.h>
#include <vnet/ip/ip_types_api.h>
#include <vnet/format_fns.h>
#include <vlibapi/api.h>
#include <vlibmemory/api.h>
#include <srv6pm/srv6pm.h>

#include <srv6pm/srv6pm.api_enum.h>
#include <srv6pm/srv6pm.api_types.h>

#define REPLY_MSG_ID_BASE srv6pm_main.msg_id_base
#include <vlibapi/api_helper_macros.h>

/* Every entry of a table, for a dump (sent once the walk is over). */
static int
srv6pm_collect_kv (clib_bihash_kv_24_8_t *kv, void *arg)
{
  vec_add1 (*(clib_bihash_kv_24_8_t **) arg, *kv);
  return BIHASH_WALK_CONTINUE;
}

static void
vl_api_srv6pm_config_set_t_handler (vl_api_srv6pm_config_set_t *mp)
{
  vl_api_srv6pm_config_set_reply_t *rmp;
  int rv = srv6pm_config_set (clib_net_to_host_u64 (mp->period_ns), mp->mode, mp->monitored_bit,
			      mp->colour_bit);

  REPLY_MACRO (VL_API_SRV6PM_CONFIG_SET_REPLY);
}

static void
vl_api_srv6pm_config_get_t_handler (vl_api_srv6pm_config_get_t *mp)
{
  srv6pm_main_t *sm = &srv6pm_main;
  vl_api_srv6pm_config_get_reply_t *rmp;
  int rv = 0;

  REPLY_MACRO2 (VL_API_SRV6PM_CONFIG_GET_REPLY, ({
		  rmp->period_ns = clib_host_to_net_u64 (sm->period_ns);
		  rmp->mode = sm->mode;
		  rmp->monitored_bit = sm->monitored_bit;
		  rmp->colour_bit = sm->colour_bit;
		  rmp->instance_id = clib_host_to_net_u64 (sm->instance_id);
		  rmp->max_flows = clib_host_to_net_u32 (SRV6PM_MAX_FLOWS);
		  rmp->n_flows = clib_host_to_net_u32 (sm->n_flows);
		}));
}

/* One flow of a request (fields in network order), added or removed. */
static int
srv6pm_api_flow (bool is_add, u32 slot, u8 role, u32 flowmon_id, u8 n_segments,
		 const vl_api_ip6_address_t *wire_segments)
{
  ip6_address_t segments[SRV6PM_MAX_SEGMENTS];

  if (!is_add)
    return srv6pm_flow_del (clib_net_to_host_u32 (slot));
  if (n_segments < 1 || n_segments > SRV6PM_MAX_SEGMENTS)
    return VNET_API_ERROR_INVALID_VALUE_3;
  for (u32 i = 0; i < n_segments; i++)
    ip6_address_decode (wire_segments[i], &segments[i]);
  return srv6pm_flow_add (clib_net_to_host_u32 (slot), role, clib_net_to_host_u32 (flowmon_id),
			  segments, n_segments);
}

static void
vl_api_srv6pm_flow_add_del_t_handler (vl_api_srv6pm_flow_add_del_t *mp)
{
  vl_api_srv6pm_flow_add_del_reply_t *rmp;
  int rv = srv6pm_api_flow (mp->is_add, mp->slot, mp->role, mp->flowmon_id, mp->n_segments,
			    mp->segments);

  REPLY_MACRO (VL_API_SRV6PM_FLOW_ADD_DEL_REPLY);
}

#define SRV6PM_MAX_FLOWS_PER_MESSAGE 1024

static void
vl_api_srv6pm_flows_add_del_t_handler (vl_api_srv6pm_flows_add_del_t *mp)
{
  vl_api_srv6pm_flows_add_del_reply_t *rmp;
  u32 n = clib_net_to_host_u32 (mp->n_flows), done = 0;
  int rv = 0;

  if (n > SRV6PM_MAX_FLOWS_PER_MESSAGE)
    rv = VNET_API_ERROR_INVALID_VALUE;
  else
    {
      /* once for the message: each flow's own barrier nests inside it */
      vlib_worker_thread_barrier_sync (vlib_get_main ());
      for (; done < n; done++)
	{
	  vl_api_srv6pm_flow_t *f = &mp->flows[done];
	  rv = srv6pm_api_flow (mp->is_add, f->slot, f->role, f->flowmon_id, f->n_segments,
				f->segments);
	  if (rv)
	    break;
	}
      vlib_worker_thread_barrier_release (vlib_get_main ());
    }
  REPLY_MACRO2 (VL_API_SRV6PM_FLOWS_ADD_DEL_REPLY, ({ rmp->n_done = clib_host_to_net_u32 (done); }));
}

static void
vl_api_srv6pm_flow_dump_t_handler (vl_api_srv6pm_flow_dump_t *mp)
{
  srv6pm_main_t *sm = &srv6pm_main;
  vl_api_registration_t *reg = vl_api_client_index_to_registration (mp->client_index);
  srv6pm_flow_t *f;

  if (!reg)
    return;
  vec_foreach (f, sm->flows)
    {
      if (!f->role)
	continue;
      vl_api_srv6pm_flow_details_t *rmp = vl_msg_api_alloc_zero (sizeof (*rmp));
      rmp->_vl_msg_id = htons (VL_API_SRV6PM_FLOW_DETAILS + sm->msg_id_base);
      rmp->context = mp->context;
      rmp->slot = clib_host_to_net_u32 (f - sm->flows);
      rmp->role = f->role;
      rmp->flowmon_id = clib_host_to_net_u32 (f->flowmon_id);
      rmp->n_segments = f->n_segments;
      for (u32 i = 0; i < f->n_segments; i++) /* travel order */
	ip6_address_encode (&sm->sids[f - sm->flows].segments[f->n_segments - 1 - i],
			    rmp->segments[i]);
      vl_api_send_msg (reg, (u8 *) rmp);
    }
}

static void
srv6pm_fill_counters (vl_api_srv6pm_counters_t *c, u32 slot)
{
  vlib_counter_t v;

  c->slot = clib_host_to_net_u32 (slot);
  for (u32 colour = 0; colour < 2; colour++)
    {
      vlib_get_combined_counter (&srv6pm_main.counters, 2 * slot + colour, &v);
      c->packets[colour] = clib_host_to_net_u64 (v.packets);
      c->bytes[colour] = clib_host_to_net_u64 (v.bytes);
    }
}

static void
srv6pm_send_counters (vl_api_registration_t *reg, u32 context, u32 slot)
{
  srv6pm_main_t *sm = &srv6pm_main;
  vl_api_srv6pm_counters_details_t *rmp = vl_msg_api_alloc_zero (sizeof (*rmp));
  vlib_counter_t c;

  rmp->_vl_msg_id = htons (VL_API_SRV6PM_COUNTERS_DETAILS + sm->msg_id_base);
  rmp->context = context;
  rmp->slot = clib_host_to_net_u32 (slot);
  for (u32 colour = 0; colour < 2; colour++)
    {
      vlib_get_combined_counter (&sm->counters, 2 * slot + colour, &c);
      rmp->packets[colour] = clib_host_to_net_u64 (c.packets);
      rmp->bytes[colour] = clib_host_to_net_u64 (c.bytes);
    }
  vl_api_send_msg (reg, (u8 *) rmp);
}

static void
vl_api_srv6pm_counters_dump_t_handler (vl_api_srv6pm_counters_dump_t *mp)
{
  srv6pm_main_t *sm = &srv6pm_main;
  vl_api_registration_t *reg = vl_api_client_index_to_registration (mp->client_index);
  u32 slot = clib_net_to_host_u32 (mp->slot);
  srv6pm_flow_t *f;

  if (!reg)
    return;
  if (slot != ~0)
    {
      if (slot < vec_len (sm->flows) && sm->flows[slot].role)
	srv6pm_send_counters (reg, mp->context, slot);
      return;
    }
  vec_foreach (f, sm->flows)
    if (f->role)
      srv6pm_send_counters (reg, mp->context, f - sm->flows);
}

#define SRV6PM_MAX_COUNTERS_PER_REPLY 4096

static void
vl_api_srv6pm_counters_read_t_handler (vl_api_srv6pm_counters_read_t *mp)
{
  srv6pm_main_t *sm = &srv6pm_main;
  vl_api_srv6pm_counters_read_reply_t *rmp;
  u32 first = clib_net_to_host_u32 (mp->first_slot), slot = first, n = 0, next = ~0;
  int rv = 0;

  for (; slot < vec_len (sm->flows); slot++)
    if (sm->flows[slot].role && n++ == SRV6PM_MAX_COUNTERS_PER_REPLY)
      {
	n--;
	next = slot;
	break;
      }
  REPLY_MACRO3 (VL_API_SRV6PM_COUNTERS_READ_REPLY, n * sizeof (vl_api_srv6pm_counters_t), ({
		  rmp->next_slot = clib_host_to_net_u32 (next);
		  rmp->n_counters = clib_host_to_net_u32 (n);
		  for (u32 i = 0, s = first; i < n; s++)
		    if (sm->flows[s].role)
		      srv6pm_fill_counters (&rmp->counters[i++], s);
		}));
}

static void
vl_api_srv6pm_interface_enable_disable_t_handler (vl_api_srv6pm_interface_enable_disable_t *mp)
{
  vl_api_srv6pm_interface_enable_disable_reply_t *rmp;
  int rv;

  VALIDATE_SW_IF_INDEX (mp);
  rv = srv6pm_hook_enable_disable (clib_net_to_host_u32 (mp->sw_if_index), mp->hook,
				   mp->enable);
  BAD_SW_IF_INDEX_LABEL;
  REPLY_MACRO (VL_API_SRV6PM_INTERFACE_ENABLE_DISABLE_REPLY);
}

static void
vl_api_srv6pm_interface_dump_t_handler (vl_api_srv6pm_interface_dump_t *mp)
{
  srv6pm_main_t *sm = &srv6pm_main;
  vl_api_registration_t *reg = vl_api_client_index_to_registration (mp->client_index);

  if (!reg)
    return;
  for (u8 hook = SRV6PM_HOOK_MARK; hook < SRV6PM_N_HOOKS; hook++)
    {
      u32 sw_if_index;
      clib_bitmap_foreach (sw_if_index, sm->hooks[hook])
	{
	  vl_api_srv6pm_interface_details_t *rmp = vl_msg_api_alloc_zero (sizeof (*rmp));
	  rmp->_vl_msg_id = htons (VL_API_SRV6PM_INTERFACE_DETAILS + sm->msg_id_base);
	  rmp->context = mp->context;
	  rmp->sw_if_index = clib_host_to_net_u32 (sw_if_index);
	  rmp->hook = hook;
	  vl_api_send_msg (reg, (u8 *) rmp);
	}
    }
}

static void
srv6pm_fill_stats (vl_api_srv6pm_stats_get_reply_t *rmp)
{
#define _(sym, field) rmp->field = clib_host_to_net_u64 (srv6pm_reason_total (SRV6PM_REASON_##sym));
  _ (COUNTED, counted)
  _ (NOT_SRV6, not_srv6)
  _ (UNMARKED, unmarked)
  _ (NO_FLOW, no_flow)
  _ (PARSE_ERROR, parse_error)
  _ (FOREIGN_MARK, foreign_mark)
  _ (MARK_FAILED, mark_failed)
#undef _
}

static void
vl_api_srv6pm_stats_get_t_handler (vl_api_srv6pm_stats_get_t *mp)
{
  vl_api_srv6pm_stats_get_reply_t *rmp;
  int rv = 0;

  REPLY_MACRO2 (VL_API_SRV6PM_STATS_GET_REPLY, ({ srv6pm_fill_stats (rmp); }));
}

/* ---- STAMP Session-Reflector --------------------------------------------------------------- */

static void
vl_api_srv6pm_reflector_set_t_handler (vl_api_srv6pm_reflector_set_t *mp)
{
  vl_api_srv6pm_reflector_set_reply_t *rmp;
  srv6pm_reflector_config_t c = {
    .enabled = mp->enabled,
    .stateful = mp->stateful,
    .port = clib_net_to_host_u16 (mp->port),
    .error_estimate = clib_net_to_host_u16 (mp->error_estimate),
    .period_ns = clib_net_to_host_u64 (mp->period_ns),
    .allowed_dscp = clib_net_to_host_u64 (mp->allowed_dscp),
    .key_len = mp->key_len,
  };
  int rv = VNET_API_ERROR_INVALID_VALUE_2;

  ip6_address_decode (mp->address, &c.address);
  if (c.key_len <= sizeof (c.key))
    {
      clib_memcpy (c.key, mp->key, c.key_len);
      rv = srv6pm_reflector_set (&c);
    }
  clib_memset (&c.key, 0, sizeof (c.key));
  REPLY_MACRO (VL_API_SRV6PM_REFLECTOR_SET_REPLY);
}

#define SRV6PM_MAX_BLOCKS_PER_MESSAGE 4096

static void
vl_api_srv6pm_reflector_blocks_set_t_handler (vl_api_srv6pm_reflector_blocks_set_t *mp)
{
  vl_api_srv6pm_reflector_blocks_set_reply_t *rmp;
  u32 n = clib_net_to_host_u32 (mp->n_counts);
  int rv = 0;

  if (n > SRV6PM_MAX_BLOCKS_PER_MESSAGE)
    rv = VNET_API_ERROR_INVALID_VALUE;
  for (u32 i = 0; !rv && i < n; i++)
    {
      vl_api_srv6pm_block_counts_t *c = &mp->counts[i];
      rv = srv6pm_reflector_blocks_set (clib_net_to_host_u16 (c->ssid),
					clib_net_to_host_u64 (c->block),
					clib_net_to_host_u32 (c->rx), clib_net_to_host_u32 (c->tx));
    }
  REPLY_MACRO (VL_API_SRV6PM_REFLECTOR_BLOCKS_SET_REPLY);
}

static void
vl_api_srv6pm_reflector_path_add_del_t_handler (vl_api_srv6pm_reflector_path_add_del_t *mp)
{
  vl_api_srv6pm_reflector_path_add_del_reply_t *rmp;
  ip6_address_t sender;
  u16 len = clib_net_to_host_u16 (mp->len);
  int rv = VNET_API_ERROR_INVALID_VALUE;

  ip6_address_decode (mp->sender, &sender);
  if (len <= sizeof (mp->value))
    rv = srv6pm_reflector_path_add_del (&sender, clib_net_to_host_u16 (mp->ssid), mp->value,
					len, mp->is_add);
  REPLY_MACRO (VL_API_SRV6PM_REFLECTOR_PATH_ADD_DEL_REPLY);
}

static void
vl_api_srv6pm_reflector_path_dump_t_handler (vl_api_srv6pm_reflector_path_dump_t *mp)
{
  srv6pm_reflector_t *r = &srv6pm_main.reflector;
  vl_api_registration_t *reg = vl_api_client_index_to_registration (mp->client_index);
  clib_bihash_kv_24_8_t *kvs = 0, *kv;

  if (!reg)
    return;
  clib_bihash_foreach_key_value_pair_24_8 (&r->path_by_session, srv6pm_collect_kv, &kvs);
  vec_foreach (kv, kvs)
    {
      srv6pm_stamp_path_t *path = pool_elt_at_index (r->paths, kv->value);
      vl_api_srv6pm_reflector_path_details_t *rmp = vl_msg_api_alloc_zero (sizeof (*rmp));
      ip6_address_t sender = { .as_u64 = { kv->key[0], kv->key[1] } };
      rmp->_vl_msg_id = htons (VL_API_SRV6PM_REFLECTOR_PATH_DETAILS + srv6pm_main.msg_id_base);
      rmp->context = mp->context;
      ip6_address_encode (&sender, rmp->sender);
      rmp->ssid = clib_host_to_net_u16 (kv->key[2] & 0xffff);
      rmp->len = clib_host_to_net_u16 (path->len);
      clib_memcpy (rmp->value, path->value, path->len);
      vl_api_send_msg (reg, (u8 *) rmp);
    }
  vec_free (kvs);
}

static void
vl_api_srv6pm_steer_add_del_t_handler (vl_api_srv6pm_steer_add_del_t *mp)
{
  vl_api_srv6pm_steer_add_del_reply_t *rmp;
  ip6_address_t address, bsid;
  int rv;

  ip6_address_decode (mp->address, &address);
  ip6_address_decode (mp->bsid, &bsid);
  rv = srv6pm_steer_add_del (&address, clib_net_to_host_u16 (mp->ssid), mp->kind, &bsid,
			     mp->is_add);
  REPLY_MACRO (VL_API_SRV6PM_STEER_ADD_DEL_REPLY);
}

static void
vl_api_srv6pm_steer_dump_t_handler (vl_api_srv6pm_steer_dump_t *mp)
{
  srv6pm_reflector_t *r = &srv6pm_main.reflector;
  vl_api_registration_t *reg = vl_api_client_index_to_registration (mp->client_index);
  clib_bihash_kv_24_8_t *kvs = 0, *kv;

  if (!reg)
    return;
  clib_bihash_foreach_key_value_pair_24_8 (&r->steer_by_session, srv6pm_collect_kv, &kvs);
  vec_foreach (kv, kvs)
    {
      srv6pm_stamp_steer_t *steer = pool_elt_at_index (r->steers, kv->value);
      vl_api_srv6pm_steer_details_t *rmp = vl_msg_api_alloc_zero (sizeof (*rmp));
      ip6_address_t address = { .as_u64 = { kv->key[0], kv->key[1] } };
      rmp->_vl_msg_id = htons (VL_API_SRV6PM_STEER_DETAILS + srv6pm_main.msg_id_base);
      rmp->context = mp->context;
      rmp->kind = kv->key[2] >> 16;
      ip6_address_encode (&address, rmp->address);
      rmp->ssid = clib_host_to_net_u16 (kv->key[2] & 0xffff);
      ip6_address_encode (&steer->bsid, rmp->bsid);
      vl_api_send_msg (reg, (u8 *) rmp);
    }
  vec_free (kvs);
}

static void
srv6pm_fill_reflector_stats (vl_api_srv6pm_reflector_stats_get_reply_t *rmp)
{
  srv6pm_reflector_t *r = &srv6pm_main.reflector;

#define _(sym, name, str)                                                                   \
  rmp->name = clib_host_to_net_u64 (vlib_get_simple_counter (&r->stats, SRV6PM_REFLECTOR_##sym));
  foreach_srv6pm_reflector_stat
#undef _
}

static void
vl_api_srv6pm_reflector_stats_get_t_handler (vl_api_srv6pm_reflector_stats_get_t *mp)
{
  vl_api_srv6pm_reflector_stats_get_reply_t *rmp;
  int rv = 0;

  REPLY_MACRO2 (VL_API_SRV6PM_REFLECTOR_STATS_GET_REPLY, ({ srv6pm_fill_reflector_stats (rmp); }));
}

/* ---- STAMP Session-Sender's packets -------------------------------------------------------- */

static void
vl_api_srv6pm_sender_port_add_del_t_handler (vl_api_srv6pm_sender_port_add_del_t *mp)
{
  vl_api_srv6pm_sender_port_add_del_reply_t *rmp;
  int rv = srv6pm_sender_port_add_del (clib_net_to_host_u16 (mp->port), mp->is_add);

  REPLY_MACRO (VL_API_SRV6PM_SENDER_PORT_ADD_DEL_REPLY);
}

static void
vl_api_srv6pm_stamp_send_t_handler (vl_api_srv6pm_stamp_send_t *mp)
{
  vl_api_srv6pm_stamp_send_reply_t *rmp;
  ip6_address_t source, destination;
  u16 len = clib_net_to_host_u16 (mp->len);
  int rv = VNET_API_ERROR_INVALID_VALUE;

  ip6_address_decode (mp->source, &source);
  ip6_address_decode (mp->destination, &destination);
  if (vl_msg_api_get_msg_length (mp) >= sizeof (*mp) + len && mp->t1_format <= SRV6PM_T1_PTP)
    rv = srv6pm_stamp_send (&source, &destination, clib_net_to_host_u16 (mp->source_port),
			    clib_net_to_host_u16 (mp->destination_port),
			    clib_net_to_host_u16 (mp->ssid), mp->traffic_class, mp->t1_format,
			    mp->data, len);
  REPLY_MACRO (VL_API_SRV6PM_STAMP_SEND_REPLY);
}

#define SRV6PM_MAX_RECEIVED_PER_REPLY 64

static void
vl_api_srv6pm_stamp_receive_t_handler (vl_api_srv6pm_stamp_receive_t *mp)
{
  vl_api_srv6pm_stamp_receive_reply_t *rmp;
  /* 64 KiB: not on the API process's stack (handlers run on the main thread only) */
  static srv6pm_stamp_received_t got[SRV6PM_MAX_RECEIVED_PER_REPLY];
  u64 dropped;
  u32 n = srv6pm_stamp_take (
    got, clib_min (clib_net_to_host_u32 (mp->max), SRV6PM_MAX_RECEIVED_PER_REPLY), &dropped);
  int rv = 0;

  REPLY_MACRO3 (VL_API_SRV6PM_STAMP_RECEIVE_REPLY, n * sizeof (vl_api_srv6pm_stamp_received_t), ({
		  rmp->dropped = clib_host_to_net_u64 (dropped);
		  rmp->n_packets = clib_host_to_net_u32 (n);
		  for (u32 i = 0; i < n; i++)
		    {
		      vl_api_srv6pm_stamp_received_t *p = &rmp->packets[i];
		      p->received_ns = clib_host_to_net_u64 (got[i].received_ns);
		      ip6_address_encode (&got[i].source, p->source);
		      ip6_address_encode (&got[i].destination, p->destination);
		      p->source_port = clib_host_to_net_u16 (got[i].source_port);
		      p->destination_port = clib_host_to_net_u16 (got[i].destination_port);
		      p->hop_limit = got[i].hop_limit;
		      p->traffic_class = got[i].traffic_class;
		      p->len = clib_host_to_net_u16 (got[i].len);
		      clib_memcpy (p->data, got[i].data, got[i].len);
		    }
		}));
}

#include <srv6pm/srv6pm.api.c>

static clib_error_t *
srv6pm_api_init (vlib_main_t *vm)
{
  srv6pm_main.msg_id_base = setup_message_id_table ();
  return 0;
}

VLIB_INIT_FUNCTION (srv6pm_api_init);
