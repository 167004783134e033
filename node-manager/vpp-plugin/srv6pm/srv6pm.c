/*
 * srv6pm plugin: registration, configuration, flows, hooks and CLI (the binary API is in
 * srv6pm_api.c, the graph nodes in node.c).
 */
#include <unistd.h>
#include <vnet/plugin/plugin.h>
#include <vnet/feature/feature.h>
#include <vpp/app/version.h>
#include <srv6pm/srv6pm.h>
/* the 8_8 table's code here (reflect.c has the 24_8 one's): the last type included is built */
#include <vppinfra/bihash_8_8.h>
#include <vppinfra/bihash_template.c>

srv6pm_main_t srv6pm_main;

VLIB_PLUGIN_REGISTER () = {
  .version = VPP_BUILD_VER,
  .description = "srv6pm: SRv6 alternate marking and per-flow counters",
};

static const char *srv6pm_hook_arc[SRV6PM_N_HOOKS] = {
  [SRV6PM_HOOK_MARK] = "ip6-output",
  [SRV6PM_HOOK_COUNT] = "ip6-unicast",
  [SRV6PM_HOOK_GUARD] = "ip6-unicast",
};

static const char *srv6pm_hook_node[SRV6PM_N_HOOKS] = {
  [SRV6PM_HOOK_MARK] = "srv6pm-mark",
  [SRV6PM_HOOK_COUNT] = "srv6pm-count",
  [SRV6PM_HOOK_GUARD] = "srv6pm-guard",
};

/* slot_by_key holds at most SRV6PM_MAX_FLOWS keys: 4 per bucket then, in buckets of 7 */
#define SRV6PM_KEY_BUCKETS (SRV6PM_MAX_FLOWS / 4)

static void
srv6pm_key_table_init (srv6pm_main_t *sm)
{
  clib_bihash_init2_args_8_8_t a = {
    .h = &sm->slot_by_key,
    .name = "srv6pm flows by SID list",
    .nbuckets = SRV6PM_KEY_BUCKETS,
    .instantiate_immediately = 1,
  };
  clib_bihash_init2_8_8 (&a);
}

/* The slot of the flow keyed by `key`, or ~0. */
static u32
srv6pm_key_slot (srv6pm_main_t *sm, u64 key)
{
  clib_bihash_kv_8_8_t kv = { .key = key };

  if (clib_bihash_search_inline_with_hash_8_8 (&sm->slot_by_key, key, &kv))
    return ~0;
  return kv.value;
}

static void
srv6pm_key_set (srv6pm_main_t *sm, u64 key, u32 slot, int is_add)
{
  clib_bihash_kv_8_8_t kv = { .key = key, .value = slot };

  clib_bihash_add_del_with_hash_8_8 (&sm->slot_by_key, &kv, key, is_add);
}

static const char *srv6pm_role_name[] = {
  [SRV6PM_ROLE_NONE] = "none",
  [SRV6PM_ROLE_INGRESS] = "ingress",
  [SRV6PM_ROLE_TRANSIT] = "transit",
  [SRV6PM_ROLE_EGRESS] = "egress",
};

int
srv6pm_config_set (u64 period_ns, u8 mode, u8 monitored_bit, u8 colour_bit)
{
  srv6pm_main_t *sm = &srv6pm_main;

  if (mode != SRV6PM_MODE_ALTMARK && mode != SRV6PM_MODE_DSCP)
    return VNET_API_ERROR_INVALID_VALUE;
  if (mode == SRV6PM_MODE_DSCP &&
      (!monitored_bit || !colour_bit || monitored_bit == colour_bit ||
       (monitored_bit & (monitored_bit - 1)) || (colour_bit & (colour_bit - 1))))
    return VNET_API_ERROR_INVALID_VALUE_2;
  /* Flows keyed by SID list depend on the mode (DSCP mode keys transit and egress flows by SID
   * list too): the keys are rebuilt with the workers stopped. */
  vlib_worker_thread_barrier_sync (vlib_get_main ());
  sm->period_ns = period_ns;
  sm->mode = mode;
  sm->monitored_bit = monitored_bit;
  sm->colour_bit = colour_bit;
  clib_bihash_free_8_8 (&sm->slot_by_key);
  srv6pm_key_table_init (sm);
  srv6pm_flow_t *f;
  vec_foreach (f, sm->flows)
    if (f->role == SRV6PM_ROLE_INGRESS || (f->role && mode == SRV6PM_MODE_DSCP))
      srv6pm_key_set (sm, f->key, f - sm->flows, 1);
  vlib_worker_thread_barrier_release (vlib_get_main ());
  return 0;
}

static int
srv6pm_keyed_by_sids (const srv6pm_flow_t *f)
{
  return f->role == SRV6PM_ROLE_INGRESS || srv6pm_main.mode == SRV6PM_MODE_DSCP;
}

