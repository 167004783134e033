// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * pktgen: a paced AF_PACKET generator of Ethernet frames for the forwarding benchmark
 * (bench/forwarding.py): one built-in IPv6/UDP frame sent again and again, or a set of
 * pre-built frames (--frames FILE) sent in round-robin order, so that the traffic spreads over
 * many destinations, policies or monitored flows.
 *
 * Why not trafgen or the kernel's pktgen: trafgen fails on veth here, and the kernel pktgen
 * needs a module the benchmark machine may not have. This is the smallest thing that offers a
 * fixed, known load: frames go out in sendmmsg() batches with PACKET_QDISC_BYPASS (no qdisc
 * work on the generator), on an absolute schedule of rate packets per second, so the load on
 * the router does not depend on how fast the generator could go.
 *
 * Usage: pktgen --ifname IF --rate PPS (--frames FILE | --dst-mac MAC --src IP6 --dst IP6)
 *               [--duration S] [--count N] [--batch N] [--sport N] [--dport N] [--size BYTES]
 * FILE holds whole Ethernet frames (source MAC included), each preceded by its length as 2
 * octets in network order. Frame k of the run is frame k mod (number of frames) of the file:
 * every sendmmsg() batch takes the next `batch` frames, wrapping around.
 * Prints one JSON line: packets sent, send errors, elapsed time, achieved rate, frames in the
 * set, octets sent, and how often the schedule was reset because the generator fell behind
 * (it never bursts to catch up by more than MAX_LAG_BATCHES batches, so a stall cannot flood
 * the router's backlog).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/ip6.h>
#include <netinet/udp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_BATCH 1024
#define MIN_FRAME (14 + 40 + 8)
#define MAX_FRAME 1514
#define MAX_LAG_BATCHES 4
#define MAX_FRAMES (1u << 20)

struct options {
	const char *ifname;
	const char *frames; /* file of length-prefixed frames; NULL: one built-in frame */
	uint8_t dst_mac[6];
	struct in6_addr src, dst;
	double rate;
	double duration;
	uint64_t count;
	unsigned batch;
	uint16_t sport, dport;
	unsigned size;
};

static void die(const char *what)
{
	fprintf(stderr, "pktgen: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void usage(const char *msg)
{
	fprintf(stderr,
		"pktgen: %s\nusage: pktgen --ifname IF --rate PPS "
		"(--frames FILE | --dst-mac MAC --src IP6 --dst IP6) "
		"[--duration S] [--count N] [--batch N] [--sport N] [--dport N] [--size BYTES]\n",
		msg);
	exit(2);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ULL),
			      .tv_nsec = (long)(ns % 1000000000ULL)};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static int parse_mac(const char *s, uint8_t mac[6])
{
	unsigned v[6];

	if (sscanf(s, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6)
		return -1;
	for (int i = 0; i < 6; i++) {
		if (v[i] > 0xff)
			return -1;
		mac[i] = (uint8_t)v[i];
	}
	return 0;
}

static void parse_args(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{"ifname", required_argument, NULL, 'i'}, {"dst-mac", required_argument, NULL, 'm'},
		{"src", required_argument, NULL, 's'},    {"dst", required_argument, NULL, 'd'},
		{"rate", required_argument, NULL, 'r'},   {"duration", required_argument, NULL, 't'},
		{"count", required_argument, NULL, 'c'},  {"batch", required_argument, NULL, 'b'},
		{"sport", required_argument, NULL, 'S'},  {"dport", required_argument, NULL, 'D'},
		{"size", required_argument, NULL, 'z'},   {"frames", required_argument, NULL, 'f'},
		{NULL, 0, NULL, 0},
	};
	int have_mac = 0, have_src = 0, have_dst = 0, opt;

	*o = (struct options){.batch = 64, .sport = 9000, .dport = 9000, .size = 78};
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case 'i': o->ifname = optarg; break;
		case 'm': have_mac = parse_mac(optarg, o->dst_mac) == 0; break;
		case 's': have_src = inet_pton(AF_INET6, optarg, &o->src) == 1; break;
		case 'd': have_dst = inet_pton(AF_INET6, optarg, &o->dst) == 1; break;
		case 'r': o->rate = strtod(optarg, NULL); break;
		case 't': o->duration = strtod(optarg, NULL); break;
		case 'c': o->count = strtoull(optarg, NULL, 10); break;
		case 'b': o->batch = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'S': o->sport = (uint16_t)strtoul(optarg, NULL, 10); break;
		case 'D': o->dport = (uint16_t)strtoul(optarg, NULL, 10); break;
		case 'z': o->size = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'f': o->frames = optarg; break;
		default: usage("unknown option");
		}
	}
	if (!o->ifname)
		usage("--ifname is required");
	if (!o->frames && (!have_mac || !have_src || !have_dst))
		usage("--dst-mac, --src and --dst (valid) are required without --frames");
	if (o->rate <= 0)
		usage("--rate must be positive");
	if (o->duration <= 0 && o->count == 0)
		usage("give --duration or --count");
	if (o->batch < 1 || o->batch > MAX_BATCH)
		usage("--batch must be 1..1024");
	if (o->size < MIN_FRAME || o->size > MAX_FRAME)
		usage("--size must be 62..1514");
}

