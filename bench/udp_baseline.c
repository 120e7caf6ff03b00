// SPDX-License-Identifier: GPL-2.0
/*
 * udp_baseline: how many bytes per second the link between the two bench VMs
 * moves as UDP datagrams of one size (make bench uses the size of a RoCE
 * packet: BTH + path-MTU payload + ICRC), with the per-datagram system-call
 * cost batched away (sendmmsg/recvmmsg, 64 datagrams per call).  Like
 * RoCEv2's, the datagrams go with UDP checksum 0; unlike a RoCE device's,
 * the payload is copied to and from user space and has no ICRC.  So it is a
 * baseline of a socket program, not a ceiling for a kernel transport (rroce
 * moved more at MTU 9000: Documentation/benchmarks.md).
 *
 *   udp_baseline sink PORT [TIMEOUT_S]
 *   udp_baseline flood HOST PORT LEN SECONDS
 *
 * The sink answers the flood's hello, counts the data datagrams that reach
 * it and, at the flood's end marker, sends back what it received.  The
 * flood sends hellos until the sink answers (so it can start first), sends
 * for SECONDS as fast as its socket takes datagrams, then end markers until
 * the sink's report comes, and prints one line:
 *   udp_baseline: len L sent S received R bytes B seconds T MiBps M
 * where T runs from the first to the last data datagram the sink received.
 * Exit 0 with a report, 1 otherwise.
 *
 *   udp_baseline echo PORT [TIMEOUT_S]
 *   udp_baseline pingpong HOST PORT LEN ITERS
 *
 * The latency of the same link: pingpong sends one LEN-byte datagram, waits
 * for echo to send it back, and so on ITERS times (after 20 not counted, to
 * warm up), both ends busy-polling their socket (recv with MSG_DONTWAIT), as
 * perftest's ib_write_lat busy-polls its buffer and CQ.  It prints
 *   udp_baseline: pingpong len L iters N rtt_p50_us A rtt_p99_us B
 * (round trips, CLOCK_MONOTONIC); half a round trip is what ib_write_lat and
 * ib_send_lat report.  A datagram not answered within a second is sent again
 * and the line ends with "lost K".  One datagram each way against the RDMA
 * ping-pong's four (each WRITE is ACKed), and a recv system call per poll:
 * a reference for the link and the socket stack, not a bound.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { HELLO = 1, DATA = 2, END = 3, REPORT = 4, PING = 5 };
#define MAGIC 0x75646263u /* "udbc" */
#define BATCH 64
#define MAXLEN 65000

struct hdr {
	uint32_t magic;
	uint32_t type;
};

struct report {
	struct hdr h;
	uint64_t datagrams, bytes, nsecs;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void rcv_timeout(int fd, double s)
{
	struct timeval tv = { .tv_sec = (time_t)s, .tv_usec = (suseconds_t)((s - (time_t)s) * 1e6) };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static void big_buffers(int fd)
{
	int sz = 8 << 20;

	/* FORCE variants ignore net.core.[rw]mem_max (the bench runs as root) */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
}

static int sink(int port, double timeout)
{
	static char buf[BATCH][MAXLEN];
	struct mmsghdr m[BATCH];
	struct iovec iov[BATCH];
	struct sockaddr_storage from[BATCH];
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct report r = { .h = { MAGIC, REPORT } };
	double end = now() + timeout, first = 0, last = 0, reported = 0;
	int fd = socket(AF_INET, SOCK_DGRAM, 0), i, n;

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a))) {
		perror("udp_baseline sink: socket/bind");
		return 1;
	}
	big_buffers(fd);
	rcv_timeout(fd, 0.5);
	for (;;) {
		double t = now();

		if (t > end || (reported && t - reported > 2))
			break;
		for (i = 0; i < BATCH; i++) {
			iov[i] = (struct iovec){ buf[i], MAXLEN };
			m[i].msg_hdr = (struct msghdr){ .msg_name = &from[i], .msg_namelen = sizeof(from[i]),
							.msg_iov = &iov[i], .msg_iovlen = 1 };
		}
		n = recvmmsg(fd, m, BATCH, MSG_WAITFORONE, NULL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			perror("udp_baseline sink: recvmmsg");
			return 1;
		}
		t = now();
		for (i = 0; i < n; i++) {
			struct hdr *h = (struct hdr *)buf[i];

			if (m[i].msg_len < sizeof(*h) || h->magic != MAGIC)
				continue;
			if (h->type == DATA) {
				if (!first)
					first = t;
				last = t;
				r.datagrams++;
				r.bytes += m[i].msg_len;
			} else if (h->type == HELLO || h->type == END) {
				struct hdr hello = { MAGIC, HELLO };
				void *p = h->type == HELLO ? (void *)&hello : (void *)&r;
				size_t len = h->type == HELLO ? sizeof(hello) : sizeof(r);

				r.nsecs = (uint64_t)((last - first) * 1e9);
				sendto(fd, p, len, 0, (struct sockaddr *)&from[i], m[i].msg_hdr.msg_namelen);
				if (h->type == END)
					reported = t;
			}
		}
	}
	close(fd);
	if (!reported) {
		fprintf(stderr, "udp_baseline sink: no end marker within %.0f s (%llu datagrams)\n", timeout,
			(unsigned long long)r.datagrams);
		return 1;
	}
	printf("udp_baseline sink: received %llu datagrams, %llu bytes\n", (unsigned long long)r.datagrams,
	       (unsigned long long)r.bytes);
	return 0;
}

