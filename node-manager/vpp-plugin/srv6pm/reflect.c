/*
 * srv6pm STAMP Session-Reflector: its configuration, the sessions' published block counts,
 * declared return paths, reply steering and CLI (the graph node is reflect_node.c).
 *
 * The reflector listens on its UDP port (udp6 dispatch, after ip6-local: probes decapsulated by
 * VPP's End.DT6 arrive here like plain ones) for its address. Everything that changes what the
 * node reads is changed with the workers stopped.
 */
#include <vnet/udp/udp_local.h>
#include <vnet/srv6/sr.h>
#include <srv6pm/srv6pm.h>
#include <vppinfra/bihash_24_8.h>
#include <vppinfra/bihash_template.c>

static void
srv6pm_table_init (clib_bihash_24_8_t *h, char *name, u32 entries)
{
  clib_bihash_init2_args_24_8_t a = {
    .h = h,
    .name = name,
    .nbuckets = entries / 4,
    .instantiate_immediately = 1,
  };
  clib_bihash_init2_24_8 (&a);
}

static void
srv6pm_sequences_reset (srv6pm_reflector_t *r)
{
  clib_bihash_free_24_8 (&r->sequences);
  srv6pm_table_init (&r->sequences, "srv6pm STAMP sequences", SRV6PM_STAMP_MAX_SEQUENCES);
  r->n_sequences = 0;
}

int
srv6pm_reflector_set (const srv6pm_reflector_config_t *c)
{
  srv6pm_reflector_t *r = &srv6pm_main.reflector;
  vlib_main_t *vm = vlib_get_main ();

  if (c->enabled && !c->port)
    return VNET_API_ERROR_INVALID_VALUE;
  if (c->key_len > SRV6PM_STAMP_MAX_KEY)
    return VNET_API_ERROR_INVALID_VALUE_2;
  if (c->enabled && r->enabled && r->port != c->port && udp_is_valid_dst_port (c->port, 0))
    return VNET_API_ERROR_UDP_PORT_TAKEN;
  if (c->enabled && !r->enabled && udp_is_valid_dst_port (c->port, 0))
    return VNET_API_ERROR_UDP_PORT_TAKEN;

  vlib_worker_thread_barrier_sync (vm);
  if (r->enabled && (!c->enabled || r->port != c->port))
    udp_unregister_dst_port (vm, r->port, 0 /* is_ip4 */);
  if (c->enabled && (!r->enabled || r->port != c->port))
    udp_register_dst_port (vm, c->port, srv6pm_reflect_node.index, 0 /* is_ip4 */);
  /* a new key or another mode: the other side's sequence is a new one */
  if (r->stateful != c->stateful || r->authenticated != !!c->key_len)
    srv6pm_sequences_reset (r);
  r->enabled = c->enabled;
  r->stateful = c->stateful;
  r->port = c->port;
  r->error_estimate = c->error_estimate;
  r->address = c->address;
  r->period_ns = c->period_ns;
  r->allowed_dscp = c->allowed_dscp;
  r->authenticated = c->key_len > 0;
  if (c->key_len)
    clib_sha2_hmac_key_data (CLIB_SHA2_256, c->key, c->key_len, &r->key);
  else
    clib_memset (&r->key, 0, sizeof (r->key));
  vlib_worker_thread_barrier_release (vm);
  return 0;
}

int
srv6pm_reflector_blocks_set (u16 ssid, u64 block, u32 rx, u32 tx)
{
  srv6pm_reflector_t *r = &srv6pm_main.reflector;
  srv6pm_stamp_blocks_t *b;
  uword *p = hash_get (r->blocks_by_ssid, ssid);
  u32 slot = block & 1;

  if (!p)
    {
      vlib_worker_thread_barrier_sync (vlib_get_main ());
      pool_get_zero (r->blocks, b);
      hash_set (r->blocks_by_ssid, ssid, b - r->blocks);
      vlib_worker_thread_barrier_release (vlib_get_main ());
    }
  else
    b = pool_elt_at_index (r->blocks, p[0]);
  /* the other slot is the block before: a reader sees one slot change at a time */
  b->valid[slot] = 0;
  CLIB_MEMORY_STORE_BARRIER ();
  b->block[slot] = block;
  b->rx[slot] = rx;
  b->tx[slot] = tx;
  CLIB_MEMORY_STORE_BARRIER ();
  b->valid[slot] = 1;
  return 0;
}

int
srv6pm_reflector_blocks_clear (void)
{
  srv6pm_reflector_t *r = &srv6pm_main.reflector;

  vlib_worker_thread_barrier_sync (vlib_get_main ());
  pool_free (r->blocks);
  hash_free (r->blocks_by_ssid);
  vlib_worker_thread_barrier_release (vlib_get_main ());
  return 0;
}