static void
srv6pm_unindex (srv6pm_main_t *sm, u32 slot)
{
  srv6pm_flow_t *f = vec_elt_at_index (sm->flows, slot);

  if (srv6pm_keyed_by_sids (f) && srv6pm_key_slot (sm, f->key) == slot)
    srv6pm_key_set (sm, f->key, slot, 0);
  if (f->role != SRV6PM_ROLE_INGRESS && f->flowmon_id &&
      sm->slot_by_flowmon[f->flowmon_id] == slot + 1)
    sm->slot_by_flowmon[f->flowmon_id] = 0;
  clib_memset (f, 0, sizeof (*f));
  clib_memset (vec_elt_at_index (sm->sids, slot), 0, sizeof (srv6pm_sids_t));
  sm->n_flows--;
}

int
srv6pm_flow_add (u32 slot, u8 role, u32 flowmon_id, const ip6_address_t *travel_order,
		 u8 n_segments)
{
  srv6pm_main_t *sm = &srv6pm_main;
  srv6pm_flow_t flow = {};
  srv6pm_sids_t sids = { 0 };

  if (slot >= SRV6PM_MAX_FLOWS)
    return VNET_API_ERROR_LIMIT_EXCEEDED;
  if (role < SRV6PM_ROLE_INGRESS || role > SRV6PM_ROLE_EGRESS)
    return VNET_API_ERROR_INVALID_VALUE;
  if (flowmon_id >= SRV6PM_MAX_FLOWMON)
    return VNET_API_ERROR_INVALID_VALUE_2;
  if (n_segments < 1 || n_segments > SRV6PM_MAX_SEGMENTS)
    return VNET_API_ERROR_INVALID_VALUE_3;

  flow.role = role;
  flow.flowmon_id = flowmon_id;
  flow.n_segments = n_segments;
  for (u32 i = 0; i < n_segments; i++)
    sids.segments[i] = travel_order[n_segments - 1 - i];
  for (u32 i = 0; i < n_segments && i < SRV6PM_HOT_SEGMENTS; i++)
    flow.first[i] = sids.segments[i];
  flow.key = srv6pm_sids_key (sids.segments, n_segments);

  /* another slot's flow with this SID list (or key), or this FlowMonID: refused, and the
   * slot keeps what it had */
  u32 keyed = srv6pm_keyed_by_sids (&flow) ? srv6pm_key_slot (sm, flow.key) : ~0;
  if (keyed != ~0 && keyed != slot)
    return VNET_API_ERROR_VALUE_EXIST;
  u32 holder = role != SRV6PM_ROLE_INGRESS && flowmon_id ? sm->slot_by_flowmon[flowmon_id] : 0;
  if (holder && holder != slot + 1)
    return VNET_API_ERROR_ENTRY_ALREADY_EXISTS;

  vlib_worker_thread_barrier_sync (vlib_get_main ());
  vec_validate_aligned (sm->flows, slot, CLIB_CACHE_LINE_BYTES);
  vec_validate (sm->sids, slot);
  if (sm->flows[slot].role)
    srv6pm_unindex (sm, slot);
  sm->flows[slot] = flow;
  sm->sids[slot] = sids;
  sm->n_flows++;
  if (srv6pm_keyed_by_sids (&flow))
    srv6pm_key_set (sm, flow.key, slot, 1);
  if (role != SRV6PM_ROLE_INGRESS && flowmon_id)
	sm->slot_by_flowmon[flowmon_id] = slot + 1;
  /* a slot used before counts again from zero */
  vlib_zero_combined_counter (&sm->counters, 2 * slot);
  vlib_zero_combined_counter (&sm->counters, 2 * slot + 1);
  vlib_worker_thread_barrier_release (vlib_get_main ());
  return 0;
}

int
srv6pm_flow_del (u32 slot)
{
  srv6pm_main_t *sm = &srv6pm_main;

  if (slot >= vec_len (sm->flows) || !sm->flows[slot].role)
    return VNET_API_ERROR_NO_SUCH_ENTRY;
  vlib_worker_thread_barrier_sync (vlib_get_main ());
  srv6pm_unindex (sm, slot);
  vlib_worker_thread_barrier_release (vlib_get_main ());
  return 0;
}

int
srv6pm_hook_enable_disable (u32 sw_if_index, u8 hook, int enable)
{
  srv6pm_main_t *sm = &srv6pm_main;

  if (hook < SRV6PM_HOOK_MARK || hook >= SRV6PM_N_HOOKS)
    return VNET_API_ERROR_INVALID_VALUE;
  if (pool_is_free_index (sm->vnet_main->interface_main.sw_interfaces, sw_if_index))
    return VNET_API_ERROR_INVALID_SW_IF_INDEX;
  if (clib_bitmap_get (sm->hooks[hook], sw_if_index) == !!enable)
    return 0; /* already so: enabling a feature twice would count it twice */
  int rv = vnet_feature_enable_disable (srv6pm_hook_arc[hook], srv6pm_hook_node[hook],
					sw_if_index, enable, 0, 0);
  if (!rv)
    sm->hooks[hook] = clib_bitmap_set (sm->hooks[hook], sw_if_index, !!enable);
  return rv;
}

