// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * stampgen: a paced generator of unauthenticated STAMP Session-Sender test packets (RFC 8762
 * section 4.2.1, 44 octets: Sequence Number, Timestamp, Error Estimate, SSID, 28 MBZ) over a
 * UDP/IPv6 socket, which counts the reflector's replies on the same socket. For the reflector
 * benchmark (bench/stamp_reflector.py).
 *
 * Sending: sendmmsg() of the packets due, on an absolute schedule of --rate packets per second,
 * waking at most every --tick-us microseconds (so at high rates a wake-up sends a few packets
 * and at low rates one). After a stall of up to 5 ms (at least 4 ticks), for example when the
 * vCPU was preempted, it catches up; after a longer one it resets its schedule instead of
 * bursting, and counts the reset.
 *
 * Receiving: after each send, recvmmsg() drains the socket. A reply counts when it is at least
 * 44 octets, carries --ssid and a Session-Sender Sequence Number that was sent in this run
 * (each trial uses its own SSID, so late replies to an earlier trial are not counted), and is
 * not a duplicate (one bit per sequence number). After --duration, receiving goes on for
 * --drain seconds. The round-trip time of each reply (receive time in userspace minus the
 * Session-Sender Timestamp it carries) goes into a 1 us histogram.
 *
 * Usage: stampgen --src IP6 --dst IP6 --rate PPS --duration S
 *                 [--sport N] [--dport N] [--ssid N] [--drain S] [--tick-us N]
 * Prints one JSON line.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define STAMP_LEN 44
#define MAX_BATCH 256
#define RX_LEN 2048
#define NTP_UNIX_OFFSET 2208988800ULL
#define RTT_BUCKETS 200000 /* 1 us each: up to 200 ms; slower replies land in the last one */
#define MAX_LAG_NS 5000000ULL

struct options {
	struct in6_addr src, dst;
	uint16_t sport, dport, ssid;
	double rate, duration, drain;
	unsigned tick_us;
};

struct counts {
	uint64_t received, duplicates, foreign;
	uint64_t scheduled;
	uint8_t *seen; /* one bit per sequence number */
	uint64_t seen_bits;
	uint32_t *rtt; /* RTT_BUCKETS */
	uint64_t rtt_max_us;
};

static void die(const char *what)
{
	fprintf(stderr, "stampgen: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void usage(const char *msg)
{
	fprintf(stderr,
		"stampgen: %s\nusage: stampgen --src IP6 --dst IP6 --rate PPS --duration S "
		"[--sport N] [--dport N] [--ssid N] [--drain S] [--tick-us N]\n",
		msg);
	exit(2);
}

static uint64_t clock_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ULL),
			      .tv_nsec = (long)(ns % 1000000000ULL)};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static uint64_t ntp_from_unix_ns(uint64_t ns)
{
	uint64_t seconds = ns / 1000000000ULL + NTP_UNIX_OFFSET;
	uint64_t fraction = ((ns % 1000000000ULL) << 32) / 1000000000ULL;

	return seconds << 32 | fraction;
}

static uint64_t unix_ns_from_ntp(uint64_t ntp)
{
	uint64_t seconds = (ntp >> 32) - NTP_UNIX_OFFSET;

	return seconds * 1000000000ULL + (((ntp & 0xffffffffULL) * 1000000000ULL) >> 32);
}

static void put_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put_u32(uint8_t *p, uint32_t v)
{
	put_u16(p, (uint16_t)(v >> 16));
	put_u16(p + 2, (uint16_t)v);
}

static void put_u64(uint8_t *p, uint64_t v)
{
	put_u32(p, (uint32_t)(v >> 32));
	put_u32(p + 4, (uint32_t)v);
}

static uint32_t get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get_u64(const uint8_t *p)
{
	return (uint64_t)get_u32(p) << 32 | get_u32(p + 4);
}