/* send one control datagram every 0.1 s until one of type WANT comes back */
static int ask(int fd, int type, int want, void *reply, size_t len, double timeout)
{
	struct hdr h = { MAGIC, type };
	double end = now() + timeout;
	struct hdr *got = reply;

	rcv_timeout(fd, 0.1);
	while (now() < end) {
		ssize_t n;

		send(fd, &h, sizeof(h), 0);
		do {
			n = recv(fd, reply, len, 0);
			if (n >= (ssize_t)sizeof(*got) && got->magic == MAGIC && got->type == (uint32_t)want)
				return 0;
		} while (n >= 0);
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			usleep(100000); /* refused at once: the sink is not there yet */
	}
	return -1;
}

/* A UDP socket connected to HOST:PORT once the server there answered a
 * hello (it may start later: bench/pair.sh runs it in the other guest), with
 * UDP checksum 0 as RoCEv2 sends (the ICRC covers the payload): no software
 * checksum on either end, as for rroce and rdma_rxe.  -1 on failure. */
static int connect_peer(const char *who, const char *host, int port)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_DGRAM }, *ai;
	struct report r;
	char ps[16];
	int fd;

	snprintf(ps, sizeof(ps), "%d", port);
	if (getaddrinfo(host, ps, &hints, &ai)) {
		fprintf(stderr, "udp_baseline: cannot resolve %s\n", host);
		return -1;
	}
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen)) {
		fprintf(stderr, "udp_baseline %s: socket/connect: %s\n", who, strerror(errno));
		freeaddrinfo(ai);
		return -1;
	}
	freeaddrinfo(ai);
	big_buffers(fd);
	if (setsockopt(fd, SOL_SOCKET, SO_NO_CHECK, &(int){ 1 }, sizeof(int)))
		fprintf(stderr, "udp_baseline %s: SO_NO_CHECK: %s\n", who, strerror(errno));
	if (ask(fd, HELLO, HELLO, &r, sizeof(r), 60)) {
		fprintf(stderr, "udp_baseline %s: unable to connect to server (no answer)\n", who);
		close(fd);
		return -1;
	}
	return fd;
}

static int flood(const char *host, int port, int len, double secs)
{
	static char buf[MAXLEN];
	struct mmsghdr m[BATCH];
	struct iovec iov = { buf, (size_t)len };
	struct hdr *h = (struct hdr *)buf;
	struct report r;
	unsigned long long sent = 0;
	double end;
	int fd, i;

	if (len < (int)sizeof(struct report) || len > MAXLEN) {
		fprintf(stderr, "udp_baseline: LEN %d not in %zu..%d\n", len, sizeof(struct report), MAXLEN);
		return 1;
	}
	fd = connect_peer("flood", host, port);
	if (fd < 0)
		return 1;
	*h = (struct hdr){ MAGIC, DATA };
	for (i = 0; i < BATCH; i++)
		m[i].msg_hdr = (struct msghdr){ .msg_iov = &iov, .msg_iovlen = 1 };
	end = now() + secs;
	while (now() < end) {
		int n = sendmmsg(fd, m, BATCH, 0);

		if (n > 0)
			sent += n;
		else if (errno != ENOBUFS && errno != EAGAIN && errno != ECONNREFUSED && errno != EINTR) {
			perror("udp_baseline flood: sendmmsg");
			return 1;
		}
	}
	if (ask(fd, END, REPORT, &r, sizeof(r), 10)) {
		fprintf(stderr, "udp_baseline flood: no report from the sink\n");
		return 1;
	}
	if (!r.nsecs) {
		fprintf(stderr, "udp_baseline flood: the sink received %llu datagrams\n",
			(unsigned long long)r.datagrams);
		return 1;
	}
	printf("udp_baseline: len %d sent %llu received %llu bytes %llu seconds %.3f MiBps %.2f\n", len, sent,
	       (unsigned long long)r.datagrams, (unsigned long long)r.bytes, r.nsecs / 1e9,
	       r.bytes / (r.nsecs / 1e9) / (1 << 20));
	return 0;
}