static uint16_t fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

static uint32_t add_words(uint32_t sum, const uint8_t *p, size_t len)
{
	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (len & 1)
		sum += (uint32_t)(p[len - 1] << 8);
	return sum;
}

/* Ethernet + IPv6 + UDP with a valid checksum (the sink drops the frames, but a router on the
 * way or a capture should see nothing odd about them). */
static size_t build_frame(const struct options *o, const uint8_t src_mac[6], uint8_t *frame)
{
	struct ether_header *eth = (struct ether_header *)frame;
	struct ip6_hdr *ip6 = (struct ip6_hdr *)(eth + 1);
	struct udphdr *udp = (struct udphdr *)(ip6 + 1);
	uint8_t *payload = (uint8_t *)(udp + 1);
	size_t l4len = o->size - sizeof(*eth) - sizeof(*ip6);

	memset(frame, 0, o->size);
	memcpy(eth->ether_dhost, o->dst_mac, 6);
	memcpy(eth->ether_shost, src_mac, 6);
	eth->ether_type = htons(ETHERTYPE_IPV6);
	ip6->ip6_flow = htonl(6u << 28);
	ip6->ip6_plen = htons((uint16_t)l4len);
	ip6->ip6_nxt = IPPROTO_UDP;
	ip6->ip6_hlim = 64;
	ip6->ip6_src = o->src;
	ip6->ip6_dst = o->dst;
	udp->uh_sport = htons(o->sport);
	udp->uh_dport = htons(o->dport);
	udp->uh_ulen = htons((uint16_t)l4len);
	for (size_t i = 0; i < l4len - sizeof(*udp); i++)
		payload[i] = (uint8_t)i;

	uint32_t sum = add_words(0, (const uint8_t *)&ip6->ip6_src, 32);
	sum += (uint32_t)l4len + IPPROTO_UDP;
	sum = add_words(sum, (const uint8_t *)udp, l4len);
	uint16_t csum = (uint16_t)~fold(sum);
	udp->uh_sum = htons(csum ? csum : 0xffff);
	return o->size;
}

static int open_socket(const char *ifname, uint8_t src_mac[6])
{
	int fd = socket(AF_PACKET, SOCK_RAW, 0); /* protocol 0: this socket receives nothing */
	int one = 1;
	struct ifreq ifr = {0};
	struct sockaddr_ll sll = {.sll_family = AF_PACKET};

	if (fd < 0)
		die("socket(AF_PACKET)");
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0)
		die(ifname);
	memcpy(src_mac, ifr.ifr_hwaddr.sa_data, 6);
	sll.sll_ifindex = (int)if_nametoindex(ifname);
	if (sll.sll_ifindex == 0)
		die(ifname);
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)) < 0)
		die("bind");
	if (setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one)) < 0)
		die("PACKET_QDISC_BYPASS");
	return fd;
}