u64
srv6pm_reason_total (srv6pm_reason_t reason)
{
  return vlib_get_simple_counter (&srv6pm_main.reasons, reason);
}

/* ---- CLI ----------------------------------------------------------------------------------- */

static u8 *
format_srv6pm_flow (u8 *s, va_list *args)
{
  srv6pm_flow_t *f = va_arg (*args, srv6pm_flow_t *);
  u32 slot = va_arg (*args, u32);
  srv6pm_main_t *sm = &srv6pm_main;
  vlib_counter_t c[2];

  vlib_get_combined_counter (&sm->counters, 2 * slot, &c[0]);
  vlib_get_combined_counter (&sm->counters, 2 * slot + 1, &c[1]);
  srv6pm_sids_t *sids = vec_elt_at_index (sm->sids, slot);
  s = format (s, "slot %u %s flowmon-id %u sids", slot, srv6pm_role_name[f->role], f->flowmon_id);
  for (int i = f->n_segments - 1; i >= 0; i--)
    s = format (s, " %U", format_ip6_address, &sids->segments[i]);
  return format (s, "\n  colour 0: %llu packets %llu bytes; colour 1: %llu packets %llu bytes",
		 c[0].packets, c[0].bytes, c[1].packets, c[1].bytes);
}

static clib_error_t *
srv6pm_show_command_fn (vlib_main_t *vm, unformat_input_t *input, vlib_cli_command_t *cmd)
{
  srv6pm_main_t *sm = &srv6pm_main;
  srv6pm_flow_t *f;

  vlib_cli_output (vm, "period %llu ns, mode %s, instance %016llx, %u flows", sm->period_ns,
		   sm->mode == SRV6PM_MODE_DSCP ? "dscp" : "altmark", sm->instance_id,
		   sm->n_flows);
  for (u8 hook = SRV6PM_HOOK_MARK; hook < SRV6PM_N_HOOKS; hook++)
    {
      u32 sw_if_index;
      clib_bitmap_foreach (sw_if_index, sm->hooks[hook])
	vlib_cli_output (vm, "%s on %U", srv6pm_hook_node[hook], format_vnet_sw_if_index_name,
			 sm->vnet_main, sw_if_index);
    }
#define _(sym, str)                                                                       \
  vlib_cli_output (vm, "%-12llu %s", srv6pm_reason_total (SRV6PM_REASON_##sym), str);
  foreach_srv6pm_reason
#undef _
    vec_foreach (f, sm->flows) if (f->role)
      vlib_cli_output (vm, "%U", format_srv6pm_flow, f, (u32) (f - sm->flows));
  return 0;
}

VLIB_CLI_COMMAND (srv6pm_show_command, static) = {
  .path = "show srv6pm",
  .short_help = "show srv6pm",
  .function = srv6pm_show_command_fn,
};

/* ---- init ---------------------------------------------------------------------------------- */

static clib_error_t *
srv6pm_init (vlib_main_t *vm)
{
  srv6pm_main_t *sm = &srv6pm_main;

  sm->vnet_main = vnet_get_main ();
  sm->mode = SRV6PM_MODE_ALTMARK;
  srv6pm_key_table_init (sm);
  vec_validate (sm->slot_by_flowmon, SRV6PM_MAX_FLOWMON - 1);
  /* A new value at every start: the node manager tells a restarted VPP (whose counters began
   * again from zero) from a node-manager restart (same counters). */
  sm->instance_id = (u64) unix_time_now_nsec () ^ ((u64) getpid () << 40) ^ clib_cpu_time_now ();
  sm->instance_id |= 1;

  sm->counters.name = "srv6pm flows";
  sm->counters.stat_segment_name = "/srv6pm/flow";
  vlib_validate_combined_counter (&sm->counters, 2 * SRV6PM_MAX_FLOWS - 1);
  vlib_zero_combined_counter (&sm->counters, 0);
  sm->reasons.name = "srv6pm packets";
  sm->reasons.stat_segment_name = "/srv6pm/packets";
  vlib_validate_simple_counter (&sm->reasons, SRV6PM_N_REASONS - 1);
  return 0;
}

VLIB_INIT_FUNCTION (srv6pm_init);

VNET_FEATURE_INIT (srv6pm_guard, static) = {
  .arc_name = "ip6-unicast",
  .node_name = "srv6pm-guard",
  .runs_before = VNET_FEATURES ("srv6pm-count"),
};

VNET_FEATURE_INIT (srv6pm_count, static) = {
  .arc_name = "ip6-unicast",
  .node_name = "srv6pm-count",
  .runs_before = VNET_FEATURES ("ip6-lookup"),
};

VNET_FEATURE_INIT (srv6pm_mark, static) = {
  .arc_name = "ip6-output",
  .node_name = "srv6pm-mark",
  .runs_before = VNET_FEATURES ("interface-output"),
};
