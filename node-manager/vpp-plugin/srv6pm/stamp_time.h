/*
 * STAMP timestamps (RFC 8762 section 4.2.1) as srv6pm writes them in VPP: the reflector's T2 and
 * T3, the sender's T1, from CLOCK_REALTIME, in NTP or PTPv2-truncated format (the Z bit),
 * rounded as the userspace code rounds them (twamp/timestamps.py).
 */
#ifndef included_srv6pm_stamp_time_h
#define included_srv6pm_stamp_time_h

#include <time.h>
#include <vppinfra/clib.h>
#include <vppinfra/byte_order.h>

#define SRV6PM_NTP_UNIX_OFFSET_S 2208988800ULL
#define SRV6PM_TAI_UTC_OFFSET_NS (37ULL * 1000000000ULL) /* as the userspace code counts PTP */
#define SRV6PM_NS_PER_S		 1000000000ULL

static_always_inline u64
srv6pm_unix_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_REALTIME, &ts);
  return (u64) ts.tv_sec * SRV6PM_NS_PER_S + ts.tv_nsec;
}

/* The 8 octets at `out`: Unix time `unix_ns` as PTPv2 truncated (TAI) or NTP. */
static_always_inline void
srv6pm_stamp_time (u64 unix_ns, int ptp, u8 *out)
{
  u32 s, frac;

  if (ptp)
    {
      u64 t = unix_ns + SRV6PM_TAI_UTC_OFFSET_NS;
      s = t / SRV6PM_NS_PER_S;
      frac = t % SRV6PM_NS_PER_S;
    }
  else
    {
      s = unix_ns / SRV6PM_NS_PER_S + SRV6PM_NTP_UNIX_OFFSET_S;
      frac = (((unix_ns % SRV6PM_NS_PER_S) << 32) + SRV6PM_NS_PER_S / 2) / SRV6PM_NS_PER_S;
    }
  clib_mem_unaligned (out, u32) = clib_host_to_net_u32 (s);
  clib_mem_unaligned (out + 4, u32) = clib_host_to_net_u32 (frac);
}

/* Unix ns of the timestamp at `ts` in the format `ptp` says; 0 when unreadable. */
static_always_inline u64
srv6pm_stamp_unix_ns (const u8 *ts, int ptp)
{
  u64 s = clib_net_to_host_u32 (clib_mem_unaligned (ts, u32));
  u64 frac = clib_net_to_host_u32 (clib_mem_unaligned (ts + 4, u32));

  if (ptp)
    {
      u64 t = s * SRV6PM_NS_PER_S + frac;
      return frac < SRV6PM_NS_PER_S && t > SRV6PM_TAI_UTC_OFFSET_NS ?
	       t - SRV6PM_TAI_UTC_OFFSET_NS :
	       0;
    }
  if (!(s & 0x80000000))
    s += 1ULL << 32; /* NTP era 1: 2036 .. 2104 */
  return (s - SRV6PM_NTP_UNIX_OFFSET_S) * SRV6PM_NS_PER_S +
	 ((frac * SRV6PM_NS_PER_S + (1ULL << 31)) >> 32);
}

#endif /* included_srv6pm_stamp_time_h */