/* answer each PING with itself until an END (or TIMEOUT), busy-polling */
static int echo(int port, double timeout)
{
	static char buf[MAXLEN];
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	double end = now() + timeout;
	unsigned long long pings = 0;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a))) {
		perror("udp_baseline echo: socket/bind");
		return 1;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_NO_CHECK, &(int){ 1 }, sizeof(int)))
		perror("udp_baseline echo: SO_NO_CHECK");
	for (unsigned long spins = 0;; spins++) {
		struct sockaddr_storage from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
		struct hdr *h = (struct hdr *)buf;

		if (n < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
				perror("udp_baseline echo: recvfrom");
				return 1;
			}
			if (!(spins & 0xfff) && now() > end)
				break;
			continue;
		}
		if (n < (ssize_t)sizeof(*h) || h->magic != MAGIC)
			continue;
		if (h->type == HELLO || h->type == PING) {
			pings += h->type == PING;
			sendto(fd, buf, n, 0, (struct sockaddr *)&from, fl);
		} else if (h->type == END) {
			struct hdr r = { MAGIC, REPORT };

			sendto(fd, &r, sizeof(r), 0, (struct sockaddr *)&from, fl);
			printf("udp_baseline echo: answered %llu pings\n", pings);
			close(fd);
			return 0;
		}
	}
	close(fd);
	fprintf(stderr, "udp_baseline echo: no end marker within %.0f s (%llu pings)\n", timeout, pings);
	return 1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* the p-th percentile (0..100) of N sorted values, nearest rank */
static double percentile(const double *v, int n, double p)
{
	int i = (int)(p / 100 * n + 0.999999) - 1;

	return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static int pingpong(const char *host, int port, int len, int iters)
{
	enum { WARMUP = 20 };
	static char buf[MAXLEN], rbuf[MAXLEN];
	struct ping { struct hdr h; uint64_t seq; } *p = (struct ping *)buf, *q = (struct ping *)rbuf;
	unsigned long long lost = 0;
	struct report r;
	double *rtt;
	int fd, i;

	if (len < (int)sizeof(*p) || len > MAXLEN || iters < 1) {
		fprintf(stderr, "udp_baseline: LEN %d not in %zu..%d or ITERS %d < 1\n", len, sizeof(*p), MAXLEN,
			iters);
		return 1;
	}
	rtt = calloc(iters, sizeof(*rtt));
	if (!rtt) {
		fprintf(stderr, "udp_baseline pingpong: no memory for %d round trips\n", iters);
		return 1;
	}
	fd = connect_peer("pingpong", host, port);
	if (fd < 0)
		return 1;
	p->h = (struct hdr){ MAGIC, PING };
	for (i = -WARMUP; i < iters; i++) {
		double t0 = now(), sent = t0, t;

		p->seq = (uint64_t)(i + WARMUP);
		send(fd, buf, len, 0);
		for (;;) {
			ssize_t n = recv(fd, rbuf, sizeof(rbuf), MSG_DONTWAIT);

			t = now();
			if (n >= (ssize_t)sizeof(*q) && q->h.magic == MAGIC && q->h.type == PING && q->seq == p->seq)
				break;
			if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
			    errno != ECONNREFUSED) {
				perror("udp_baseline pingpong: recv");
				return 1;
			}
			if (t - sent > 1) { /* lost (or refused): again */
				if (t - t0 > 30) {
					fprintf(stderr, "udp_baseline pingpong: no answer to ping %d in 30 s\n", i);
					return 1;
				}
				lost++;
				send(fd, buf, len, 0);
				sent = t;
			}
		}
		if (i >= 0)
			rtt[i] = (t - t0) * 1e6;
	}
	if (ask(fd, END, REPORT, &r, sizeof(r), 10))
		fprintf(stderr, "udp_baseline pingpong: the echo did not confirm the end\n");
	qsort(rtt, iters, sizeof(*rtt), cmp_double);
	printf("udp_baseline: pingpong len %d iters %d rtt_p50_us %.2f rtt_p99_us %.2f", len, iters,
	       percentile(rtt, iters, 50), percentile(rtt, iters, 99));
	if (lost)
		printf(" lost %llu", lost);
	printf("\n");
	free(rtt);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "sink"))
		return sink(atoi(argv[2]), argc > 3 ? atof(argv[3]) : 120);
	if (argc == 6 && !strcmp(argv[1], "flood"))
		return flood(argv[2], atoi(argv[3]), atoi(argv[4]), atof(argv[5]));
	if (argc >= 3 && !strcmp(argv[1], "echo"))
		return echo(atoi(argv[2]), argc > 3 ? atof(argv[3]) : 120);
	if (argc == 6 && !strcmp(argv[1], "pingpong"))
		return pingpong(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
	fprintf(stderr, "usage: udp_baseline sink PORT [TIMEOUT_S] | flood HOST PORT LEN SECONDS\n"
			"       udp_baseline echo PORT [TIMEOUT_S] | pingpong HOST PORT LEN ITERS\n");
	return 2;
}
