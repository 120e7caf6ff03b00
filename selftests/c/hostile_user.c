// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * hostile_user: a user-space program that attacks rroce through the real
 * provider and the raw uverbs interface, one attack class per CASE:
 *
 *   hostile_user DEV GID_INDEX CASE        (CASE: see the table in main())
 *
 * It creates its objects with libibverbs (so the provider maps the rings),
 * finds the mapped rings in /proc/self/maps (entries of
 * /dev/infiniband/uverbsN, told apart by the wr_ids the provider wrote into
 * them), then writes garbage into them behind the provider's back and rings
 * the doorbell itself (a zero-WR IB_USER_VERBS_CMD_POST_SEND write(), what
 * the provider does).  Every case asserts what the right outcome is (an error
 * completion with a given status, the QP in ERR, an errno, an async event,
 * memory left untouched) and ends by proving that the device still moves
 * data correctly for a fresh QP pair.  Output is TAP-like lines
 * ("ok N - ..." / "not ok N - ... # detail", "# diagnostics"), exit 1 if a
 * check failed.  QP pairs are loopback pairs on DEV (both ends on DEV).
 *
 * Built by selftests/rdma/hostile_user.sh and limits.sh (cc ... -libverbs).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_ioctl_cmds.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ reporting */
static int g_n, g_failed;
static double g_scale = 1.0;
static int g_debug; /* debug kernel: fewer iterations */
static int g_to = 14; /* local ACK timeout exponent (18 on the debug kernel) */
static int g_pair_depth = 16; /* send and receive queue depth of pair_create's QPs */

static void check(int ok, const char *desc, const char *fmt, ...)
{
	char detail[512] = "";
	va_list ap;

	if (fmt) {
		va_start(ap, fmt);
		vsnprintf(detail, sizeof(detail), fmt, ap);
		va_end(ap);
	}
	g_n++;
	if (!ok)
		g_failed++;
	printf("%s %d - %s%s%s\n", ok ? "ok" : "not ok", g_n, desc, !ok && detail[0] ? " # " : "",
	       !ok ? detail : "");
	fflush(stdout);
}

static void diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void msleep(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static const char *st(int s)
{
	return ibv_wc_status_str((enum ibv_wc_status)s);
}

static const char *qps(int s)
{
	static const char *n[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };

	return s >= 0 && s < 7 ? n[s] : "?";
}

static uint64_t rnd64(void)
{
	return ((uint64_t)random() << 33) ^ ((uint64_t)random() << 11) ^ (uint64_t)random();
}

static void fill_random(volatile uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)random();
}

static void pattern(uint8_t *p, size_t n, int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 7 + seed + (i >> 12));
}

/* p[0..n) still holds what pattern(p - off, ..., seed) wrote there */
static int pattern_ok_at(const uint8_t *p, size_t off, size_t n, int seed)
{
	for (size_t i = off; i < off + n; i++)
		if (p[i - off] != (uint8_t)(i * 7 + seed + (i >> 12)))
			return 0;
	return 1;
}

static int pattern_ok(const uint8_t *p, size_t n, int seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (uint8_t)(i * 7 + seed + (i >> 12)))
			return 0;
	return 1;
}

/* --------------------------------------------------------------- device */
struct dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_device_attr attr;
	union ibv_gid gid;
	int gidx;
	enum ibv_mtu mtu;
	const char *name;
};

static int dev_open(struct dev *d, const char *name, int gidx)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_port_attr pa;

	memset(d, 0, sizeof(*d));
	d->name = name;
	d->gidx = gidx;
	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			d->ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	if (!d->ctx) {
		diag("cannot open %s: %s", name, strerror(errno));
		return -1;
	}
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd || ibv_query_device(d->ctx, &d->attr) || ibv_query_port(d->ctx, 1, &pa) ||
	    ibv_query_gid(d->ctx, 1, gidx, &d->gid)) {
		diag("cannot set up %s: %s", name, strerror(errno));
		return -1;
	}
	d->mtu = pa.active_mtu;
	return 0;
}

static void dev_close(struct dev *d)
{
	if (d->pd)
		ibv_dealloc_pd(d->pd);
	if (d->ctx)
		ibv_close_device(d->ctx);
	memset(d, 0, sizeof(*d));
}

/* ---------------------------------------------------------- ring finding */
struct map {
	uintptr_t start, end;
	unsigned long long off; /* file offset (the mmap key) */
};

#define MAXMAPS 512
static int maps_read(struct map *m)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	if (!f)
		return 0;
	while (n < MAXMAPS && fgets(line, sizeof(line), f)) {
		unsigned long s, e;
		unsigned long long off;

		if (!strstr(line, "/dev/infiniband/uverbs"))
			continue;
		if (sscanf(line, "%lx-%lx %*s %llx", &s, &e, &off) == 3)
			m[n++] = (struct map){ s, e, off };
	}
	fclose(f);
	return n;
}

/* maps present now but not in before[0..nb) */
static int maps_new(const struct map *before, int nb, struct map *out, int max)
{
	struct map cur[MAXMAPS];
	int nc = maps_read(cur), n = 0;

	for (int i = 0; i < nc && n < max; i++) {
		int seen = 0;

		for (int j = 0; j < nb; j++)
			seen |= before[j].start == cur[i].start;
		if (!seen)
			out[n++] = cur[i];
	}
	return n;
}

struct ring {
	volatile uint8_t *base;
	size_t len;
	uint32_t entries, es;
};

#define RING_HDR 128
static volatile uint32_t *ring_p(struct ring *r)
{
	return (volatile uint32_t *)r->base;
}

static volatile uint32_t *ring_c(struct ring *r)
{
	return (volatile uint32_t *)(r->base + 64);
}

static volatile uint8_t *ring_slot(struct ring *r, uint32_t i)
{
	return r->base + RING_HDR + (size_t)(i & (r->entries - 1)) * r->es;
}

static void ring_publish(struct ring *r, uint32_t p)
{
	__atomic_store_n((uint32_t *)ring_p(r), p, __ATOMIC_RELEASE);
}

static long find_u64(const struct map *m, uint64_t v)
{
	for (uintptr_t a = m->start; a + 8 <= m->end; a += 8)
		if (*(volatile uint64_t *)a == v)
			return (long)(a - m->start);
	return -1;
}

/*
 * Locate the ring among maps[0..n) that holds the two entries with wr_ids
 * m1 and m2 written at ring indices p-2 and p-1 (p = the published producer
 * index); entries from the QP/SRQ capabilities.  0 on success.
 */
static int ring_locate(struct ring *r, const struct map *maps, int n, uint64_t m1, uint64_t m2, uint32_t entries)
{
	for (int i = 0; i < n; i++) {
		long o1 = find_u64(&maps[i], m1), o2 = find_u64(&maps[i], m2);

		if (o1 < 0 || o2 <= o1)
			continue;
		r->base = (volatile uint8_t *)maps[i].start;
		r->len = maps[i].end - maps[i].start;
		r->es = (uint32_t)(o2 - o1);
		r->entries = entries;
		uint32_t p = *ring_p(r);
		if ((long)(RING_HDR + (size_t)((p - 2) & (entries - 1)) * r->es) != o1) {
			diag("ring at %#lx: entry size %u, %u entries, p %u does not match offset %ld",
			     (unsigned long)maps[i].start, r->es, entries, p, o1);
			return -1;
		}
		return 0;
	}
	return -1;
}

/* --------------------------------------------------------- raw uverbs */
static int raw_write(int fd, void *buf, size_t len)
{
	ssize_t n = write(fd, buf, len);

	if (n == (ssize_t)len)
		return 0;
	return n < 0 ? errno : EIO;
}

/* The doorbell: a zero-WR POST_SEND on qp_handle (what the provider does). */
static int raw_doorbell(int fd, uint32_t qp_handle, uint32_t wr_count, uint32_t wqe_size, uint16_t in_words)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_post_send cmd;
		uint8_t wrs[256];
	} c;
	struct ib_uverbs_post_send_resp resp = { 0 };

	memset(&c, 0, sizeof(c));
	c.hdr.command = IB_USER_VERBS_CMD_POST_SEND;
	c.hdr.in_words = in_words ? in_words : (sizeof(c.hdr) + sizeof(c.cmd)) / 4;
	c.hdr.out_words = sizeof(resp) / 4;
	c.cmd.response = (uintptr_t)&resp;
	c.cmd.qp_handle = qp_handle;
	c.cmd.wr_count = wr_count;
	c.cmd.wqe_size = wqe_size;
	return raw_write(fd, &c, c.hdr.in_words * 4u);
}

static int doorbell(struct ibv_qp *qp)
{
	return raw_doorbell(qp->context->cmd_fd, qp->handle, 0, sizeof(struct ib_uverbs_send_wr), 0);
}

/* ------------------------------------------------------------ QP pairs */
#define ALL_ACCESS                                                                                          \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

struct pair {
	struct dev *d;
	struct ibv_cq *cqa, *cqb;
	struct ibv_qp *a, *b;
	struct ibv_srq *srq;
	struct ibv_mr *mra, *mrb;
	uint8_t *bufa, *bufb;
	size_t size;       /* registered bytes of each buffer */
	struct ring sq;    /* a's SQ */
	struct ring rq;    /* b's RQ or the SRQ */
	struct map amaps[4], bmaps[4];
	int namaps, nbmaps;
};

static int qp_to_rts(struct dev *d, struct ibv_qp *qp, uint32_t dqpn, int retry_cnt, int timeout, int rnr_retry)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = ALL_ACCESS;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return errno;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = d->mtu;
	a.dest_qp_num = dqpn;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 16;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = d->gid;
	a.ah_attr.grh.sgid_index = d->gidx;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return errno;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = timeout;
	a.retry_cnt = retry_cnt;
	a.rnr_retry = rnr_retry;
	a.sq_psn = 0;
	a.max_rd_atomic = 16;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				  IBV_QP_MAX_QP_RD_ATOMIC))
		return errno;
	return 0;
}

static int qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		return -1;
	return a.qp_state;
}

/* Wait until qp is in state s (or secs pass); the state it ended in. */
static int wait_state(struct ibv_qp *qp, int s, double secs)
{
	double end = now_s() + secs * g_scale;
	int cur;

	while ((cur = qp_state(qp)) != s && now_s() < end)
		msleep(10);
	return cur;
}

/* Poll up to n completions within secs; returns how many. */
static int poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int n, double secs)
{
	double end = now_s() + secs * g_scale;
	int got = 0;

	while (got < n) {
		int r = ibv_poll_cq(cq, n - got, wc + got);

		if (r < 0)
			return got;
		got += r;
		if (got < n) {
			if (now_s() > end)
				break;
			if (!r)
				usleep(200);
		}
	}
	return got;
}

static struct ibv_qp *mkqp(struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_srq *srq, enum ibv_qp_type t, int wr)
{
	struct ibv_qp_init_attr ia;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.srq = srq;
	ia.qp_type = t;
	ia.cap.max_send_wr = wr;
	ia.cap.max_recv_wr = srq ? 0 : wr;
	ia.cap.max_send_sge = 2;
	ia.cap.max_recv_sge = srq ? 0 : 2;
	return ibv_create_qp(pd, &ia);
}

/* A signaled send WR of opcode op with the one SGE sge. */
static void wr_init(struct ibv_send_wr *wr, struct ibv_sge *sge, uint64_t wr_id, enum ibv_wr_opcode op)
{
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = wr_id;
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->opcode = op;
	wr->send_flags = IBV_SEND_SIGNALED;
}