static void parse_args(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{"src", required_argument, NULL, 's'},	 {"dst", required_argument, NULL, 'd'},
		{"rate", required_argument, NULL, 'r'},	 {"duration", required_argument, NULL, 't'},
		{"sport", required_argument, NULL, 'S'}, {"dport", required_argument, NULL, 'D'},
		{"ssid", required_argument, NULL, 'i'},	 {"drain", required_argument, NULL, 'w'},
		{"tick-us", required_argument, NULL, 'k'}, {NULL, 0, NULL, 0},
	};
	int have_src = 0, have_dst = 0, opt;

	*o = (struct options){.sport = 50000, .dport = 862, .ssid = 1, .drain = 0.5, .tick_us = 20};
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case 's': have_src = inet_pton(AF_INET6, optarg, &o->src) == 1; break;
		case 'd': have_dst = inet_pton(AF_INET6, optarg, &o->dst) == 1; break;
		case 'r': o->rate = strtod(optarg, NULL); break;
		case 't': o->duration = strtod(optarg, NULL); break;
		case 'S': o->sport = (uint16_t)strtoul(optarg, NULL, 10); break;
		case 'D': o->dport = (uint16_t)strtoul(optarg, NULL, 10); break;
		case 'i': o->ssid = (uint16_t)strtoul(optarg, NULL, 10); break;
		case 'w': o->drain = strtod(optarg, NULL); break;
		case 'k': o->tick_us = (unsigned)strtoul(optarg, NULL, 10); break;
		default: usage("unknown option");
		}
	}
	if (!have_src || !have_dst)
		usage("--src and --dst are required and must be IPv6 addresses");
	if (o->rate <= 0 || o->duration <= 0 || o->duration > 600)
		usage("--rate must be positive and --duration in (0, 600]");
	if (o->rate * o->duration > 4e9)
		usage("at most 2^32 packets per run");
	if (o->tick_us < 1)
		usage("--tick-us must be at least 1");
}

static int open_socket(const struct options *o)
{
	int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	int rcvbuf = 64 << 20, sndbuf = 4 << 20;
	struct sockaddr_in6 src = {.sin6_family = AF_INET6, .sin6_port = htons(o->sport),
				   .sin6_addr = o->src};
	struct sockaddr_in6 dst = {.sin6_family = AF_INET6, .sin6_port = htons(o->dport),
				   .sin6_addr = o->dst};

	if (fd < 0)
		die("socket");
	/* The generator must never be where replies are lost: FORCE ignores rmem_max (root). */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) < 0)
		die("SO_RCVBUFFORCE");
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)) < 0)
		die("SO_SNDBUFFORCE");
	if (bind(fd, (struct sockaddr *)&src, sizeof(src)) < 0)
		die("bind");
	if (connect(fd, (struct sockaddr *)&dst, sizeof(dst)) < 0)
		die("connect");
	return fd;
}

/* Drain the socket; return the number of datagrams read. */
static uint64_t receive(int fd, const struct options *o, struct counts *c)
{
	static uint8_t bufs[MAX_BATCH][RX_LEN];
	static struct iovec iovs[MAX_BATCH];
	static struct mmsghdr msgs[MAX_BATCH];
	uint64_t total = 0;

	for (;;) {
		for (unsigned i = 0; i < MAX_BATCH; i++) {
			iovs[i] = (struct iovec){.iov_base = bufs[i], .iov_len = RX_LEN};
			msgs[i].msg_hdr = (struct msghdr){.msg_iov = &iovs[i], .msg_iovlen = 1};
		}
		int n = recvmmsg(fd, msgs, MAX_BATCH, MSG_DONTWAIT, NULL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
			    errno == ECONNREFUSED)
				return total;
			die("recvmmsg");
		}
		if (n == 0)
			return total;
		uint64_t now = clock_ns(CLOCK_REALTIME);
		for (int i = 0; i < n; i++) {
			const uint8_t *p = bufs[i];
			uint32_t seq;

			total++;
			if (msgs[i].msg_len < STAMP_LEN || (uint16_t)(p[14] << 8 | p[15]) != o->ssid ||
			    (seq = get_u32(p + 24)) >= c->scheduled || seq >= c->seen_bits) {
				c->foreign++;
				continue;
			}
			if (c->seen[seq >> 3] & (1u << (seq & 7))) {
				c->duplicates++;
				continue;
			}
			c->seen[seq >> 3] |= (uint8_t)(1u << (seq & 7));
			c->received++;
			uint64_t t1 = unix_ns_from_ntp(get_u64(p + 28));
			uint64_t us = now > t1 ? (now - t1) / 1000 : 0;
			if (us > c->rtt_max_us)
				c->rtt_max_us = us;
			c->rtt[us < RTT_BUCKETS ? us : RTT_BUCKETS - 1]++;
		}
	}
}

static double rtt_percentile(const struct counts *c, double q)
{
	uint64_t want = (uint64_t)(q * (double)c->received), seen = 0;

	if (c->received == 0)
		return -1;
	for (unsigned i = 0; i < RTT_BUCKETS; i++) {
		seen += c->rtt[i];
		if (seen > want)
			return i;
	}
	return RTT_BUCKETS - 1;
}