int
srv6pm_reflector_path_add_del (const ip6_address_t *sender, u16 ssid, const u8 *value, u16 len,
			       int is_add)
{
  srv6pm_reflector_t *r = &srv6pm_main.reflector;
  clib_bihash_kv_24_8_t kv;
  srv6pm_stamp_path_t *path;

  if (is_add && (len < 4 || len > SRV6PM_STAMP_MAX_RETURN_PATH))
    return VNET_API_ERROR_INVALID_VALUE;
  srv6pm_session_key (&kv, sender, ssid, 0);
  int held = !clib_bihash_search_24_8 (&r->path_by_session, &kv, &kv);
  if (!is_add && !held)
    return VNET_API_ERROR_NO_SUCH_ENTRY;
  vlib_worker_thread_barrier_sync (vlib_get_main ());
  if (held && !is_add)
    {
      pool_put_index (r->paths, kv.value);
      clib_bihash_add_del_24_8 (&r->path_by_session, &kv, 0);
    }
  else if (is_add)
    {
      if (held)
	path = pool_elt_at_index (r->paths, kv.value);
      else
	{
	  pool_get_zero (r->paths, path);
	  kv.value = path - r->paths;
	  clib_bihash_add_del_24_8 (&r->path_by_session, &kv, 1);
	}
      path->len = len;
      clib_memcpy (path->value, value, len);
    }
  vlib_worker_thread_barrier_release (vlib_get_main ());
  return 0;
}

int
srv6pm_steer_add_del (const ip6_address_t *address, u16 ssid, u8 kind, const ip6_address_t *bsid,
		      int is_add)
{
  srv6pm_reflector_t *r = &srv6pm_main.reflector;
  ip6_sr_main_t *sm = &sr_main;
  clib_bihash_kv_24_8_t kv;
  srv6pm_stamp_steer_t *steer;
  ip6_sr_policy_t *policy = 0;

  if (kind != SRV6PM_STEER_REPLY && kind != SRV6PM_STEER_PROBE)
    return VNET_API_ERROR_INVALID_VALUE;
  if (is_add)
    {
      uword *p = mhash_get (&sm->sr_policies_index_hash, bsid);
      if (!p)
	return VNET_API_ERROR_NO_SUCH_ENTRY;
      policy = pool_elt_at_index (sm->sr_policies, p[0]);
    }
  srv6pm_session_key (&kv, address, ssid, kind);
  int held = !clib_bihash_search_24_8 (&r->steer_by_session, &kv, &kv);
  if (!is_add && !held)
    return VNET_API_ERROR_NO_SUCH_ENTRY;
  vlib_worker_thread_barrier_sync (vlib_get_main ());
  if (held && !is_add)
    {
      steer = pool_elt_at_index (r->steers, kv.value);
      dpo_reset (&steer->dpo);
      pool_put (r->steers, steer);
      clib_bihash_add_del_24_8 (&r->steer_by_session, &kv, 0);
    }
  else if (is_add)
    {
      if (held)
	steer = pool_elt_at_index (r->steers, kv.value);
      else
	{
	  pool_get_zero (r->steers, steer);
	  kv.value = steer - r->steers;
	  clib_bihash_add_del_24_8 (&r->steer_by_session, &kv, 1);
	}
      steer->bsid = *bsid;
      /* the policy's own load balance over its segment lists, as VPP's L3 steering uses it,
       * from the node that sends these packets */
      u32 from = kind == SRV6PM_STEER_REPLY ? srv6pm_reflect_node.index :
					      srv6pm_stamp_send_node.index;
      dpo_stack_from_node (from, &steer->dpo, &policy->ip6_dpo);
    }
  vlib_worker_thread_barrier_release (vlib_get_main ());
  return 0;
}

static clib_error_t *
srv6pm_show_reflector_fn (vlib_main_t *vm, unformat_input_t *input, vlib_cli_command_t *cmd)
{
  srv6pm_reflector_t *r = &srv6pm_main.reflector;

  if (!r->enabled)
    vlib_cli_output (vm, "STAMP reflector: disabled");
  else
    vlib_cli_output (vm,
		     "STAMP reflector: [%U]:%u, %s, %s, period %llu ns, %u sessions with "
		     "counts, %u return paths, %u reply steers, %u stateful senders",
		     format_ip6_address, &r->address, r->port,
		     r->stateful ? "stateful" : "stateless",
		     r->authenticated ? "authenticated" : "unauthenticated", r->period_ns,
		     pool_elts (r->blocks), pool_elts (r->paths), pool_elts (r->steers),
		     r->n_sequences);
#define _(sym, name, str)                                                                   \
  vlib_cli_output (vm, "%-12llu %s",                                                        \
		   vlib_get_simple_counter (&r->stats, SRV6PM_REFLECTOR_##sym), str);
  foreach_srv6pm_reflector_stat
#undef _
    return 0;
}

VLIB_CLI_COMMAND (srv6pm_show_reflector_command, static) = {
  .path = "show srv6pm reflector",
  .short_help = "show srv6pm reflector",
  .function = srv6pm_show_reflector_fn,
};

static clib_error_t *
srv6pm_reflector_init (vlib_main_t *vm)
{
  srv6pm_reflector_t *r = &srv6pm_main.reflector;

  srv6pm_table_init (&r->path_by_session, "srv6pm STAMP return paths", 16384);
  srv6pm_table_init (&r->steer_by_session, "srv6pm STAMP steering", 16384);
  srv6pm_table_init (&r->sequences, "srv6pm STAMP sequences", SRV6PM_STAMP_MAX_SEQUENCES);
  r->blocks_by_ssid = hash_create (0, sizeof (uword));
  r->stats.name = "srv6pm reflector";
  r->stats.stat_segment_name = "/srv6pm/reflector";
  vlib_validate_simple_counter (&r->stats, SRV6PM_REFLECTOR_N_STATS - 1);
  vlib_zero_simple_counter (&r->stats, 0);
  return 0;
}

VLIB_INIT_FUNCTION (srv6pm_reflector_init);