static int post_write(struct ibv_qp *qp, uint64_t wr_id, void *laddr, uint32_t len, uint32_t lkey, void *raddr,
		      uint32_t rkey, enum ibv_wr_opcode op)
{
	struct ibv_sge sge = { (uintptr_t)laddr, len, lkey };
	struct ibv_send_wr wr, *bad;

	wr_init(&wr, &sge, wr_id, op);
	wr.wr.rdma.remote_addr = (uintptr_t)raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

static int post_recv(struct pair *p, uint64_t wr_id, void *addr, uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = { (uintptr_t)addr, len, lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (p->srq)
		return ibv_post_srq_recv(p->srq, &wr, &bad);
	return ibv_post_recv(p->b, &wr, &bad);
}

static void pair_destroy(struct pair *p)
{
	if (p->a)
		ibv_destroy_qp(p->a);
	if (p->b)
		ibv_destroy_qp(p->b);
	if (p->srq)
		ibv_destroy_srq(p->srq);
	if (p->cqa)
		ibv_destroy_cq(p->cqa);
	if (p->cqb)
		ibv_destroy_cq(p->cqb);
	if (p->mra)
		ibv_dereg_mr(p->mra);
	if (p->mrb)
		ibv_dereg_mr(p->mrb);
	free(p->bufa);
	free(p->bufb);
	memset(p, 0, sizeof(*p));
}

/*
 * A connected RC pair a -> b on one device with buffers of 2*size bytes of
 * which the first `size` are registered (the rest is our memory outside any
 * MR, to check nothing lands there).  locate: also find a's SQ and b's
 * RQ/SRQ ring (posts two WRITEs and two receives, all consumed/completed
 * or left posted: b has 2 receives posted on return when locate is set).
 */
static int pair_create(struct pair *p, struct dev *d, size_t size, int use_srq, int retry_cnt, int timeout,
		       int rnr_retry, int locate)
{
	struct map before[MAXMAPS];
	int nb;

	memset(p, 0, sizeof(*p));
	p->d = d;
	p->size = size;
	if (posix_memalign((void **)&p->bufa, 4096, 2 * size) || posix_memalign((void **)&p->bufb, 4096, 2 * size))
		return -1;
	memset(p->bufa, 0, 2 * size);
	memset(p->bufb, 0, 2 * size);
	p->mra = ibv_reg_mr(d->pd, p->bufa, size, ALL_ACCESS);
	p->mrb = ibv_reg_mr(d->pd, p->bufb, size, ALL_ACCESS);
	p->cqa = ibv_create_cq(d->ctx, 64, NULL, NULL, 0);
	p->cqb = ibv_create_cq(d->ctx, 64, NULL, NULL, 0);
	if (!p->mra || !p->mrb || !p->cqa || !p->cqb)
		goto fail;
	nb = maps_read(before);
	p->a = mkqp(d->pd, p->cqa, NULL, IBV_QPT_RC, g_pair_depth);
	if (!p->a)
		goto fail;
	p->namaps = maps_new(before, nb, p->amaps, 4);
	nb = maps_read(before);
	if (use_srq) {
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 2 } };

		p->srq = ibv_create_srq(d->pd, &sa);
		if (!p->srq)
			goto fail;
	}
	p->nbmaps = maps_new(before, nb, p->bmaps, 4);
	p->b = mkqp(d->pd, p->cqb, p->srq, IBV_QPT_RC, g_pair_depth);
	if (!p->b)
		goto fail;
	if (!use_srq)
		p->nbmaps = maps_new(before, nb, p->bmaps, 4);
	if (qp_to_rts(d, p->a, p->b->qp_num, retry_cnt, timeout, rnr_retry) ||
	    qp_to_rts(d, p->b, p->a->qp_num, retry_cnt, timeout, rnr_retry))
		goto fail;
	if (locate) {
		uint64_t m1 = 0x5a5a000000000001ull ^ rnd64() << 8, m2 = m1 ^ 0x0101000000000000ull;
		struct ibv_wc wc[2];
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr ia;
		uint32_t rq_entries;

		if (post_write(p->a, m1, p->bufa, 8, p->mra->lkey, p->bufb, p->mrb->rkey, IBV_WR_RDMA_WRITE) ||
		    post_write(p->a, m2, p->bufa, 8, p->mra->lkey, p->bufb, p->mrb->rkey, IBV_WR_RDMA_WRITE) ||
		    poll_n(p->cqa, wc, 2, 10) != 2 || wc[0].status || wc[1].status) {
			diag("the two locating WRITEs failed");
			goto fail;
		}
		ibv_query_qp(p->a, &qa, IBV_QP_CAP, &ia);
		if (ring_locate(&p->sq, p->amaps, p->namaps, m1, m2, qa.cap.max_send_wr)) {
			diag("a's SQ ring not found among %d new mappings", p->namaps);
			goto fail;
		}
		if (post_recv(p, m1 + 2, p->bufb, 64, p->mrb->lkey) || post_recv(p, m2 + 2, p->bufb, 64, p->mrb->lkey))
			goto fail;
		if (use_srq) {
			struct ibv_srq_attr sa;

			ibv_query_srq(p->srq, &sa);
			rq_entries = sa.max_wr;
		} else {
			ibv_query_qp(p->b, &qa, IBV_QP_CAP, &ia);
			rq_entries = qa.cap.max_recv_wr;
		}
		/* round up to the ring's power of two */
		while (rq_entries & (rq_entries - 1))
			rq_entries++;
		if (ring_locate(&p->rq, p->bmaps, p->nbmaps, m1 + 2, m2 + 2, rq_entries)) {
			diag("b's %s ring not found among %d new mappings", use_srq ? "SRQ" : "RQ", p->nbmaps);
			goto fail;
		}
	}
	return 0;
fail:
	diag("pair_create: %s", strerror(errno));
	pair_destroy(p);
	return -1;
}

/*
 * The device still works: a fresh pair moves 256 KiB (64 KiB on the debug
 * kernel) by SEND, RDMA WRITE and RDMA READ, every byte checked.
 */
static void device_still_works_n(struct dev *d, const char *after, size_t n)
{
	struct pair p;
	struct ibv_wc wc[4];
	char desc[256];
	int ok = 0, got = 0;

	snprintf(desc, sizeof(desc), "after %s: a fresh QP pair moves %zu KiB by SEND, WRITE and READ intact", after,
		 n >> 10);
	if (pair_create(&p, d, 4 * n, 0, 7, g_to, 7, 0)) {
		check(0, desc, "cannot create the pair");
		return;
	}
	pattern(p.bufa, n, 1);
	pattern(p.bufa + n, n, 2);
	pattern(p.bufb + 2 * n, n, 3);
	if (post_recv(&p, 10, p.bufb, n, p.mrb->lkey) ||
	    post_write(p.a, 1, p.bufa, n, p.mra->lkey, NULL, 0, IBV_WR_SEND) ||
	    post_write(p.a, 2, p.bufa + n, n, p.mra->lkey, p.bufb + n, p.mrb->rkey, IBV_WR_RDMA_WRITE) ||
	    post_write(p.a, 3, p.bufa + 2 * n, n, p.mra->lkey, p.bufb + 2 * n, p.mrb->rkey, IBV_WR_RDMA_READ)) {
		check(0, desc, "post failed: %s", strerror(errno));
		pair_destroy(&p);
		return;
	}
	got = poll_n(p.cqa, wc, 3, 30);
	got += poll_n(p.cqb, wc + 3, 1, 30);
	ok = got == 4;
	for (int i = 0; ok && i < 4; i++)
		ok = wc[i].status == IBV_WC_SUCCESS && wc[i].wr_id == (uint64_t)(i < 3 ? i + 1 : 10);
	if (ok)
		ok = pattern_ok(p.bufb, n, 1) && pattern_ok(p.bufb + n, n, 2) && pattern_ok(p.bufa + 2 * n, n, 3);
	check(ok, desc, "%d completions (first status %s), data %s", got, got ? st(wc[0].status) : "-",
	      ok ? "ok" : "checked only if all succeeded");
	pair_destroy(&p);
}

static void device_still_works(struct dev *d, const char *after)
{
	device_still_works_n(d, after, g_debug ? 65536 : 262144);
}

/* Everything that completes on cq within secs; fails the check if one is
 * a success with a wr_id in bogus[0..nb). Returns the count. */
static int drain(struct ibv_cq *cq, struct ibv_wc *wc, int max, double secs)
{
	return poll_n(cq, wc, max, secs);
}

/* ------------------------------------------------------- send WQE format */
struct swqe {
	uint64_t wr_id;
	uint8_t opcode, flags;
	uint16_t num_sge;
	uint32_t inline_len, imm, rkey;
	uint64_t raddr, cmp, swap;
	uint32_t rqpn, rqkey, ah, rsvd;
	struct {
		uint64_t addr;
		uint32_t len, lkey;
	} sge[2];
};

static void wqe_put(struct ring *r, uint32_t idx, const void *w, size_t n)
{
	volatile uint8_t *s = ring_slot(r, idx);

	for (size_t i = 0; i < n && i < r->es; i++)
		s[i] = ((const uint8_t *)w)[i];
}

/* ============================================================ the cases */

/*
 * Garbage send WQEs written straight into the SQ ring, published and rung
 * with a raw doorbell.  Decoding failures complete with LOC_QP_OP_ERR,
 * bad local memory with LOC_PROT_ERR, a remote key of another PD with
 * REM_ACCESS_ERR; the QP goes to ERR; the responder's memory and the
 * memory next to the MRs stay untouched.
 */
static void case_sq_garbage(struct dev *d)
{
	struct dev other;
	struct ibv_pd *pd2 = ibv_alloc_pd(d->ctx);
	uint8_t *buf2 = aligned_alloc(4096, 8192);
	struct ibv_mr *mr2 = pd2 && buf2 ? ibv_reg_mr(pd2, buf2, 8192, ALL_ACCESS) : NULL;
	enum { RANDOM, BAD_OPCODE, HUGE_NUM_SGE, HUGE_SGE_LEN, BAD_FLAGS, HUGE_INLINE, RESERVED, OUTSIDE_MR,
	       KERNEL_ADDR, OTHER_PD_LKEY, ZERO_LKEY, OTHER_PD_RKEY, NVARIANTS };
	static const char *names[] = {
		"random bytes",          "opcode 0xee",       "num_sge 0xffff",          "two SGEs of 4 GiB - 1",
		"unknown flag bits 0xf0", "inline_len 2^31-1", "non-zero reserved bytes", "SGE past the end of its MR",
		"SGE at a kernel address", "lkey of another PD", "lkey 0",               "rkey of an MR in another PD",
	};

	(void)other;
	if (!mr2) {
		check(0, "set up a second PD with an MR", "%s", strerror(errno));
		return;
	}
	for (int v = 0; v < NVARIANTS; v++) {
		struct pair p;
		struct swqe w;
		struct ibv_wc wc[8];
		char desc[256];
		uint64_t id = 0xbad0000000000000ull | (uint64_t)v;
		int want, n, ok;
		uint32_t pi;

		if (pair_create(&p, d, 65536, 0, 2, g_to, 1, 1)) {
			check(0, names[v], "cannot create the pair");
			continue;
		}
		/* drain the two locating receives' space: none posted on a */
		pattern(p.bufb, 2 * p.size, 0x11);
		pattern(p.bufa + p.size, p.size, 0x22);
		memset(&w, 0, sizeof(w));
		w.wr_id = id;
		w.opcode = IBV_WR_RDMA_WRITE;
		w.flags = IBV_SEND_SIGNALED;
		w.num_sge = 1;
		w.rkey = p.mrb->rkey;
		w.raddr = (uintptr_t)p.bufb;
		w.sge[0].addr = (uintptr_t)p.bufa;
		w.sge[0].len = 4096;
		w.sge[0].lkey = p.mra->lkey;
		want = IBV_WC_LOC_QP_OP_ERR;
		switch (v) {
		case RANDOM:
			break;
		case BAD_OPCODE:
			w.opcode = 0xee;
			break;
		case HUGE_NUM_SGE:
			w.num_sge = 0xffff;
			break;
		case HUGE_SGE_LEN:
			w.num_sge = 2;
			w.sge[0].len = w.sge[1].len = 0xffffffffu;
			w.sge[1].lkey = p.mra->lkey;
			break;
		case BAD_FLAGS:
			w.flags |= 0xf0;
			break;
		case HUGE_INLINE:
			w.flags |= IBV_SEND_INLINE;
			w.num_sge = 0;
			w.inline_len = 0x7fffffff;
			break;
		case RESERVED:
			w.rsvd = 0xdeadbeef;
			break;
		case OUTSIDE_MR:
			w.sge[0].addr = (uintptr_t)p.bufa + p.size - 2048;
			want = IBV_WC_LOC_PROT_ERR;
			break;
		case KERNEL_ADDR:
			w.sge[0].addr = 0xffff888000000000ull;
			want = IBV_WC_LOC_PROT_ERR;
			break;
		case OTHER_PD_LKEY:
			w.sge[0].addr = (uintptr_t)buf2;
			w.sge[0].lkey = mr2->lkey;
			want = IBV_WC_LOC_PROT_ERR;
			break;
		case ZERO_LKEY:
			w.sge[0].lkey = 0;
			want = IBV_WC_LOC_PROT_ERR;
			break;
		case OTHER_PD_RKEY:
			w.raddr = (uintptr_t)buf2;
			w.rkey = mr2->rkey;
			want = IBV_WC_REM_ACCESS_ERR;
			break;
		}
		memset(buf2, 0x5c, 8192);
		pi = *ring_p(&p.sq);
		if (v == RANDOM) {
			fill_random(ring_slot(&p.sq, pi), p.sq.es);
			wqe_put(&p.sq, pi, &id, 8);
		} else {
			wqe_put(&p.sq, pi, &w, sizeof(w));
		}
		ring_publish(&p.sq, pi + 1);
		int db = doorbell(p.a);
		n = drain(p.cqa, wc, 1, 10);
		snprintf(desc, sizeof(desc), "SQ WQE with %s: completes with %s (wr_id kept), QP in ERR", names[v],
			 st(want));
		ok = n == 1 && wc[0].wr_id == id && (int)wc[0].status == want;
		if (v == RANDOM) /* random opcode bytes could decode as anything but success */
			ok = n == 1 && wc[0].wr_id == id && wc[0].status != IBV_WC_SUCCESS;
		int s = wait_state(p.a, IBV_QPS_ERR, 5);
		check(ok && s == IBV_QPS_ERR, desc, "doorbell %d, %d completion(s): wr_id %#" PRIx64 " %s; QP %s", db, n,
		      n ? wc[0].wr_id : 0, n ? st(wc[0].status) : "-", qps(s));
		n = drain(p.cqb, wc, 8, 0.3);
		int bad = 0;

		for (int i = 0; i < n; i++)
			bad += wc[i].status == IBV_WC_SUCCESS;
		/* The target range of a failed WRITE is undefined (packets
		 * before the failing one may have landed): the rest must not
		 * change. */
		check(pattern_ok_at(p.bufb + 4096, 4096, 2 * p.size - 4096, 0x11) &&
			      pattern_ok(p.bufa + p.size, p.size, 0x22) && buf2[0] == 0x5c && buf2[8191] == 0x5c && !bad,
		      "  ... nothing written outside the WRITE's target range (responder, other PD's MR, next to the MRs)",
		      "%d b completions (%d successful)", n, bad);
		pair_destroy(&p);
	}
	ibv_dereg_mr(mr2);
	ibv_dealloc_pd(pd2);
	free(buf2);
	device_still_works(d, "garbage send WQEs");
}