int main(int argc, char **argv)
{
	static uint8_t pkts[MAX_BATCH][STAMP_LEN];
	static struct iovec iovs[MAX_BATCH];
	static struct mmsghdr msgs[MAX_BATCH];
	struct options o;
	struct counts c = {0};
	uint64_t sent = 0, errors = 0, resets = 0, wakeups = 0;

	parse_args(argc, argv, &o);
	int fd = open_socket(&o);
	c.seen_bits = (uint64_t)(o.rate * o.duration) + 65536; /* + schedule resets */
	c.seen = calloc(c.seen_bits / 8 + 1, 1);
	c.rtt = calloc(RTT_BUCKETS, sizeof(*c.rtt));
	if (!c.seen || !c.rtt)
		die("calloc");
	memset(pkts, 0, sizeof(pkts));
	for (unsigned i = 0; i < MAX_BATCH; i++) {
		put_u16(pkts[i] + 12, 1); /* Error Estimate: S=0 Z=0 (NTP), scale 0, multiplier 1 */
		put_u16(pkts[i] + 14, o.ssid);
		iovs[i] = (struct iovec){.iov_base = pkts[i], .iov_len = STAMP_LEN};
		msgs[i].msg_hdr = (struct msghdr){.msg_iov = &iovs[i], .msg_iovlen = 1};
	}
	/* The default 50 us timer slack would make every wake-up late by that much. */
	prctl(PR_SET_TIMERSLACK, 1UL);

	const double ns_per_packet = 1e9 / o.rate;
	const uint64_t tick_ns = (uint64_t)o.tick_us * 1000;
	const uint64_t max_lag = MAX_LAG_NS > 4 * tick_ns ? MAX_LAG_NS : 4 * tick_ns;
	const uint64_t start = clock_ns(CLOCK_MONOTONIC);
	const uint64_t end = start + (uint64_t)(o.duration * 1e9);
	uint64_t origin = start, origin_count = 0; /* moved forward when the schedule is reset */

	for (;;) {
		uint64_t now = clock_ns(CLOCK_MONOTONIC);
		if (now >= end)
			break;
		wakeups++;
		/* packets due by now: those scheduled at origin + k * ns_per_packet <= now */
		uint64_t due = origin_count + (uint64_t)((double)(now - origin) / ns_per_packet) + 1;
		if (due > c.scheduled + (uint64_t)((double)max_lag / ns_per_packet) + 1) {
			origin = now; /* fell behind (preempted): drop the debt instead of bursting */
			origin_count = c.scheduled;
			due = c.scheduled + 1;
			resets++;
		}
		while (c.scheduled < due) {
			unsigned n = due - c.scheduled > MAX_BATCH ? MAX_BATCH
								    : (unsigned)(due - c.scheduled);
			uint64_t t1 = ntp_from_unix_ns(clock_ns(CLOCK_REALTIME));
			for (unsigned i = 0; i < n; i++) {
				put_u32(pkts[i], (uint32_t)(c.scheduled + i));
				put_u64(pkts[i] + 4, t1);
			}
			int r = sendmmsg(fd, msgs, n, 0);
			if (r < 0) {
				if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR &&
				    errno != ECONNREFUSED)
					die("sendmmsg");
				r = 0;
			}
			sent += (unsigned)r;
			errors += n - (unsigned)r;
			c.scheduled += n;
		}
		receive(fd, &o, &c);
		uint64_t next = origin + (uint64_t)((double)(c.scheduled - origin_count) * ns_per_packet);
		uint64_t after = clock_ns(CLOCK_MONOTONIC) + tick_ns;
		if (next < after)
			next = after;
		sleep_until(next < end ? next : end);
	}
	double elapsed = (double)(clock_ns(CLOCK_MONOTONIC) - start) / 1e9;
	const uint64_t drain_end = clock_ns(CLOCK_MONOTONIC) + (uint64_t)(o.drain * 1e9);
	for (uint64_t now; (now = clock_ns(CLOCK_MONOTONIC)) < drain_end;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int timeout_ms = (int)((drain_end - now) / 1000000) + 1;

		if (poll(&pfd, 1, timeout_ms) > 0)
			receive(fd, &o, &c);
	}
	receive(fd, &o, &c);
	printf("{\"rate\": %.1f, \"duration_s\": %.3f, \"elapsed_s\": %.6f, \"sent\": %llu, "
	       "\"send_errors\": %llu, \"received\": %llu, \"duplicates\": %llu, \"foreign\": %llu, "
	       "\"schedule_resets\": %llu, \"wakeups\": %llu, \"rtt_p50_us\": %.0f, "
	       "\"rtt_p99_us\": %.0f, \"rtt_max_us\": %llu}\n",
	       o.rate, o.duration, elapsed, (unsigned long long)sent, (unsigned long long)errors,
	       (unsigned long long)c.received, (unsigned long long)c.duplicates,
	       (unsigned long long)c.foreign, (unsigned long long)resets,
	       (unsigned long long)wakeups, rtt_percentile(&c, 0.5), rtt_percentile(&c, 0.99),
	       (unsigned long long)c.rtt_max_us);
	close(fd);
	return 0;
}