/* The frames of a --frames file, read into one buffer; exits on a malformed file. */
static size_t load_frames(const char *path, struct iovec **out)
{
	FILE *f = fopen(path, "rb");
	struct iovec *iov = NULL;
	size_t n = 0, cap = 0, at = 0;
	long size;
	uint8_t *buf;

	if (!f || fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
		die(path);
	buf = malloc((size_t)size + 1);
	if (!buf)
		die("malloc");
	if (fread(buf, 1, (size_t)size, f) != (size_t)size)
		die(path);
	fclose(f);
	while (at + 2 <= (size_t)size) {
		size_t len = (size_t)buf[at] << 8 | buf[at + 1];

		if (len < 14 || len > MAX_FRAME || at + 2 + len > (size_t)size || n == MAX_FRAMES) {
			fprintf(stderr,
				"pktgen: %s: frame %zu: length %zu not in 14..%d, truncated, "
				"or over %u frames\n",
				path, n, len, MAX_FRAME, MAX_FRAMES);
			exit(2);
		}
		if (n == cap) {
			cap = cap ? 2 * cap : 1024;
			iov = realloc(iov, cap * sizeof(*iov));
			if (!iov)
				die("realloc");
		}
		iov[n++] = (struct iovec){.iov_base = buf + at + 2, .iov_len = len};
		at += 2 + len;
	}
	if (n == 0 || at != (size_t)size) {
		fprintf(stderr, "pktgen: %s holds no frame, or a stray octet at its end\n", path);
		exit(2);
	}
	*out = iov;
	return n;
}

int main(int argc, char **argv)
{
	static uint8_t frame[MAX_FRAME];
	static struct iovec single;
	struct iovec *iov = &single;
	struct mmsghdr *msgs;
	struct options o;
	uint8_t src_mac[6];
	uint64_t sent = 0, scheduled = 0, errors = 0, resets = 0, bytes = 0;
	size_t nframes = 1, next = 0;

	parse_args(argc, argv, &o);
	int fd = open_socket(o.ifname, src_mac);
	if (o.frames) {
		nframes = load_frames(o.frames, &iov);
	} else {
		single.iov_base = frame;
		single.iov_len = build_frame(&o, src_mac, frame);
	}
	/* msgs[k] sends frame k mod nframes; a batch is the `n` messages from msgs[next], and the
	 * extra `batch` messages at the end let it run past the last frame without a copy. */
	msgs = calloc(nframes + o.batch, sizeof(*msgs));
	if (!msgs)
		die("calloc");
	for (size_t k = 0; k < nframes + o.batch; k++)
		msgs[k].msg_hdr = (struct msghdr){.msg_iov = &iov[k % nframes], .msg_iovlen = 1};
	/* The default 50 us timer slack would make every wake-up late by that much. */
	prctl(PR_SET_TIMERSLACK, 1UL);

	const double ns_per_packet = 1e9 / o.rate;
	const uint64_t max_lag_ns = (uint64_t)(MAX_LAG_BATCHES * o.batch * ns_per_packet);
	const uint64_t start = now_ns();
	const uint64_t end = o.duration > 0 ? start + (uint64_t)(o.duration * 1e9) : UINT64_MAX;
	uint64_t origin = start; /* moved forward when the schedule is reset */

	for (;;) {
		uint64_t due = origin + (uint64_t)((double)scheduled * ns_per_packet);
		if (due >= end || (o.count && sent + errors >= o.count))
			break;
		uint64_t now = now_ns();
		if (now < due) {
			sleep_until(due);
		} else if (now - due > max_lag_ns) {
			origin = now; /* fell behind (preempted): drop the debt instead of bursting */
			scheduled = 0;
			resets++;
		}
		unsigned n = o.batch;
		if (o.count && o.count - sent - errors < n)
			n = (unsigned)(o.count - sent - errors);
		int r = sendmmsg(fd, &msgs[next], n, 0);
		if (r < 0) {
			if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR)
				die("sendmmsg");
			errors += n;
		} else {
			sent += (unsigned)r;
			errors += n - (unsigned)r;
			for (int k = 0; k < r; k++)
				bytes += msgs[next + (size_t)k].msg_len;
		}
		scheduled += n;
		next = (next + n) % nframes; /* frames not taken are skipped, like their schedule */
	}
	double elapsed = (double)(now_ns() - start) / 1e9;
	printf("{\"sent\": %llu, \"errors\": %llu, \"schedule_resets\": %llu, \"elapsed_s\": %.6f, "
	       "\"rate_pps\": %.1f, \"batch\": %u, \"frames\": %zu, \"bytes\": %llu}\n",
	       (unsigned long long)sent, (unsigned long long)errors, (unsigned long long)resets,
	       elapsed, (double)sent / elapsed, o.batch, nframes, (unsigned long long)bytes);
	close(fd);
	return 0;
}