/*
 * Wild SQ producer indices (beyond the ring, backwards, +2^31) and a
 * scribbled SQ consumer index: the kernel must treat the ring as broken
 * (QP to ERR, nothing completes successfully) or ignore its own index.
 */
static void case_sq_index(struct dev *d)
{
	static const char *names[] = { "beyond the ring (c + entries + 1)", "backwards (p - 1)", "jump by 2^31",
				       "0xffffffff" };

	for (int v = 0; v < 4; v++) {
		struct pair p;
		struct ibv_wc wc[16];
		char desc[256];

		if (pair_create(&p, d, 65536, 0, 2, g_to, 1, 1)) {
			check(0, names[v], "cannot create the pair");
			continue;
		}
		uint32_t pi = *ring_p(&p.sq), c = *ring_c(&p.sq), np = 0;

		switch (v) {
		case 0:
			np = c + p.sq.entries + 1;
			break;
		case 1:
			np = pi - 1;
			break;
		case 2:
			np = pi + 0x80000000u;
			break;
		case 3:
			np = 0xffffffffu;
			break;
		}
		/* fill every slot with plausible WQEs, so a kernel reading
		 * beyond p would find work */
		for (uint32_t i = 0; i < p.sq.entries; i++) {
			struct swqe w = { .wr_id = 0x1d0 + i, .opcode = IBV_WR_RDMA_WRITE, .flags = IBV_SEND_SIGNALED,
					  .num_sge = 1, .rkey = p.mrb->rkey, .raddr = (uintptr_t)p.bufb };

			w.sge[0].addr = (uintptr_t)p.bufa;
			w.sge[0].len = 64;
			w.sge[0].lkey = p.mra->lkey;
			wqe_put(&p.sq, pi + i, &w, sizeof(w));
		}
		if (v == 3 && np - c <= p.sq.entries)
			np = c + p.sq.entries + 7;
		ring_publish(&p.sq, np);
		int db = doorbell(p.a);
		int s = wait_state(p.a, IBV_QPS_ERR, 5);
		int n = drain(p.cqa, wc, 16, 0.5), good = 0;

		for (int i = 0; i < n; i++)
			good += wc[i].status == IBV_WC_SUCCESS;
		snprintf(desc, sizeof(desc), "SQ producer index %s (p %u -> %u, c %u): QP in ERR, nothing succeeds",
			 names[v], pi, np, c);
		check(s == IBV_QPS_ERR && !good, desc, "doorbell %d, QP %s, %d completions, %d successful", db, qps(s), n,
		      good);
		pair_destroy(&p);
	}
	/* The SQ consumer index belongs to the kernel: a scribble on it is
	 * ignored by the kernel; the provider refuses to post on a ring whose
	 * consumer index makes no sense, or posts and the WR completes. */
	{
		struct pair p;
		struct ibv_wc wc[2];

		if (pair_create(&p, d, 65536, 0, 2, g_to, 1, 1) == 0) {
			*ring_c(&p.sq) += 0x40000000u;
			pattern(p.bufa, 4096, 9);
			int r = post_write(p.a, 0x77, p.bufa, 4096, p.mra->lkey, p.bufb + 4096, p.mrb->rkey,
					   IBV_WR_RDMA_WRITE);
			int n = r ? 0 : poll_n(p.cqa, wc, 1, 10);

			check((r != 0) || (n == 1 && wc[0].status == IBV_WC_SUCCESS && pattern_ok(p.bufb + 4096, 4096, 9)),
			      "SQ consumer index scribbled (+2^30): the post fails with an errno or the WRITE completes intact",
			      "post %d, %d completions, status %s", r, n, n ? st(wc[0].status) : "-");
			diag("post after the consumer-index scribble: %s", r ? strerror(r) : "accepted");
			pair_destroy(&p);
		}
	}
	device_still_works(d, "wild SQ indices");
}

/*
 * Garbage receive WQEs (RQ or SRQ) and wild RQ/SRQ producer indices; a
 * 4 KiB SEND then arrives.  The receive must complete with an error (its
 * wr_id kept; a WQE that does not decode is a zero-length buffer), or for a
 * broken ring the receiving QP goes to ERR; the sender's SEND fails, and no
 * byte lands outside the responder's MR.
 */
static void case_rq(struct dev *d, int use_srq)
{
	static const char *names[] = {
		"random bytes", "num_sge 0xffff", "SGE past the end of its MR", "SGE at a kernel address",
		"lkey of another PD", "SGE length 4 GiB - 1", "non-zero reserved bytes",
		"producer index beyond the ring", "producer index backwards", "producer index + 2^31",
	};
	const char *what = use_srq ? "SRQ" : "RQ";
	struct ibv_pd *pd2 = ibv_alloc_pd(d->ctx);
	uint8_t *buf2 = aligned_alloc(4096, 8192);
	struct ibv_mr *mr2 = pd2 && buf2 ? ibv_reg_mr(pd2, buf2, 8192, ALL_ACCESS) : NULL;

	if (!mr2) {
		check(0, "set up a second PD with an MR", "%s", strerror(errno));
		return;
	}
	for (int v = 0; v < 10; v++) {
		struct pair p;
		struct ibv_wc wc[16], wa[4];
		char desc[256];
		uint64_t id = 0xbadbad0000000000ull | (uint64_t)v;
		int broken = v >= 7;

		/* rnr_retry 0: the sender gives up at the first RNR NAK */
		if (pair_create(&p, d, 65536, use_srq, 2, g_to, 0, 1)) {
			check(0, names[v], "cannot create the pair");
			continue;
		}
		/* consume the two locating receives with two small SENDs */
		struct ibv_wc w2[2];

		post_write(p.a, 0x11, p.bufa, 16, p.mra->lkey, NULL, 0, IBV_WR_SEND);
		post_write(p.a, 0x12, p.bufa, 16, p.mra->lkey, NULL, 0, IBV_WR_SEND);
		if (poll_n(p.cqa, w2, 2, 10) != 2 || poll_n(p.cqb, w2, 2, 10) != 2) {
			check(0, names[v], "the locating receives did not complete");
			pair_destroy(&p);
			continue;
		}
		pattern(p.bufb, 2 * p.size, 0x31);
		memset(buf2, 0x5c, 8192);
		uint32_t pi = *ring_p(&p.rq), c = *ring_c(&p.rq), np = pi + 1;
		struct {
			uint64_t wr_id;
			uint16_t num_sge;
			uint8_t rsvd[6];
			struct {
				uint64_t addr;
				uint32_t len, lkey;
			} sge[2];
		} r;

		memset(&r, 0, sizeof(r));
		r.wr_id = id;
		r.num_sge = 1;
		r.sge[0].addr = (uintptr_t)p.bufb;
		r.sge[0].len = 8192;
		r.sge[0].lkey = p.mrb->lkey;
		switch (v) {
		case 0:
			break;
		case 1:
			r.num_sge = 0xffff;
			break;
		case 2:
			r.sge[0].addr = (uintptr_t)p.bufb + p.size - 1024;
			break;
		case 3:
			r.sge[0].addr = 0xffff888000000000ull;
			break;
		case 4:
			r.sge[0].addr = (uintptr_t)buf2;
			r.sge[0].lkey = mr2->lkey;
			break;
		case 5:
			r.sge[0].len = 0xffffffffu;
			break;
		case 6:
			r.rsvd[3] = 0x42;
			break;
		case 7:
			np = c + p.rq.entries + 1;
			break;
		case 8:
			np = pi - 1;
			break;
		case 9:
			np = pi + 0x80000000u;
			break;
		}
		if (v == 0) {
			fill_random(ring_slot(&p.rq, pi), p.rq.es);
			wqe_put(&p.rq, pi, &id, 8);
		} else if (!broken) {
			wqe_put(&p.rq, pi, &r, sizeof(r));
		} else {
			/* valid receives in every slot: a kernel trusting the
			 * index would find some */
			for (uint32_t i = 0; i < p.rq.entries; i++) {
				r.wr_id = 0x2d0 + i;
				wqe_put(&p.rq, pi + i, &r, sizeof(r));
			}
		}
		ring_publish(&p.rq, np);
		pattern(p.bufa, 4096, 0x44);
		post_write(p.a, 0x99, p.bufa, 4096, p.mra->lkey, NULL, 0, IBV_WR_SEND);
		int na = poll_n(p.cqa, wa, 1, 20);
		int sb = wait_state(p.b, IBV_QPS_ERR, broken ? 5 : 2);
		int nb = drain(p.cqb, wc, 16, 0.5), good = 0, mine = -1;

		for (int i = 0; i < nb; i++) {
			good += wc[i].status == IBV_WC_SUCCESS;
			if (wc[i].wr_id == id)
				mine = wc[i].status;
		}
		if (!broken) {
			snprintf(desc, sizeof(desc),
				 "%s WQE with %s: the receive completes with an error, receiving QP in ERR, SEND fails", what,
				 names[v]);
			check(mine > 0 && !good && sb == IBV_QPS_ERR && na == 1 && wa[0].status != IBV_WC_SUCCESS, desc,
			      "receive %s, %d b completions (%d ok), b %s; SEND: %s", mine < 0 ? "missing" : st(mine), nb,
			      good, qps(sb), na ? st(wa[0].status) : "no completion");
		} else {
			snprintf(desc, sizeof(desc), "%s %s (p %u -> %u, c %u): receiving QP in ERR, no receive succeeds, SEND fails",
				 what, names[v], pi, np, c);
			check(!good && sb == IBV_QPS_ERR && na == 1 && wa[0].status != IBV_WC_SUCCESS, desc,
			      "%d b completions (%d ok), b %s; SEND: %s", nb, good, qps(sb),
			      na ? st(wa[0].status) : "no completion");
		}
		diag("  %s: SEND %s, receive side: %d completions, first %s", names[v],
		     na ? st(wa[0].status) : "-", nb, nb ? st(wc[0].status) : "-");
		check(pattern_ok_at(p.bufb + p.size, p.size, p.size, 0x31) && buf2[0] == 0x5c && buf2[8191] == 0x5c,
		      "  ... nothing written next to the responder's MR or into the other PD's MR", NULL);
		pair_destroy(&p);
	}
	ibv_dereg_mr(mr2);
	ibv_dealloc_pd(pd2);
	free(buf2);
	device_still_works(d, use_srq ? "garbage SRQ WQEs and indices" : "garbage RQ WQEs and indices");
}

static int async_event(struct ibv_context *ctx, double secs, enum ibv_event_type *type)
{
	struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;
	int fl = fcntl(ctx->async_fd, F_GETFL);

	fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
	if (poll(&pfd, 1, (int)(secs * g_scale * 1000)) <= 0)
		return -1;
	if (ibv_get_async_event(ctx, &ev))
		return -1;
	*type = ev.event_type;
	ibv_ack_async_event(&ev);
	return 0;
}

/*
 * The CQ consumer index belongs to the provider, which keeps its own copy
 * and only publishes it; the kernel reads it only when its cached view says
 * the ring is full.  After one polled CQE, a scribbled consumer index
 * (beyond the producer index, backwards, +2^31) and `entries` more CQEs
 * (which fit in a ring whose consumer is at the real index): the kernel
 * must find the index invalid when it looks, drop the CQE and raise
 * IBV_EVENT_CQ_ERR; the transfers themselves still land.  Control: without
 * the scribble the same CQEs all arrive and no event comes.
 */
static void case_cq_index(struct dev *d)
{
	static const char *names[] = { "beyond the producer index", "backwards", "+ 2^31", "untouched (control)" };

	for (int v = 0; v < 4; v++) {
		struct map before[MAXMAPS], m[2];
		int nb = maps_read(before);
		struct ibv_cq *cq = ibv_create_cq(d->ctx, 16, NULL, NULL, 0);
		int nm = maps_new(before, nb, m, 2);
		struct pair p;
		struct ibv_wc wc[64];
		enum ibv_event_type ev = 0;
		char desc[256];
		struct ibv_qp *q = NULL, *peer = NULL;

		if (!cq || nm != 1 || pair_create(&p, d, 65536, 0, 7, g_to, 7, 0)) {
			check(0, names[v], "cannot create the CQ (%d new mappings) or the pair", nm);
			if (cq)
				ibv_destroy_cq(cq);
			continue;
		}
		struct ring r = { (volatile uint8_t *)m[0].start, m[0].end - m[0].start, (uint32_t)cq->cqe, 64 };
		int e = cq->cqe;

		/* a QP whose send CQ is the attacked one, SQ deeper than the CQ */
		q = mkqp(d->pd, cq, NULL, IBV_QPT_RC, 2 * e);
		peer = mkqp(d->pd, p.cqb, NULL, IBV_QPT_RC, 8);
		if (!q || !peer || qp_to_rts(d, q, peer->qp_num, 7, g_to, 7) || qp_to_rts(d, peer, q->qp_num, 7, g_to, 7)) {
			check(0, names[v], "cannot connect the QP on the attacked CQ");
			goto next;
		}
		/* one good completion first, so the indices moved */
		post_write(q, 1, p.bufa, 64, p.mra->lkey, p.bufb, p.mrb->rkey, IBV_WR_RDMA_WRITE);
		if (poll_n(cq, wc, 1, 10) != 1 || wc[0].status) {
			check(0, names[v], "first WRITE did not complete");
			goto next;
		}
		uint32_t prod = *ring_p(&r), cons = *ring_c(&r), nc = cons;

		if (v < 3) {
			/* (beyond even the producer index of when the kernel
			 * reads it: a value that has become plausible by then
			 * is indistinguishable from a real one) */
			nc = v == 0 ? prod + 2 * e : v == 1 ? cons - 3 : cons + 0x80000000u;
			__atomic_store_n((uint32_t *)ring_c(&r), nc, __ATOMIC_RELEASE);
		}
		pattern(p.bufa, 65536, 0x55);
		for (int i = 0; i < e; i++)
			post_write(q, 10 + i, p.bufa + 1024 * i, 1024, p.mra->lkey, p.bufb + 1024 * i, p.mrb->rkey,
				   IBV_WR_RDMA_WRITE);
		int got_ev = async_event(d->ctx, v < 3 ? 10 : 2, &ev) == 0;

		msleep(100);
		/* the WRITEs themselves went through */
		int data = pattern_ok(p.bufb, 1024 * e, 0x55);

		if (v < 3) {
			snprintf(desc, sizeof(desc),
				 "CQ consumer index %s (c %u -> %u, p %u), %d CQEs: IBV_EVENT_CQ_ERR, the WRITEs still land",
				 names[v], cons, nc, prod, e);
			check(got_ev && ev == IBV_EVENT_CQ_ERR && data, desc, "event %s, data %s",
			      got_ev ? ibv_event_type_str(ev) : "none", data ? "ok" : "missing");
			/* polling the broken CQ does not crash; whatever it
			 * returns is one of ours */
			int n = ibv_poll_cq(cq, 64, wc), ours = 1;

			for (int i = 0; i < n; i++)
				ours &= wc[i].wr_id >= 10 && wc[i].wr_id < 10 + (uint64_t)e;
			diag("  poll on the broken CQ: %d", n);
			check(n <= e && ours, "  ... polling the broken CQ returns nothing bogus", "poll %d", n);
		} else {
			int n = poll_n(cq, wc, e, 10), ok = n == e;

			for (int i = 0; ok && i < n; i++)
				ok = wc[i].status == IBV_WC_SUCCESS && wc[i].wr_id == 10 + (uint64_t)i;
			snprintf(desc, sizeof(desc), "control: with the index untouched the %d CQEs all arrive, no event", e);
			check(!got_ev && ok && data, desc, "event %s, %d CQEs, data %s",
			      got_ev ? ibv_event_type_str(ev) : "none", n, data ? "ok" : "missing");
		}
next:
		if (q)
			ibv_destroy_qp(q);
		if (peer)
			ibv_destroy_qp(peer);
		pair_destroy(&p);
		check(ibv_destroy_cq(cq) == 0, "  ... the CQ can be destroyed", "%s", strerror(errno));
	}
	device_still_works(d, "wild CQ consumer indices");
}

/* Garbage UD WQEs: bad AH numbers, a Q_Key/QPN beyond 24 bits, RDMA opcodes. */
static void case_ud(struct dev *d)
{
	static const char *names[] = { "AH number 0xdeadbeef", "AH number 0", "remote QPN 0x1000000",
				       "opcode RDMA_WRITE on UD", "random bytes" };

	for (int v = 0; v < 5; v++) {
		struct ibv_cq *cq = ibv_create_cq(d->ctx, 16, NULL, NULL, 0);
		struct map before[MAXMAPS], m[4];
		int nb = maps_read(before);
		struct ibv_qp *q = cq ? mkqp(d->pd, cq, NULL, IBV_QPT_UD, 8) : NULL;
		int nm = maps_new(before, nb, m, 4);
		uint8_t *buf = aligned_alloc(4096, 4096);
		struct ibv_mr *mr = ibv_reg_mr(d->pd, buf, 4096, ALL_ACCESS);
		struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
					  .grh = { .dgid = d->gid, .sgid_index = d->gidx, .hop_limit = 64 } };
		struct ibv_ah *ah = ibv_create_ah(d->pd, &aa);
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x11111111 };
		struct ibv_wc wc[4];
		char desc[200];

		if (!q || !mr || !ah || ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)) {
			check(0, names[v], "UD setup failed: %s", strerror(errno));
			goto out;
		}
		a.qp_state = IBV_QPS_RTR;
		ibv_modify_qp(q, &a, IBV_QP_STATE);
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = 0;
		ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
		/* locate the SQ: two real UD SENDs to ourselves (QPN of q) */
		uint64_t m1 = 0x7e7e000000000001ull, m2 = 0x7e7e000000000002ull;
		struct ibv_sge sge = { (uintptr_t)buf, 8, mr->lkey };
		struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED },
				   *bad;
		struct ring r;
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr ia;

		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = 0xffffff;
		wr.wr.ud.remote_qkey = 0x11111111;
		wr.wr_id = m1;
		ibv_post_send(q, &wr, &bad);
		wr.wr_id = m2;
		ibv_post_send(q, &wr, &bad);
		if (poll_n(cq, wc, 2, 10) != 2) {
			check(0, names[v], "the locating UD SENDs did not complete");
			goto out;
		}
		ibv_query_qp(q, &qa, IBV_QP_CAP, &ia);
		if (ring_locate(&r, m, nm, m1, m2, qa.cap.max_send_wr)) {
			check(0, names[v], "UD SQ ring not found");
			goto out;
		}
		struct swqe w = { .wr_id = 0xbadd0 + v, .opcode = IBV_WR_SEND, .flags = IBV_SEND_SIGNALED,
				  .num_sge = 1, .rqpn = 0xffffff, .rqkey = 0x11111111, .ah = 0xdeadbeef };
		uint32_t pi = *ring_p(&r);

		w.sge[0].addr = (uintptr_t)buf;
		w.sge[0].len = 8;
		w.sge[0].lkey = mr->lkey;
		if (v == 1)
			w.ah = 0;
		if (v == 2) {
			/* a real AH number: read it back from the slot the
			 * provider wrote for the locating SEND */
			uint32_t real_ah;

			memcpy(&real_ah, (const void *)(ring_slot(&r, pi - 1) + 56), 4);
			w.ah = real_ah;
			w.rqpn = 0x1000000;
		}
		if (v == 3)
			w.opcode = IBV_WR_RDMA_WRITE;
		if (v == 4) {
			fill_random(ring_slot(&r, pi), r.es);
			wqe_put(&r, pi, &w.wr_id, 8);
		} else {
			wqe_put(&r, pi, &w, sizeof(w));
		}
		ring_publish(&r, pi + 1);
		int db = doorbell(q);
		int n = poll_n(cq, wc, 1, 10);
		/* a UD send error stops the send queue only: SQE, not ERR */
		int s = wait_state(q, IBV_QPS_SQE, 5);

		snprintf(desc, sizeof(desc), "UD WQE with %s: error completion (wr_id kept), QP in SQE", names[v]);
		check(n == 1 && wc[0].wr_id == w.wr_id && wc[0].status != IBV_WC_SUCCESS && s == IBV_QPS_SQE, desc,
		      "doorbell %d, %d completions (%s), QP %s", db, n, n ? st(wc[0].status) : "-", qps(s));
		diag("  %s: %s", names[v], n ? st(wc[0].status) : "-");
out:
		if (ah)
			ibv_destroy_ah(ah);
		if (q)
			ibv_destroy_qp(q);
		if (mr)
			ibv_dereg_mr(mr);
		if (cq)
			ibv_destroy_cq(cq);
		free(buf);
	}
	device_still_works(d, "garbage UD WQEs");
}

/*
 * Raw uverbs commands with garbage: write() with bogus commands, lengths,
 * handles and counts, the driver's create commands with non-zero flags,
 * ioctl() with bogus objects, methods, attributes and lengths, mmap() of
 * offsets that are not ours.  All must fail with an errno (nothing is
 * created), and the context stays usable.
 */
static void case_uverbs(struct dev *d)
{
	int fd = d->ctx->cmd_fd, r;
	struct pair p;
	char desc[200];

	if (pair_create(&p, d, 65536, 0, 7, g_to, 7, 0)) {
		check(0, "uverbs: set up a pair", NULL);
		return;
	}
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		uint8_t body[512];
	} c;

	/* unknown commands, bad lengths */
	uint32_t cmds[] = { 0, 200, 0x7fffffff, IB_USER_VERBS_CMD_THRESHOLD, 0x80000000u | 0x7f };

	for (unsigned i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		memset(&c, 0, sizeof(c));
		c.hdr.command = cmds[i];
		c.hdr.in_words = 4;
		r = raw_write(fd, &c, 16);
		snprintf(desc, sizeof(desc), "write() of command %#x fails", cmds[i]);
		check(r != 0, desc, "succeeded");
	}
	memset(&c, 0, sizeof(c));
	c.hdr.command = IB_USER_VERBS_CMD_POST_SEND;
	c.hdr.in_words = 0xffff;
	check(raw_write(fd, &c, sizeof(c)) != 0, "POST_SEND with in_words 0xffff (longer than the write) fails", NULL);
	check(raw_write(fd, &c, 3) != 0, "a 3-byte write() fails", NULL);
	/* doorbells with bogus handles, counts and sizes */
	uint32_t handles[] = { p.a->handle + 1000, 0xffffffffu, p.cqa->handle, p.mra->handle };

	for (unsigned i = 0; i < 4; i++) {
		r = raw_doorbell(fd, handles[i], 0, sizeof(struct ib_uverbs_send_wr), 0);
		snprintf(desc, sizeof(desc), "doorbell on handle %u (not a QP of ours) fails", handles[i]);
		check(r != 0, desc, "succeeded");
	}
	r = raw_doorbell(fd, p.a->handle, 0x40000000, sizeof(struct ib_uverbs_send_wr), 0);
	check(r != 0, "POST_SEND with wr_count 2^30 and no WRs fails", "succeeded");
	r = raw_doorbell(fd, p.a->handle, 0, 4, 0);
	check(r != 0, "POST_SEND with wqe_size 4 fails", "succeeded");
	r = raw_doorbell(fd, p.a->handle, 1, 0xffffff, 0);
	check(r != 0, "POST_SEND with one WR of wqe_size 16 MiB fails", "succeeded");
	/* one legacy WR with garbage through the kernel's POST_SEND path */
	{
		struct {
			struct ib_uverbs_cmd_hdr hdr;
			struct ib_uverbs_post_send cmd;
			struct ib_uverbs_send_wr wr;
			struct ib_uverbs_sge sge;
		} ps;
		struct ib_uverbs_post_send_resp resp;

		memset(&ps, 0, sizeof(ps));
		ps.hdr.command = IB_USER_VERBS_CMD_POST_SEND;
		ps.hdr.in_words = sizeof(ps) / 4;
		ps.hdr.out_words = sizeof(resp) / 4;
		ps.cmd.response = (uintptr_t)&resp;
		ps.cmd.qp_handle = p.a->handle;
		ps.cmd.wr_count = 1;
		ps.cmd.sge_count = 1;
		ps.cmd.wqe_size = sizeof(ps.wr);
		ps.wr.wr_id = 0xfeed;
		ps.wr.num_sge = 0x7fffffff;
		ps.wr.opcode = 0xff;
		r = raw_write(fd, &ps, sizeof(ps));
		check(r != 0, "POST_SEND of a legacy WR with num_sge 2^31-1 and opcode 0xff fails", "succeeded");
		ps.wr.num_sge = 1;
		ps.wr.opcode = IB_UVERBS_WR_SEND;
		ps.sge.addr = 0xffff888000000000ull;
		ps.sge.length = 64;
		ps.sge.lkey = p.mra->lkey;
		r = raw_write(fd, &ps, sizeof(ps));
		diag("POST_SEND of a legacy SEND WR through the kernel: %s", r ? strerror(r) : "accepted");
		check(r != 0, "POST_SEND with a legacy WR fails (rroce takes WQEs from the ring only)", "accepted");
		/* the same with POST_RECV */
		struct {
			struct ib_uverbs_cmd_hdr hdr;
			struct ib_uverbs_post_recv cmd;
			struct ib_uverbs_recv_wr wr;
			struct ib_uverbs_sge sge;
		} pr;
		struct ib_uverbs_post_recv_resp rresp;

		memset(&pr, 0, sizeof(pr));
		pr.hdr.command = IB_USER_VERBS_CMD_POST_RECV;
		pr.hdr.in_words = sizeof(pr) / 4;
		pr.hdr.out_words = sizeof(rresp) / 4;
		pr.cmd.response = (uintptr_t)&rresp;
		pr.cmd.qp_handle = p.b->handle;
		pr.cmd.wr_count = 1;
		pr.cmd.sge_count = 1;
		pr.cmd.wqe_size = sizeof(pr.wr);
		pr.wr.num_sge = 1;
		pr.sge.addr = 0xffff888000000000ull;
		pr.sge.length = 64;
		pr.sge.lkey = 0x12345678;
		r = raw_write(fd, &pr, sizeof(pr));
		diag("POST_RECV of a legacy WR through the kernel: %s", r ? strerror(r) : "accepted");
		check(r != 0, "POST_RECV with a legacy WR fails (receives go through the ring)", "accepted");
	}
	/* CREATE_CQ with driver data: flags non-zero -> EINVAL; zero -> works */
	for (int flags = 1; flags >= 0; flags--) {
		struct {
			struct ib_uverbs_cmd_hdr hdr;
			struct ib_uverbs_create_cq cmd;
			uint32_t drv[2];
		} cc;
		struct {
			struct ib_uverbs_create_cq_resp base;
			uint8_t drv[24];
		} resp;

		memset(&cc, 0, sizeof(cc));
		memset(&resp, 0, sizeof(resp));
		cc.hdr.command = IB_USER_VERBS_CMD_CREATE_CQ;
		cc.hdr.in_words = sizeof(cc) / 4;
		cc.hdr.out_words = sizeof(resp) / 4;
		cc.cmd.response = (uintptr_t)&resp;
		cc.cmd.cqe = 8;
		cc.cmd.comp_channel = -1;
		cc.drv[0] = flags ? 0x80 : 0;
		r = raw_write(fd, &cc, sizeof(cc));
		if (flags) {
			check(r == EINVAL, "CREATE_CQ with non-zero driver flags -> EINVAL", "%s", r ? strerror(r) : "created");
		} else {
			check(r == 0, "the same CREATE_CQ with zero flags works (the command format is right)", "%s",
			      strerror(r));
			if (!r) {
				struct {
					struct ib_uverbs_cmd_hdr hdr;
					struct ib_uverbs_destroy_cq cmd;
				} dc = { { IB_USER_VERBS_CMD_DESTROY_CQ, sizeof(dc) / 4,
					   sizeof(struct ib_uverbs_destroy_cq_resp) / 4 } };
				struct ib_uverbs_destroy_cq_resp dr;

				dc.cmd.response = (uintptr_t)&dr;
				dc.cmd.cq_handle = resp.base.cq_handle;
				check(raw_write(fd, &dc, sizeof(dc)) == 0, "  ... and DESTROY_CQ of it works", NULL);
				check(raw_write(fd, &dc, sizeof(dc)) != 0, "  ... a second DESTROY_CQ of the handle fails",
				      NULL);
			}
		}
	}
	/* ioctl() garbage */
	{
		struct {
			struct ib_uverbs_ioctl_hdr h;
			struct ib_uverbs_attr a[4];
		} io;
		struct {
			uint16_t obj, meth, nattr, len;
		} cases[] = { { 0xffff, 0, 0, 0 }, { 0, 0xffff, 0, 0 }, { 0x1000, 0x1, 1, 0 },
			      { 0, 0, 4, 0xffff }, { 0, 0, 0, 3 } };

		for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			memset(&io, 0, sizeof(io));
			io.h.object_id = cases[i].obj;
			io.h.method_id = cases[i].meth;
			io.h.num_attrs = cases[i].nattr;
			io.h.length = cases[i].len ? cases[i].len : sizeof(io.h) + cases[i].nattr * sizeof(io.a[0]);
			for (int k = 0; k < 4; k++) {
				io.a[k].attr_id = (uint16_t)random();
				io.a[k].len = 0xffff;
				io.a[k].flags = UVERBS_ATTR_F_MANDATORY;
				io.a[k].data = 0xffff888000000000ull;
			}
			r = ioctl(fd, RDMA_VERBS_IOCTL, &io) ? errno : 0;
			snprintf(desc, sizeof(desc), "ioctl(object %#x, method %#x, %u attrs, length %u) fails", cases[i].obj,
				 cases[i].meth, cases[i].nattr, io.h.length);
			check(r != 0, desc, "succeeded");
		}
	}
	/* mmap() of offsets that are no ring of ours, and of a ring of ours
	 * with a length beyond it */
	{
		off_t offs[] = { (off_t)4096 * 0x7fff0, (off_t)1 << 40, -4096 };

		for (unsigned i = 0; i < 3; i++) {
			void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, offs[i]);

			snprintf(desc, sizeof(desc), "mmap of offset %#llx (no ring) fails", (unsigned long long)offs[i]);
			if (m != MAP_FAILED)
				munmap(m, 4096);
			check(m == MAP_FAILED, desc, "mapped");
		}
		size_t len = p.amaps[0].end - p.amaps[0].start;
		void *m = mmap(NULL, len + (1 << 20), PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)p.amaps[0].off);

		check(m == MAP_FAILED, "mmap of a ring of ours with 1 MiB more than its length fails", "mapped");
		if (m != MAP_FAILED)
			munmap(m, len + (1 << 20));
		m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, (off_t)p.amaps[0].off);
		diag("MAP_PRIVATE mapping of a ring: %s", m == MAP_FAILED ? strerror(errno) : "mapped");
		if (m != MAP_FAILED)
			munmap(m, len);
	}
	/* the context still works with the old pair */
	{
		struct ibv_wc wc;

		pattern(p.bufa, 4096, 0x66);
		int ok = post_write(p.a, 5, p.bufa, 4096, p.mra->lkey, p.bufb, p.mrb->rkey, IBV_WR_RDMA_WRITE) == 0 &&
			 poll_n(p.cqa, &wc, 1, 10) == 1 && wc.status == IBV_WC_SUCCESS && pattern_ok(p.bufb, 4096, 0x66);
		check(ok, "the pair of the attacked context still moves data intact", NULL);
	}
	pair_destroy(&p);
	device_still_works(d, "raw uverbs garbage");
}

/* ------------------------------------------------- destroy while in flight */

/* A pair busy with `n` WRITEs of `len` bytes (not waited for). */
static int start_big(struct pair *p, int n, uint32_t len)
{
	for (int i = 0; i < n; i++)
		if (post_write(p->a, 100 + i, p->bufa + (size_t)(i % 4) * len, len, p->mra->lkey,
			       p->bufb + (size_t)(i % 4) * len, p->mrb->rkey, IBV_WR_RDMA_WRITE))
			return -1;
	return 0;
}

static void case_destroy_inflight(struct dev *d)
{
	uint32_t len = g_debug ? 256 * 1024 : 1024 * 1024;
	int rounds = g_debug ? 1 : 2;

	for (int round = 0; round < rounds; round++) {
		struct pair p;
		struct ibv_wc wc[32];

		/* destroy the requester QP in the middle of 8 x 1 MiB */
		if (pair_create(&p, d, 4 * (size_t)len, 0, 7, g_to, 7, 0) || start_big(&p, 8, len)) {
			check(0, "destroy QP in flight: setup", NULL);
			return;
		}
		usleep(1000 * (round + 1));
		int r = ibv_destroy_qp(p.a);

		p.a = NULL;
		check(r == 0, "destroy a QP with 8 MiB of WRITEs in flight -> 0", "%s", strerror(r));
		/* the responder QP may later see nothing more; destroy it too */
		pair_destroy(&p);

		/* dereg the source MR in flight: later reads of it must fail
		 * (LOC_PROT_ERR) or the WR was complete; never success with
		 * the wrong data */
		if (pair_create(&p, d, 4 * (size_t)len, 0, 7, g_to, 7, 0)) {
			check(0, "dereg in flight: setup", NULL);
			return;
		}
		pattern(p.bufa, 4 * (size_t)len, 0x71);
		start_big(&p, 8, len);
		usleep(500 * (round + 1));
		r = ibv_dereg_mr(p.mra);
		p.mra = NULL;
		check(r == 0, "dereg the source MR of 8 MiB of WRITEs in flight -> 0", "%s", strerror(r));
		int n = poll_n(p.cqa, wc, 8, 30), ok = 0, err = 0, order = 1;

		for (int i = 0; i < n; i++) {
			if (wc[i].status == IBV_WC_SUCCESS) {
				ok++;
				order &= !err;
			} else {
				err++;
			}
		}
		diag("  dereg round %d: %d completions, %d ok then %d errors (first error %s)", round, n, ok, err,
		     err ? st(wc[ok].status) : "-");
		/* whatever succeeded landed intact */
		int data = 1;

		for (int i = 0; i < ok && i < 4; i++)
			data &= pattern_ok(p.bufb + (size_t)i * len, len, 0x71) ||
				!memcmp(p.bufb + (size_t)i * len, p.bufa + (size_t)i * len, len);
		check(n == 8 && order && (!err || wc[ok].status == IBV_WC_LOC_PROT_ERR) && data,
		      "  ... every WRITE completes: successes (data intact) first, then LOC_PROT_ERR and flushes",
		      "%d completions, %d ok, %d errors, first error %s, order %d, data %d", n, ok, err,
		      err ? st(wc[ok].status) : "-", order, data);
		/* the target MR deregistered under incoming WRITEs */
		pair_destroy(&p);
		if (pair_create(&p, d, 4 * (size_t)len, 0, 7, g_to, 7, 0)) {
			check(0, "dereg target in flight: setup", NULL);
			return;
		}
		start_big(&p, 8, len);
		usleep(500 * (round + 1));
		r = ibv_dereg_mr(p.mrb);
		p.mrb = NULL;
		n = poll_n(p.cqa, wc, 8, 30);
		ok = err = 0;
		for (int i = 0; i < n; i++)
			*(wc[i].status == IBV_WC_SUCCESS ? &ok : &err) += 1;
		check(r == 0 && n == 8 && (!err || wc[ok].status == IBV_WC_REM_ACCESS_ERR),
		      "  ... dereg of the target MR under WRITEs: the rest fails with REM_ACCESS_ERR, then flushes",
		      "dereg %d, %d completions, %d ok, %d errors, first error %s", r, n, ok, err,
		      err ? st(wc[ok].status) : "-");
		/* destroy the CQ a QP uses: refused (EBUSY), the QP keeps working */
		r = ibv_destroy_cq(p.cqa);
		check(r == EBUSY, "destroy a CQ that a QP still uses -> EBUSY", "%s", strerror(r));
		pair_destroy(&p);
	}
	device_still_works(d, "destroying objects under traffic");
}

/*
 * Children that exit or are killed mid-transfer without cleaning up,
 * close the device with everything live, or touch the parent's rings
 * after fork(): the kernel reclaims everything (rdma resource counts
 * back to where they were) and the parent's own QPs are not hurt by a
 * child that merely exits.
 */
static int res_count(const char *dev, const char *what)
{
	char cmd[200], line[512];
	int n = -1;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "rdma resource show %s 2>/dev/null", dev);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, what);

		if (p && p[strlen(what)] == ' ')
			n = atoi(p + strlen(what) + 1);
	}
	pclose(f);
	return n;
}

/* Objects (pd, cq, qp, mr, srq) that rdma resource lists for process pid. */
static int res_of_pid(pid_t pid)
{
	char cmd[300], line[1024], key[32];
	int n = 0;
	FILE *f;

	/* one rdma process for the five lists (batch mode, on past an error):
	 * each program started costs ~0.3 s on the debug kernel under TCG */
	snprintf(cmd, sizeof(cmd),
		 "printf 'resource show pd\\nresource show cq\\nresource show qp\\nresource show mr\\n"
		 "resource show srq\\n' | rdma -f -b - 2>/dev/null");
	snprintf(key, sizeof(key), " pid %d ", (int)pid);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, key) != NULL;
	pclose(f);
	return n;
}

static int wait_pid_gone(pid_t pid, double secs)
{
	double end = now_s() + secs * g_scale;
	int n;

	while ((n = res_of_pid(pid)) != 0 && now_s() < end)
		msleep(50);
	return n;
}

static void child_transfer(const char *name, int gidx, int how, int ready_fd, int go_fd)
{
	struct dev d;
	struct pair p;
	uint32_t len = g_debug ? 256 * 1024 : 1024 * 1024;
	char c;

	if (dev_open(&d, name, gidx) || pair_create(&p, &d, 4 * (size_t)len, how == 1, 7, g_to, 7, 0))
		_exit(3);
	start_big(&p, 12, len);
	/* tell the parent (which counts our objects) and keep the SQ full
	 * until its go, so the exit really is mid-transfer */
	if (write(ready_fd, "x", 1) != 1)
		_exit(4);
	fcntl(go_fd, F_SETFL, O_NONBLOCK);
	for (int i = 0; read(go_fd, &c, 1) != 1; i++) {
		struct ibv_wc wc[16];
		int n = ibv_poll_cq(p.cqa, 16, wc);

		for (int k = 0; k < n; k++)
			if (wc[k].status != IBV_WC_SUCCESS ||
			    post_write(p.a, 200 + i, p.bufa, len, p.mra->lkey, p.bufb, p.mrb->rkey, IBV_WR_RDMA_WRITE))
				_exit(5);
		if (!n)
			usleep(500);
	}
	if (how == 2)
		ibv_close_device(d.ctx); /* with everything live */
	if (how == 3)
		for (;;)
			pause(); /* killed by the parent */
	_exit(0);
}

static void case_exit(struct dev *d, const char *name, int gidx)
{
	static const char *names[] = { "exits mid-transfer without cleanup", "exits mid-transfer (QP on an SRQ)",
				       "closes the device with everything live, then exits",
				       "is killed (SIGKILL) mid-transfer" };
	int rounds = 1;

	/* rdma resource lists our own objects with our pid: the check works */
	int mine = res_of_pid(getpid());

	check(mine > 0, "rdma resource lists this process's objects by pid", "%d", mine);
	for (int r = 0; r < rounds; r++)
		for (int how = 0; how < 4; how++) {
			int pfd[2], gfd[2];
			pid_t pid;
			int status = 0, live = -1;
			char desc[200], c;

			if (pipe(pfd) || pipe(gfd))
				return;
			pid = fork();
			if (pid == 0) {
				close(pfd[0]);
				close(gfd[1]);
				child_transfer(name, gidx, how, pfd[1], gfd[0]);
			}
			close(pfd[1]);
			close(gfd[0]);
			/* the child says when its transfer is under way */
			if (read(pfd[0], &c, 1) == 1)
				live = res_of_pid(pid);
			if (how == 3)
				kill(pid, SIGKILL);
			else if (write(gfd[1], "g", 1) != 1)
				diag("cannot signal the child");
			close(pfd[0]);
			close(gfd[1]);
			double t0 = now_s();

			waitpid(pid, &status, 0);
			double t1 = now_s();
			int n = wait_pid_gone(pid, 10);

			diag("  child %d (%s): exit took %.1f s, reclaim seen after %.1f s", (int)pid, names[how], t1 - t0,
			     now_s() - t1);

			snprintf(desc, sizeof(desc), "a child that %s: its %d objects are all reclaimed (round %d)",
				 names[how], live, r + 1);
			check((how == 3 ? WIFSIGNALED(status) : WIFEXITED(status) && WEXITSTATUS(status) == 0) && live > 0 &&
				      n == 0,
			      desc, "child status %#x, objects while live %d, left %d", status, live, n);
		}
	device_still_works(d, "children exiting mid-transfer");
}

/*
 * fork() with live rings: the child scribbles on every ring mapping it
 * inherited (MAP_SHARED, so the parent's rings), rings the doorbells of
 * the parent's QP through the inherited fd and exits.  The parent's QP
 * may be broken by that (same context, same rings: the child acts for the
 * parent), but the kernel stays intact, the parent can still tear down,
 * and a fresh pair in a fresh context works.
 */
static void case_fork(struct dev *d)
{
	int rounds = g_debug ? 2 : 5;

	for (int r = 0; r < rounds; r++) {
		struct pair p;
		struct ibv_wc wc[32];

		if (pair_create(&p, d, 1 << 20, r & 1, 7, g_to, 7, 0)) {
			check(0, "fork: setup", NULL);
			return;
		}
		start_big(&p, 4, 256 * 1024);
		pid_t pid = fork();

		if (pid == 0) {
			struct map m[MAXMAPS];
			int n = maps_read(m);

			srandom(getpid());
			for (int i = 0; i < n; i++)
				for (uintptr_t a = m[i].start; a < m[i].end; a += 4)
					if (random() & 1)
						*(volatile uint32_t *)a = (uint32_t)random();
			for (int i = 0; i < 20; i++)
				doorbell(p.a);
			/* and through the provider with its (copied) state */
			post_write(p.a, 0xc417d, p.bufa, 64, p.mra->lkey, p.bufb, p.mrb->rkey, IBV_WR_RDMA_WRITE);
			_exit(0);
		}
		int status;

		waitpid(pid, &status, 0);
		int n = poll_n(p.cqa, wc, 32, 2);
		int s = qp_state(p.a);

		diag("  fork round %d: child exit %#x; parent's QP %s, %d completions after the scribbles", r, status,
		     qps(s), n);
		/* the parent can always clean up */
		int ra = ibv_destroy_qp(p.a), rb = ibv_destroy_qp(p.b);

		p.a = p.b = NULL;
		check(WIFEXITED(status) && ra == 0 && rb == 0,
		      "a forked child scribbling on the inherited rings and ringing doorbells: parent tears down cleanly",
		      "child %#x, destroy %d/%d", status, ra, rb);
		pair_destroy(&p);
	}
	device_still_works(d, "forked children scribbling on the rings");
}

/* ------------------------------------------------------------- limits */
static int exhaust(const char *what, int max, void *(*mk)(struct dev *, int), void (*rm)(void *), struct dev *d,
		   int expect_errno)
{
	void **objs = calloc((size_t)max + 2, sizeof(void *));
	int n = 0, err = 0, n2 = 0, err2 = 0;
	char desc[256];

	for (; n < max + 1; n++) {
		errno = 0;
		objs[n] = mk(d, n);
		if (!objs[n]) {
			err = errno;
			break;
		}
	}
	for (int i = 0; i < n; i++)
		rm(objs[i]);
	/* everything is reclaimed: the same number fits again */
	for (; n2 < max + 1; n2++) {
		errno = 0;
		objs[n2] = mk(d, n2);
		if (!objs[n2]) {
			err2 = errno;
			break;
		}
	}
	for (int i = 0; i < n2; i++)
		rm(objs[i]);
	free(objs);
	snprintf(desc, sizeof(desc), "%s: exhausted after %d of max %d with %s; freed; again %d", what, n, max,
		 strerror(expect_errno), n2);
	check(n <= max && n > 0 && err == expect_errno && n2 == n && err2 == expect_errno, desc, "first %d (%s), second %d (%s)", n,
	      strerror(err), n2, strerror(err2));
	return n;
}

static struct ibv_cq *g_cq;
static uint8_t *g_page;
static void *mk_pd(struct dev *d, int i) { (void)i; return ibv_alloc_pd(d->ctx); }
static void rm_pd(void *o) { ibv_dealloc_pd(o); }
static void *mk_cq(struct dev *d, int i) { (void)i; return ibv_create_cq(d->ctx, 1, NULL, NULL, 0); }
static void rm_cq(void *o) { ibv_destroy_cq(o); }
static void *mk_mr(struct dev *d, int i) { (void)i; return ibv_reg_mr(d->pd, g_page, 4096, IBV_ACCESS_LOCAL_WRITE); }
static void rm_mr(void *o) { ibv_dereg_mr(o); }
static void *mk_qp(struct dev *d, int i) { (void)i; return mkqp(d->pd, g_cq, NULL, IBV_QPT_RC, 1); }
static void rm_qp(void *o) { ibv_destroy_qp(o); }
static void *mk_srq(struct dev *d, int i)
{
	struct ibv_srq_init_attr a = { .attr = { .max_wr = 1, .max_sge = 1 } };

	(void)i;
	return ibv_create_srq(d->pd, &a);
}
static void rm_srq(void *o) { ibv_destroy_srq(o); }
static void *mk_ah(struct dev *d, int i)
{
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
				  .grh = { .dgid = d->gid, .sgid_index = d->gidx, .hop_limit = 64 } };

	(void)i;
	return ibv_create_ah(d->pd, &aa);
}
static void rm_ah(void *o) { ibv_destroy_ah(o); }

/* create with cap values: 0 or errno */
static int try_qp(struct dev *d, int swr, int rwr, int ssge, int rsge, int inl)
{
	struct ibv_qp_init_attr ia = { .send_cq = g_cq, .recv_cq = g_cq, .qp_type = IBV_QPT_RC,
				       .cap = { swr, rwr, ssge, rsge, inl } };
	struct ibv_qp *q = ibv_create_qp(d->pd, &ia);

	if (!q)
		return errno ? errno : -1;
	ibv_destroy_qp(q);
	return 0;
}

static void case_limits(struct dev *d, const char *name)
{
	struct ibv_device_attr *a = &d->attr;
	char desc[256];
	int r;

	g_page = aligned_alloc(4096, 4096);
	g_cq = ibv_create_cq(d->ctx, 4, NULL, NULL, 0);
	diag("%s: max_pd %d max_cq %d max_qp %d max_srq %d max_mr %d max_ah %d max_qp_wr %d max_sge %d max_cqe %d "
	     "max_srq_wr %d max_srq_sge %d max_mr_size %#" PRIx64,
	     name, a->max_pd, a->max_cq, a->max_qp, a->max_srq, a->max_mr, a->max_ah, a->max_qp_wr, a->max_sge,
	     a->max_cqe, a->max_srq_wr, a->max_srq_sge, (uint64_t)a->max_mr_size);
	diag("in use before (rdma resource): pd %d cq %d qp %d mr %d srq %d", res_count(name, " pd"),
	     res_count(name, " cq"), res_count(name, " qp"), res_count(name, " mr"), res_count(name, " srq"));
	if (a->max_qp > 4096 || a->max_cq > 4096 || a->max_mr > 4096 || a->max_pd > 4096 || a->max_srq > 4096) {
		check(0, "the limits are small enough to exhaust (load rroce with max_objects=N)", NULL);
		return;
	}
	/* what others (ib_core's MAD layer, our own setup) hold: the count
	 * that fits is max minus that */
	int pd_used = res_count(name, " pd"), cq_used = res_count(name, " cq"), qp_used = res_count(name, " qp");
	int n;

	n = exhaust("PDs", a->max_pd, mk_pd, rm_pd, d, ENOMEM);
	check(n == a->max_pd - pd_used, "  ... exactly max_pd minus the PDs in use fit", "%d fit, %d in use", n, pd_used);
	n = exhaust("CQs", a->max_cq, mk_cq, rm_cq, d, ENOMEM);
	check(n == a->max_cq - cq_used, "  ... exactly max_cq minus the CQs in use fit", "%d fit, %d in use", n, cq_used);
	n = exhaust("QPs", a->max_qp, mk_qp, rm_qp, d, ENOMEM);
	check(n == a->max_qp - qp_used, "  ... exactly max_qp minus the QPs in use fit", "%d fit, %d in use", n, qp_used);
	n = exhaust("SRQs", a->max_srq, mk_srq, rm_srq, d, ENOMEM);
	check(n == a->max_srq, "  ... exactly max_srq fit", "%d fit", n);
	n = exhaust("MRs", a->max_mr, mk_mr, rm_mr, d, ENOMEM);
	check(n >= a->max_mr - 2, "  ... max_mr (less at most 2 kernel DMA MRs) fit", "%d fit", n);
	n = exhaust("AHs", a->max_ah, mk_ah, rm_ah, d, ENOMEM);
	check(n >= a->max_ah - 2, "  ... max_ah (less at most 2 kernel AHs) fit", "%d fit", n);

	/* queue sizes: the maximum works, one more is EINVAL */
	r = try_qp(d, a->max_qp_wr, 1, 1, 1, 0);
	check(r == 0, "QP with max_send_wr = max_qp_wr works", "%s", strerror(r));
	r = try_qp(d, a->max_qp_wr + 1, 1, 1, 1, 0);
	check(r == EINVAL, "QP with max_send_wr = max_qp_wr + 1 -> EINVAL", "%s", r ? strerror(r) : "created");
	r = try_qp(d, 1, a->max_qp_wr, 1, 1, 0);
	check(r == 0, "QP with max_recv_wr = max_qp_wr works", "%s", strerror(r));
	r = try_qp(d, 1, a->max_qp_wr + 1, 1, 1, 0);
	check(r == EINVAL, "QP with max_recv_wr = max_qp_wr + 1 -> EINVAL", "%s", r ? strerror(r) : "created");
	r = try_qp(d, 1, 1, a->max_sge, a->max_sge, 0);
	check(r == 0, "QP with max_sge send and receive SGEs works", "%s", strerror(r));
	r = try_qp(d, 1, 1, a->max_sge + 1, 1, 0);
	check(r == EINVAL, "QP with max_sge + 1 send SGEs -> EINVAL", "%s", r ? strerror(r) : "created");
	r = try_qp(d, 1, 1, 1, a->max_sge + 1, 0);
	check(r == EINVAL, "QP with max_sge + 1 receive SGEs -> EINVAL", "%s", r ? strerror(r) : "created");
	r = try_qp(d, 0x7fffffff, 1, 1, 1, 0);
	check(r == EINVAL, "QP with max_send_wr 2^31 - 1 -> EINVAL", "%s", r ? strerror(r) : "created");
	{
		struct ibv_cq *cq = ibv_create_cq(d->ctx, a->max_cqe, NULL, NULL, 0);

		check(cq != NULL, "CQ with max_cqe entries works", "%s", strerror(errno));
		if (cq)
			ibv_destroy_cq(cq);
		errno = 0;
		cq = ibv_create_cq(d->ctx, a->max_cqe + 1, NULL, NULL, 0);
		check(!cq && errno == EINVAL, "CQ with max_cqe + 1 entries -> EINVAL", "%s", cq ? "created" : strerror(errno));
		if (cq)
			ibv_destroy_cq(cq);
	}
	{
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = a->max_srq_wr, .max_sge = a->max_srq_sge } };
		struct ibv_srq *s = ibv_create_srq(d->pd, &sa);

		check(s != NULL, "SRQ with max_srq_wr WRs and max_srq_sge SGEs works", "%s", strerror(errno));
		if (s)
			ibv_destroy_srq(s);
		sa.attr.max_wr = a->max_srq_wr + 1;
		sa.attr.max_sge = 1;
		errno = 0;
		s = ibv_create_srq(d->pd, &sa);
		check(!s && errno == EINVAL, "SRQ with max_srq_wr + 1 -> EINVAL", "%s", s ? "created" : strerror(errno));
		if (s)
			ibv_destroy_srq(s);
		sa.attr.max_wr = 1;
		sa.attr.max_sge = a->max_srq_sge + 1;
		errno = 0;
		s = ibv_create_srq(d->pd, &sa);
		check(!s && errno == EINVAL, "SRQ with max_srq_sge + 1 -> EINVAL", "%s", s ? "created" : strerror(errno));
		if (s)
			ibv_destroy_srq(s);
	}
	/* an MR of zero length, and one over an address range that does not exist */
	{
		struct ibv_mr *mr = ibv_reg_mr(d->pd, g_page, 0, IBV_ACCESS_LOCAL_WRITE);

		check(!mr, "MR of length 0 is refused", "%s", mr ? "registered" : strerror(errno));
		if (mr)
			ibv_dereg_mr(mr);
		mr = ibv_reg_mr(d->pd, (void *)0x1000, (size_t)1 << 40, IBV_ACCESS_LOCAL_WRITE);
		check(!mr, "MR of 1 TiB over unmapped memory is refused", "%s", mr ? "registered" : strerror(errno));
		diag("1 TiB MR: %s", mr ? "registered" : strerror(errno));
		if (mr)
			ibv_dereg_mr(mr);
	}
	snprintf(desc, sizeof(desc), "exhausting every limit");
	ibv_destroy_cq(g_cq);
	device_still_works(d, desc);
}

/*
 * RLIMIT_MEMLOCK (run without CAP_IPC_LOCK, e.g. as nobody): MRs up to the
 * limit register, one more page fails with ENOMEM (ib_umem_get's check);
 * after a deregistration it fits again.
 */
static void case_memlock(struct dev *d)
{
	struct rlimit rl;
	size_t lim, page = 4096;

	getrlimit(RLIMIT_MEMLOCK, &rl);
	lim = rl.rlim_cur;
	diag("RLIMIT_MEMLOCK %zu bytes, euid %d", lim, (int)geteuid());
	if (lim == RLIM_INFINITY || lim > (64u << 20)) {
		check(0, "memlock: run with a small RLIMIT_MEMLOCK (ulimit -l) and without CAP_IPC_LOCK", NULL);
		return;
	}
	/* the device's own setup pins nothing; register half, then the rest */
	size_t half = (lim / 2) & ~(page - 1), rest = (lim - half) & ~(page - 1);
	uint8_t *b = aligned_alloc(page, lim + 16 * page);

	memset(b, 1, lim + 16 * page);
	struct ibv_mr *m1 = ibv_reg_mr(d->pd, b, half, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *m2 = m1 ? ibv_reg_mr(d->pd, b + half, rest, IBV_ACCESS_LOCAL_WRITE) : NULL;

	check(m1 && m2, "MRs totalling the whole RLIMIT_MEMLOCK register", "%s", strerror(errno));
	errno = 0;
	struct ibv_mr *m3 = ibv_reg_mr(d->pd, b + half + rest, page, IBV_ACCESS_LOCAL_WRITE);
	int e = errno;

	check(!m3 && (e == ENOMEM || e == EPERM), "one more page beyond RLIMIT_MEMLOCK -> ENOMEM", "%s",
	      m3 ? "registered" : strerror(e));
	if (m3)
		ibv_dereg_mr(m3);
	errno = 0;
	struct ibv_mr *big = ibv_reg_mr(d->pd, b, lim + 8 * page, IBV_ACCESS_LOCAL_WRITE);

	check(!big, "a single MR larger than RLIMIT_MEMLOCK -> ENOMEM", "%s", big ? "registered" : strerror(errno));
	if (big)
		ibv_dereg_mr(big);
	if (m2)
		ibv_dereg_mr(m2);
	m3 = ibv_reg_mr(d->pd, b + half, rest, IBV_ACCESS_LOCAL_WRITE);
	check(m3 != NULL, "after a deregistration the pages fit again (the charge was given back)", "%s",
	      strerror(errno));
	if (m3)
		ibv_dereg_mr(m3);
	if (m1)
		ibv_dereg_mr(m1);
	/* (two MRs of 4 x 64 KiB: within the limit) */
	device_still_works_n(d, "hitting RLIMIT_MEMLOCK", 65536);
	free(b);
}

/* ------------------------------------------------ stalls and CQ overflow */
/*
 * A thread that keeps the producer index of a ring one ring ahead of the
 * consumer index the kernel publishes: a kernel loop that re-reads the
 * producer index until the ring is empty never ends while it runs.
 */
struct mover {
	struct ring *r;
	double until;		/* at the latest */
	int stop;		/* set once the doorbell has returned */
	volatile int running;
	unsigned long moves;
};

static void pin_to(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static void *mover_fn(void *arg)
{
	struct mover *m = arg;

	/* on the other CPU than the thread that rings the doorbell */
	pin_to(1);
	m->running = 1;
	while (!__atomic_load_n(&m->stop, __ATOMIC_ACQUIRE) && now_s() < m->until) {
		for (int i = 0; i < 1000; i++) {
			uint32_t c = __atomic_load_n((uint32_t *)ring_c(m->r), __ATOMIC_ACQUIRE);

			ring_publish(m->r, c + m->r->entries);
			m->moves++;
		}
	}
	__atomic_store_n(&m->running, 0, __ATOMIC_RELEASE);
	return NULL;
}

/* Async events of one type within secs (stops at the first quiet gap). */
static int count_events(struct ibv_context *ctx, enum ibv_event_type want, double secs, int *others)
{
	enum ibv_event_type ev;
	int n = 0;

	*others = 0;
	while (async_event(ctx, secs, &ev) == 0) {
		if (ev == want)
			n++;
		else
			(*others)++;
		if (n + *others > 100000)
			break;
	}
	return n;
}

/*
 * A QP in ERR whose SQ (variant 0) or RQ (variant 1) producer index is
 * kept moving by another thread while this one rings the doorbell once:
 * the doorbell must return while the mover still runs (the kernel flushes
 * a bounded batch per pass and continues from a work item, instead of
 * looping with bottom halves disabled for as long as user space likes --
 * a soft lockup and an RCU stall for the whole machine).  The flood of
 * flush completions overflows the 64-entry CQ: exactly one
 * IBV_EVENT_CQ_ERR, not one per lost completion.
 */
static void case_index_mover(struct dev *d)
{
	static const char *names[] = { "SQ", "RQ" };
	double run_s = 6 * g_scale;

	for (int v = 0; v < 2; v++) {
		struct pair p;
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
		char desc[256];
		pthread_t t;

		/* Deep queues: while the kernel works through one ring's worth,
		 * the mover has many chances to see entries released and to
		 * publish more (with a shallow ring, on a loaded machine, the
		 * kernel may empty it before the mover runs at all). */
		g_pair_depth = 16384;
		int pc = pair_create(&p, d, 65536, 0, 2, g_to, 1, 1);

		g_pair_depth = 16;
		if (pc) {
			check(0, names[v], "cannot create the pair");
			continue;
		}
		struct ring *r = v == 0 ? &p.sq : &p.rq;
		struct ibv_qp *qp = v == 0 ? p.a : p.b;
		struct ibv_wc wc[64];

		if (ibv_modify_qp(qp, &a, IBV_QP_STATE) || wait_state(qp, IBV_QPS_ERR, 5) != IBV_QPS_ERR) {
			check(0, names[v], "cannot move the QP to ERR");
			pair_destroy(&p);
			continue;
		}
		drain(v == 0 ? p.cqa : p.cqb, wc, 64, 0.5);
		count_events(d->ctx, IBV_EVENT_CQ_ERR, 0.2, &(int){ 0 });
		for (uint32_t i = 0; i < r->entries; i++)
			fill_random(ring_slot(r, i), r->es);
		struct mover m = { .r = r, .until = now_s() + run_s };

		pin_to(0);
		if (pthread_create(&t, NULL, mover_fn, &m)) {
			check(0, names[v], "pthread_create");
			pair_destroy(&p);
			continue;
		}
		while (!__atomic_load_n(&m.running, __ATOMIC_ACQUIRE))
			msleep(1);
		msleep(50);
		uint32_t c0 = *ring_c(r);
		double t0 = now_s();
		int db = doorbell(qp);
		double took = now_s() - t0;
		int alive = __atomic_load_n(&m.running, __ATOMIC_ACQUIRE);

		/* the mover goes on for a second more (the kernel's work item
		 * still flushing behind it), then stops: until its deadline it
		 * would only keep a vCPU busy (24 s per variant on the debug
		 * kernel, whose doorbell returns in 0.3-5 s) */
		if (alive)
			msleep(1000);
		__atomic_store_n(&m.stop, 1, __ATOMIC_RELEASE);
		pthread_join(t, NULL);
		msleep(200);
		/* (How far the mover got ahead of the kernel depends on how
		 * the host schedules the two vCPUs: informational.) */
		diag("  the kernel consumed %u entries (a ring holds %u)", *ring_c(r) - c0, r->entries);
		{
			uint32_t pe = *ring_p(r);
			int db2 = doorbell(qp);

			msleep(200);
			check(db2 == 0 && *ring_c(r) == pe,
			      "  ... with the mover stopped, one more doorbell flushes the rest of the ring",
			      "doorbell %d, p %u, c %u", db2, pe, *ring_c(r));
		}
		snprintf(desc, sizeof(desc),
			 "%s producer index moved by another thread during one doorbell on a QP in ERR: the doorbell "
			 "returns while the mover still runs",
			 names[v]);
		check(alive, desc, "doorbell %d returned after %.2f s, the mover had stopped (%lu moves in %.1f s)", db,
		      took, m.moves, run_s);
		diag("  doorbell took %.3f s; %lu index moves", took, m.moves);
		/* the work item finishes the last batch; then the kernel is quiet */
		int others = 0, nerr = count_events(d->ctx, IBV_EVENT_CQ_ERR, 3, &others);

		snprintf(desc, sizeof(desc), "  ... the flushed %s overflows the CQ: exactly one IBV_EVENT_CQ_ERR",
			 names[v]);
		check(nerr == 1, desc, "%d CQ_ERR events, %d others", nerr, others);
		check(qp_state(qp) == IBV_QPS_ERR, "  ... the QP stays in ERR", "%s", qps(qp_state(qp)));
		pair_destroy(&p);
	}
	device_still_works(d, "moving producer indices");
}

/*
 * The responder's atomics against the process's own.  A thread adds 1 to a
 * word of b's region with __atomic_fetch_add, as fast as it can, while a
 * runs FETCH_AND_ADDs of 2^32 on the same word through the device: none of
 * either kind may be lost, so the i-th FETCH_AND_ADD returns i in the high
 * half and the word ends as (n << 32) + the thread's count.  (Atomics that
 * are atomic only among the device's own, a lock around a load and a
 * store, lose the thread's adds that fall between the two; with two CPUs
 * that shows.)  Then a region at an I/O address other than its own
 * (ibv_reg_mr_iova): the atomic lands at the word the I/O address names.
 */
static int g_spin_stop;
static uint64_t g_spin_n;

static void *spin_adder(void *arg)
{
	uint64_t *w = arg, n = 0;

	while (!__atomic_load_n(&g_spin_stop, __ATOMIC_RELAXED)) {
		__atomic_fetch_add(w, 1, __ATOMIC_SEQ_CST);
		n++;
	}
	g_spin_n = n;
	return NULL;
}

static int post_fetch_add(struct ibv_qp *qp, uint64_t wr_id, void *laddr, uint32_t lkey, uint64_t raddr,
			  uint32_t rkey, uint64_t add)
{
	struct ibv_sge sge = { (uintptr_t)laddr, 8, lkey };
	struct ibv_send_wr wr, *bad;

	wr_init(&wr, &sge, wr_id, IBV_WR_ATOMIC_FETCH_AND_ADD);
	wr.wr.atomic.remote_addr = raddr;
	wr.wr.atomic.compare_add = add;
	wr.wr.atomic.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

static void case_atomics(struct dev *d)
{
	const int n = g_debug ? 1000 : 4000, batch = 8;
	struct pair p;
	struct ibv_wc wc[8];
	pthread_t t;
	struct ibv_mr *ali = NULL, *mis = NULL;
	uint64_t *word, *res, last_low = 0, final;
	int done = 0, wrong = 0, interleaved = 0, failed = 0, r;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	memset(wc, 0, sizeof(wc));
	if (pair_create(&p, d, 65536, 0, 7, g_to, 7, 0)) {
		check(0, "atomics", "cannot create the pair");
		return;
	}
	word = (uint64_t *)(p.bufb + 64);
	res = (uint64_t *)p.bufa;
	g_spin_stop = 0;
	r = pthread_create(&t, NULL, spin_adder, word);
	if (r) {
		check(0, "atomics", "pthread_create: %s", strerror(r));
		pair_destroy(&p);
		return;
	}
	double t0 = now_s();

	while (done < n && !failed) {
		int k = n - done < batch ? n - done : batch;

		for (int j = 0; j < k && !failed; j++) {
			r = post_fetch_add(p.a, done + j, res + j, p.mra->lkey, (uintptr_t)word, p.mrb->rkey, 1ull << 32);
			if (r) {
				diag("post_send: %s", strerror(r));
				failed = 1;
			}
		}
		if (failed || poll_n(p.cqa, wc, k, 10) != k) {
			failed = 1;
			break;
		}
		for (int j = 0; j < k; j++) {
			int i = done + j;

			if (wc[j].status != IBV_WC_SUCCESS || wc[j].wr_id != (uint64_t)i) {
				diag("FETCH_AND_ADD %d: %s, wr_id %" PRIu64, i, st(wc[j].status), wc[j].wr_id);
				failed = 1;
				break;
			}
			uint64_t orig = res[j], low = orig & 0xffffffffu;

			if (orig >> 32 != (uint64_t)i || low < last_low) {
				if (wrong++ < 3)
					diag("FETCH_AND_ADD %d returned %#" PRIx64 " after low half %#" PRIx64, i, orig,
					     last_low);
			}
			interleaved += low != last_low;
			last_low = low;
		}
		done += k;
	}
	__atomic_store_n(&g_spin_stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	final = __atomic_load_n(word, __ATOMIC_SEQ_CST);
	diag("%d FETCH_AND_ADDs in %.1f s beside %" PRIu64 " CPU adds; %d saw new CPU adds since the one before; "
	     "%ld CPUs online%s",
	     done, now_s() - t0, g_spin_n, interleaved, cpus,
	     cpus < 2 ? " (the adds interleave, but only two CPUs run them at the same time)" : "");
	check(!failed && done == n, "atomics: every FETCH_AND_ADD completes", "%d of %d", done, n);
	/* Sanity (holds for a lock around load and store too): */
	check(!wrong, "atomics: the i-th FETCH_AND_ADD returns i in its high half, low halves never decrease",
	      "%d wrong", wrong);
	check(interleaved > 0, "atomics: the thread's adds ran between the device's", "%d of %d saw new CPU adds",
	      interleaved, done);
	check(final == ((uint64_t)done << 32) + g_spin_n, "atomics: no add lost, the device's or the CPU's",
	      "word %#" PRIx64 ", want %#" PRIx64, final, ((uint64_t)done << 32) + g_spin_n);
	if (failed)
		goto out; /* completions may still be on cqa */

	/*
	 * A region at an I/O address of its own over b's third page: aligned
	 * alike, so an atomic lands where the address says.  One whose I/O
	 * address is 4 bytes off the region's offset in its page, where an
	 * aligned I/O address would be a misaligned word, cannot exist: ib_core
	 * refuses it (EINVAL).
	 */
	uint8_t *ali_mem = p.bufb + 8192;

	errno = 0;
	mis = ibv_reg_mr_iova(d->pd, p.bufb + 4096 + 4, 1024, 0x100000, ALL_ACCESS);
	check(!mis && errno == EINVAL, "atomics: a region whose I/O address is misaligned against its memory: EINVAL",
	      "%s", mis ? "registered" : strerror(errno));
	ali = ibv_reg_mr_iova(d->pd, ali_mem, 1024, 0x200000, ALL_ACCESS);
	if (!ali) {
		check(0, "atomics: ibv_reg_mr_iova", "%s", strerror(errno));
		goto out;
	}
	memset(ali_mem, 0, 64);
	ali_mem[16] = 7; /* the word at +16 is 7 (atomics are in host order: x86, little-endian) */
	res[0] = ~0ull;
	int ok = !post_fetch_add(p.a, 0xa11, res, p.mra->lkey, 0x200000 + 16, ali->rkey, 5) &&
		 poll_n(p.cqa, wc, 1, 10) == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 0xa11;
	uint64_t v;

	memcpy(&v, ali_mem + 16, 8);
	check(ok && res[0] == 7 && v == 12,
	      "atomics: a region at another I/O address: FETCH_AND_ADD at I/O address + 16 lands at its memory + 16",
	      "%s, returned %#" PRIx64 ", word %#" PRIx64, ok ? "completed" : st(wc[0].status), res[0], v);
out:
	if (ali)
		ibv_dereg_mr(ali);
	if (mis)
		ibv_dereg_mr(mis);
	pair_destroy(&p);
	device_still_works(d, "atomics");
}

/*
 * More signaled completions than the CQ holds, none polled, on a QP in
 * RTS: the CQ overflows, raises IBV_EVENT_CQ_ERR once (not once per lost
 * completion) and the QP completing into it enters the error state (IBA:
 * a CQ overrun is an error of the CQ and its work queues).
 */
static void case_cq_overflow(struct dev *d)
{
	struct ibv_cq *cq = ibv_create_cq(d->ctx, 16, NULL, NULL, 0);
	struct pair p;
	struct ibv_qp *q = NULL, *peer = NULL;
	int others = 0;

	if (!cq || pair_create(&p, d, 65536, 0, 7, g_to, 7, 0)) {
		check(0, "CQ overflow", "cannot create the CQ or the pair");
		if (cq)
			ibv_destroy_cq(cq);
		return;
	}
	int e = cq->cqe, n = 3 * e;

	q = mkqp(d->pd, cq, NULL, IBV_QPT_RC, n);
	peer = mkqp(d->pd, p.cqb, NULL, IBV_QPT_RC, 8);
	if (!q || !peer || qp_to_rts(d, q, peer->qp_num, 7, g_to, 7) || qp_to_rts(d, peer, q->qp_num, 7, g_to, 7)) {
		check(0, "CQ overflow", "cannot connect the QP");
		goto out;
	}
	count_events(d->ctx, IBV_EVENT_CQ_ERR, 0.2, &others);
	int posted = 0;

	for (int i = 0; i < n; i++)
		posted += post_write(q, 100 + i, p.bufa + 64 * i, 64, p.mra->lkey, p.bufb + 64 * i, p.mrb->rkey,
				     IBV_WR_RDMA_WRITE) == 0;
	int s = wait_state(q, IBV_QPS_ERR, 10);
	int nerr = count_events(d->ctx, IBV_EVENT_CQ_ERR, 3, &others);

	diag("CQ of %d entries, %d signaled WRITEs posted", e, posted);
	check(nerr == 1, "CQ overflow: exactly one IBV_EVENT_CQ_ERR", "%d CQ_ERR events, %d others", nerr, others);
	check(s == IBV_QPS_ERR, "CQ overflow: the QP completing into the CQ enters ERR", "QP %s", qps(s));
out:
	if (q)
		ibv_destroy_qp(q);
	if (peer)
		ibv_destroy_qp(peer);
	pair_destroy(&p);
	check(ibv_destroy_cq(cq) == 0, "CQ overflow: the overflowed CQ can be destroyed", "%s", strerror(errno));
	device_still_works(d, "a CQ overflow");
}

int main(int argc, char **argv)
{
	struct dev d;
	const char *c;
	char *e;

	if (argc != 4) {
		fprintf(stderr,
			"usage: %s DEV GID_INDEX CASE\n  CASE: sq_garbage sq_index rq srq cq_index ud uverbs "
			"destroy_inflight exit fork limits memlock index_mover cq_overflow atomics\n",
			argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if ((e = getenv("RROCE_TIMEOUT_SCALE")) && atof(e) >= 1)
		g_scale = atof(e);
	g_debug = (e = getenv("RROCE_KERNEL_FLAVOR")) && !strcmp(e, "debug");
	if (g_debug)
		g_to = 18;
	srandom((unsigned)time(NULL) ^ (unsigned)getpid());
	if (dev_open(&d, argv[1], atoi(argv[2]))) {
		check(0, "open the device", "%s", argv[1]);
		return 1;
	}
	c = argv[3];
	if (!strcmp(c, "sq_garbage"))
		case_sq_garbage(&d);
	else if (!strcmp(c, "sq_index"))
		case_sq_index(&d);
	else if (!strcmp(c, "rq"))
		case_rq(&d, 0);
	else if (!strcmp(c, "srq"))
		case_rq(&d, 1);
	else if (!strcmp(c, "cq_index"))
		case_cq_index(&d);
	else if (!strcmp(c, "ud"))
		case_ud(&d);
	else if (!strcmp(c, "uverbs"))
		case_uverbs(&d);
	else if (!strcmp(c, "destroy_inflight"))
		case_destroy_inflight(&d);
	else if (!strcmp(c, "exit"))
		case_exit(&d, argv[1], atoi(argv[2]));
	else if (!strcmp(c, "fork"))
		case_fork(&d);
	else if (!strcmp(c, "limits"))
		case_limits(&d, argv[1]);
	else if (!strcmp(c, "memlock"))
		case_memlock(&d);
	else if (!strcmp(c, "index_mover"))
		case_index_mover(&d);
	else if (!strcmp(c, "cq_overflow"))
		case_cq_overflow(&d);
	else if (!strcmp(c, "atomics"))
		case_atomics(&d);
	else {
		fprintf(stderr, "unknown case %s\n", c);
		return 2;
	}
	dev_close(&d);
	printf("# %d/%d checks passed\n", g_n - g_failed, g_n);
	return g_failed ? 1 : 0;
}
