// SPDX-License-Identifier: GPL-2.0
/*
 * rroce_kverbs_test - a test of the kernel-consumer verbs API (what in-kernel
 * ULPs such as NVMe-oF, iSER or SMB Direct use) of two RoCE devices.
 *
 *   insmod rroce_kverbs_test.ko dev_a=rroce0 dev_b=rroce1 [gid_index=N]
 *                               [timeout_ms=20000]
 *
 * The tests run synchronously from module init and print KTAP-like lines to
 * the kernel log, each prefixed with "rroce_kverbs: ": "1..N", "ok N - ...",
 * "not ok N - ...", "ok N - ... # SKIP why", diagnostics starting with "# ",
 * and a last line "P passed, F failed, S skipped".  If the driver has no
 * kernel verbs (ib_alloc_cq or ib_create_qp give -EOPNOTSUPP in the first
 * test), the module prints "unsupported: CALL(DEV) = -95 (EOPNOTSUPP)" and
 * reports every subtest as skipped.  Init always returns 0; remove the
 * module afterwards.
 *
 * Each subtest connects a fresh RC QP pair, QP A on dev_a and QP B on dev_b
 * (dev_a may equal dev_b), and destroys it at its end, so a failure cannot
 * leak into the next subtest.  Memory is kmalloc'ed or alloc_pages'd,
 * mapped with ib_dma_map_single/ib_dma_map_page and accessed through the
 * PD's local_dma_lkey and unsafe_global_rkey (ib_alloc_pd with
 * IB_PD_UNSAFE_GLOBAL_RKEY).  Every wait ends after timeout_ms, and a fatal
 * signal (e.g. a killed insmod) ends the run early.
 *
 * The address vector is filled by hand: kernel consumers must give ib_core a
 * resolved RoCE ah_attr (ib_modify_qp resolves the destination MAC only for
 * user QPs).  The GID is the first RoCE v2 IPv4-mapped GID of port 1 (or
 * gid_index), the destination GID is the peer's, and the destination MAC is
 * the MAC of the peer GID's netdev (rdma_read_gid_l2_fields), which is the
 * next hop because both netdevs share a link (the veth pair of the selftests).
 */
#define pr_fmt(fmt) "rroce_kverbs: " fmt

#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/etherdevice.h>
#include <linux/gfp.h>
#include <linux/jiffies.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/stringify.h>
#include <net/ipv6.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>

static char *dev_a = "rroce0";
module_param(dev_a, charp, 0444);
MODULE_PARM_DESC(dev_a, "ib device of QP A (default rroce0)");
static char *dev_b = "rroce1";
module_param(dev_b, charp, 0444);
MODULE_PARM_DESC(dev_b, "ib device of QP B (default rroce1; may equal dev_a)");
static int gid_index = -1;
module_param(gid_index, int, 0444);
MODULE_PARM_DESC(gid_index, "port 1 GID index on both devices (default -1: the first RoCE v2 IPv4-mapped GID)");
static unsigned int timeout_ms = 20000;
module_param(timeout_ms, uint, 0444);
MODULE_PARM_DESC(timeout_ms, "longest wait for one completion or state, ms (default 20000)");

#define KV_PORT		1
#define KV_BUF		(64 * 1024)		/* largest message */
#define KV_RX_LEN	(KV_BUF + PAGE_SIZE)	/* receive side: room for a canary tail */
#define KV_CANARY	0xa5
#define KV_CQE		256
#define KV_WR		64
#define KV_SGE		3
#define KV_INLINE	64
#define KV_CHAIN	32
#define KV_NREQ		8
#define KV_ANY		(-1L)

/* One device with its PD and buffers. */
struct kv_buf {
	void *va;
	struct page *pages;	/* alloc_pages memory, else kmalloc */
	size_t len;
	u64 dma;
};

struct kv_side {
	const char *tag;
	struct ib_device *dev;
	struct ib_pd *pd;
	int gid_index;
	union ib_gid gid;
	u8 mac[ETH_ALEN];
	struct kv_buf tx;	/* kmalloc + ib_dma_map_single */
	struct kv_buf rx;	/* alloc_pages + ib_dma_map_page */
};

static struct kv_side kv_a = { .tag = "A" }, kv_b = { .tag = "B" };
static u8 *kv_img;	/* expected image of a receive buffer */
static u8 *kv_inl;	/* inline source: never DMA-mapped */
static int kv_rd;	/* max_rd_atomic / max_dest_rd_atomic */
static u32 kv_seed = 1;

/* One end of an RC connection. */
struct kv_end {
	struct kv_side *s;
	struct ib_cq *cq;	/* send and receive CQ */
	struct ib_qp *qp;
	struct ib_qp_cap cap;	/* what ib_create_qp granted */
	u32 sq_psn;
};

/* A work request completed through an ib_cqe. */
struct kv_req {
	struct ib_cqe cqe;
	struct kv_end *end;	/* whose CQ gets the completion */
	struct completion done;
	atomic_t calls;
	bool softirq;
	struct ib_wc wc;
};

struct kv_pair {
	struct kv_end a, b;
	struct kv_req req[KV_NREQ];
};

struct kv_opts {
	enum ib_poll_context poll_a, poll_b;
	u32 wr;
};

static const struct kv_opts kv_direct = { IB_POLL_DIRECT, IB_POLL_DIRECT, KV_WR };

/* ------------------------------------------------------------ reporting */
static bool kv_err, kv_abort, kv_unsupported;
static char kv_skip[160], kv_unsup[160];

#define kv_diag(fmt, ...) pr_info("# " fmt "\n", ##__VA_ARGS__)
#define kv_fail(fmt, ...)						\
	do {								\
		kv_err = true;						\
		pr_info("# FAIL: " fmt "\n", ##__VA_ARGS__);		\
	} while (0)
#define kv_skip_why(fmt, ...) snprintf(kv_skip, sizeof(kv_skip), fmt, ##__VA_ARGS__)

static unsigned long kv_deadline(void)
{
	return jiffies + msecs_to_jiffies(timeout_ms);
}

static bool kv_expired(unsigned long deadline)
{
	if (fatal_signal_pending(current)) {
		kv_abort = true;
		return true;
	}
	return time_after(jiffies, deadline);
}

static void kv_nap(void)
{
	usleep_range(200, 1000);
}

/* ------------------------------------------------------------- buffers */
static int kv_buf_alloc(struct kv_side *s, struct kv_buf *b, size_t len, bool pages)
{
	b->len = len;
	if (pages) {
		b->pages = alloc_pages(GFP_KERNEL, get_order(len));
		if (!b->pages)
			return -ENOMEM;
		b->va = page_address(b->pages);
		b->dma = ib_dma_map_page(s->dev, b->pages, 0, len, DMA_BIDIRECTIONAL);
	} else {
		b->va = kmalloc(len, GFP_KERNEL);
		if (!b->va)
			return -ENOMEM;
		b->dma = ib_dma_map_single(s->dev, b->va, len, DMA_BIDIRECTIONAL);
	}
	if (ib_dma_mapping_error(s->dev, b->dma)) {
		if (b->pages)
			__free_pages(b->pages, get_order(len));
		else
			kfree(b->va);
		b->va = NULL;
		b->pages = NULL;
		return -EIO;
	}
	return 0;
}

static void kv_buf_free(struct kv_side *s, struct kv_buf *b)
{
	if (!b->va)
		return;
	if (b->pages) {
		ib_dma_unmap_page(s->dev, b->dma, b->len, DMA_BIDIRECTIONAL);
		__free_pages(b->pages, get_order(b->len));
	} else {
		ib_dma_unmap_single(s->dev, b->dma, b->len, DMA_BIDIRECTIONAL);
		kfree(b->va);
	}
	b->va = NULL;
	b->pages = NULL;
}

static void kv_to_dev(struct kv_side *s, struct kv_buf *b)
{
	ib_dma_sync_single_for_device(s->dev, b->dma, b->len, DMA_BIDIRECTIONAL);
}

static void kv_to_cpu(struct kv_side *s, struct kv_buf *b)
{
	ib_dma_sync_single_for_cpu(s->dev, b->dma, b->len, DMA_BIDIRECTIONAL);
}

/* A fresh pattern in s->tx (different in every block and every call). */
static void kv_fill_tx(struct kv_side *s)
{
	u8 *p = s->tx.va;
	u32 seed = kv_seed++ * 29;
	size_t i;

	for (i = 0; i < s->tx.len; i++)
		p[i] = (u8)(seed + i + (i >> 8) * 7 + (i >> 16) * 13);
	kv_to_dev(s, &s->tx);
}

/* s->rx and the expected image become all canary. */
static void kv_clear_rx(struct kv_side *s)
{
	memset(s->rx.va, KV_CANARY, s->rx.len);
	memset(kv_img, KV_CANARY, KV_RX_LEN);
	kv_to_dev(s, &s->rx);
}

static void kv_img_put(size_t off, const void *src, size_t len)
{
	memcpy(kv_img + off, src, len);
}

/* s->rx must equal the expected image, byte for byte. */
static void kv_check_rx(struct kv_side *s, const char *what)
{
	const u8 *got = s->rx.va;
	size_t i;

	kv_to_cpu(s, &s->rx);
	if (!memcmp(got, kv_img, KV_RX_LEN))
		return;
	for (i = 0; got[i] == kv_img[i]; i++)
		;
	kv_fail("%s: %s receive buffer differs first at offset %zu: %#04x, want %#04x%s",
		what, s->tag, i, got[i], kv_img[i],
		kv_img[i] == KV_CANARY ? " (canary: written out of bounds)" : "");
}

static struct ib_sge kv_sge(struct kv_side *s, struct kv_buf *b, u32 off, u32 len)
{
	return (struct ib_sge){ .addr = b->dma + off, .length = len,
				.lkey = s->pd->local_dma_lkey };
}

/* ------------------------------------------------------------ completions */
struct kv_exp {
	u64 wr_id;
	enum ib_wc_status status;
	int opcode;	/* checked on success only, as byte_len and imm */
	long byte_len;	/* KV_ANY: not defined for this completion */
	bool imm;
	u32 imm_data;
};

#define KV_OK(id, op, len) \
	(&(struct kv_exp){ .wr_id = (id), .status = IB_WC_SUCCESS, .opcode = (op), .byte_len = (len) })
#define KV_OK_IMM(id, op, len, im) \
	(&(struct kv_exp){ .wr_id = (id), .status = IB_WC_SUCCESS, .opcode = (op), \
			   .byte_len = (len), .imm = true, .imm_data = (im) })
#define KV_ERR(id, st) (&(struct kv_exp){ .wr_id = (id), .status = (st), .byte_len = KV_ANY })

/*
 * Error completions define only wr_id, status and qp; byte_len only receives
 * and READs (callers pass KV_ANY otherwise), the immediate only receives.
 */
static bool kv_wc_check(struct kv_end *e, const char *what, const struct ib_wc *wc,
			const struct kv_exp *x, bool by_id)
{
	bool ok = wc->status == x->status && wc->qp == e->qp;

	if (by_id && wc->wr_id != x->wr_id)
		ok = false;
	if (ok && x->status == IB_WC_SUCCESS) {
		if (wc->opcode != x->opcode ||
		    (x->byte_len != KV_ANY && wc->byte_len != x->byte_len))
			ok = false;
		/* the immediate is defined for receive completions only */
		if ((x->opcode & IB_WC_RECV) &&
		    (!!(wc->wc_flags & IB_WC_WITH_IMM) != x->imm ||
		     (x->imm && be32_to_cpu(wc->ex.imm_data) != x->imm_data)))
			ok = false;
	}
	if (!ok)
		kv_fail("%s: completion on %s: wr_id %#llx status %d (%s) opcode %d byte_len %u flags %#x imm %#x qp %s; want wr_id %#llx status %d (%s) opcode %d byte_len %ld imm %s %#x",
			what, e->s->tag, by_id ? wc->wr_id : 0, wc->status,
			ib_wc_status_msg(wc->status), wc->opcode, wc->byte_len, wc->wc_flags,
			be32_to_cpu(wc->ex.imm_data), wc->qp == e->qp ? "ours" : "OTHER",
			by_id ? x->wr_id : 0, x->status, ib_wc_status_msg(x->status),
			x->opcode, x->byte_len, x->imm ? "yes" : "no", x->imm_data);
	return ok;
}

/* Poll one completion from an IB_POLL_DIRECT CQ with ib_poll_cq. */
static int kv_poll(struct kv_end *e, struct ib_wc *wc, unsigned long deadline)
{
	int n;

	for (;;) {
		n = ib_poll_cq(e->cq, 1, wc);
		if (n > 0)
			return 0;
		if (n < 0) {
			kv_fail("ib_poll_cq on %s: %d", e->s->tag, n);
			return n;
		}
		if (kv_expired(deadline))
			return -ETIMEDOUT;
		kv_nap();
	}
}

/* The next completion on e's CQ must match x. */
static bool kv_expect(struct kv_end *e, const char *what, const struct kv_exp *x)
{
	struct ib_wc wc;

	if (kv_err)
		return false;
	if (kv_poll(e, &wc, kv_deadline())) {
		if (!kv_err)
			kv_fail("%s: no completion for wr_id %#llx on %s within %u ms",
				what, x->wr_id, e->s->tag, timeout_ms);
		return false;
	}
	return kv_wc_check(e, what, &wc, x, true);
}

static void kv_cq_empty(struct kv_end *e, const char *what)
{
	struct ib_wc wc;

	if (ib_poll_cq(e->cq, 1, &wc) > 0)
		kv_fail("%s: unexpected completion on %s: wr_id %#llx status %s opcode %d",
			what, e->s->tag, wc.wr_id, ib_wc_status_msg(wc.status), wc.opcode);
}

static void kv_req_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct kv_req *r = container_of(wc->wr_cqe, struct kv_req, cqe);

	r->wc = *wc;
	r->softirq = in_serving_softirq();
	atomic_inc(&r->calls);
	complete(&r->done);
}

static struct ib_cqe *kv_req_init(struct kv_req *r, struct kv_end *e)
{
	r->cqe.done = kv_req_done;
	r->end = e;
	init_completion(&r->done);
	atomic_set(&r->calls, 0);
	return &r->cqe;
}

/*
 * Wait for an ib_cqe completion: on an IB_POLL_DIRECT CQ by calling
 * ib_process_cq_direct, else (softirq/workqueue) on the completion.
 */
static bool kv_req_wait(struct kv_req *r, const char *what, const struct kv_exp *x)
{
	unsigned long deadline = kv_deadline();
	bool done = false;
	long left;

	if (kv_err)
		return false;
	if (r->end->cq->poll_ctx == IB_POLL_DIRECT) {
		while (!(done = completion_done(&r->done)) && !kv_expired(deadline)) {
			if (ib_process_cq_direct(r->end->cq, 4) == 0)
				kv_nap();
		}
	} else {
		/* (a successful wait consumes the completion: completion_done() is false after) */
		left = deadline - jiffies;
		if (left > 0) {
			left = wait_for_completion_killable_timeout(&r->done, left);
			done = left > 0;
			if (left < 0)
				kv_abort = true;
		}
	}
	if (!done) {
		kv_fail("%s: ib_cqe .done not called on %s (CQ poll context %d) within %u ms",
			what, r->end->s->tag, r->end->cq->poll_ctx, timeout_ms);
		/*
		 * Re-arming with REPORT_MISSED_EVENTS tells whether CQEs wait
		 * unpolled (a lost event).  Never on a direct CQ: an armed one
		 * makes ib_core warn about an unsolicited completion.
		 */
		if (r->end->cq->poll_ctx != IB_POLL_DIRECT)
			kv_diag("req_notify_cq(REPORT_MISSED_EVENTS) on %s: %d", r->end->s->tag,
				ib_req_notify_cq(r->end->cq,
						 IB_CQ_NEXT_COMP | IB_CQ_REPORT_MISSED_EVENTS));
		return false;
	}
	if (atomic_read(&r->calls) != 1)
		kv_fail("%s: ib_cqe .done called %d times", what, atomic_read(&r->calls));
	return kv_wc_check(r->end, what, &r->wc, x, false) && !kv_err;
}

/* ------------------------------------------------------------- QP setup */
static void kv_qp_event(struct ib_event *ev, void *ctx)
{
	struct kv_end *e = ctx;

	pr_info("# async event on QP %s: %s\n", e->s->tag, ib_event_msg(ev->event));
}

/* A failed create; -EOPNOTSUPP is remembered (test 1 turns it into "unsupported"). */
static void kv_note_err(const char *call, struct kv_side *s, int err)
{
	if (err == -EOPNOTSUPP) {
		if (!kv_unsup[0])
			snprintf(kv_unsup, sizeof(kv_unsup), "%s(%s) = %d (EOPNOTSUPP)", call,
				 s->dev->name, err);
		kv_err = true;
		kv_diag("%s on %s (%s): -EOPNOTSUPP", call, s->tag, s->dev->name);
		return;
	}
	kv_fail("%s on %s (%s): %d", call, s->tag, s->dev->name, err);
}

/* If set, QPs created on side B take their receives from this SRQ. */
static struct ib_srq *kv_srq_b;

static int kv_end_create(struct kv_end *e, struct kv_side *s, enum ib_poll_context poll,
			 u32 wr)
{
	struct ib_srq *srq = s == &kv_b ? kv_srq_b : NULL;
	struct ib_qp_init_attr init = {};
	u32 inl = KV_INLINE;
	int err;

	e->s = s;
	e->cq = ib_alloc_cq(s->dev, e, KV_CQE, 0, poll);
	if (IS_ERR(e->cq)) {
		err = PTR_ERR(e->cq);
		e->cq = NULL;
		kv_note_err("ib_alloc_cq", s, err);
		return err;
	}
again:
	memset(&init, 0, sizeof(init));
	init.event_handler = kv_qp_event;
	init.qp_context = e;
	init.send_cq = e->cq;
	init.recv_cq = e->cq;
	init.cap.max_send_wr = wr;
	init.cap.max_recv_wr = wr;
	init.cap.max_send_sge = KV_SGE;
	init.cap.max_recv_sge = KV_SGE;
	init.cap.max_inline_data = inl;
	init.sq_sig_type = IB_SIGNAL_REQ_WR;
	init.qp_type = IB_QPT_RC;
	init.port_num = KV_PORT;
	init.srq = srq;
	if (srq) {
		init.cap.max_recv_wr = 0;
		init.cap.max_recv_sge = 0;
	}
	e->qp = ib_create_qp(s->pd, &init);
	if (IS_ERR(e->qp) && PTR_ERR(e->qp) == -EINVAL && inl) {
		kv_diag("ib_create_qp on %s with max_inline_data %u: -EINVAL; again without inline data",
			s->tag, inl);
		inl = 0;
		goto again;
	}
	if (IS_ERR(e->qp)) {
		err = PTR_ERR(e->qp);
		e->qp = NULL;
		kv_note_err("ib_create_qp", s, err);
		return err;
	}
	e->cap = init.cap;
	if (e->cap.max_send_wr < wr || (!srq && e->cap.max_recv_wr < wr) ||
	    e->cap.max_send_sge < KV_SGE || (!srq && e->cap.max_recv_sge < KV_SGE)) {
		kv_fail("ib_create_qp on %s granted wr %u/%u sge %u/%u, asked for %u/%u %u/%u",
			s->tag, e->cap.max_send_wr, e->cap.max_recv_wr, e->cap.max_send_sge,
			e->cap.max_recv_sge, wr, wr, KV_SGE, KV_SGE);
		return -EINVAL;
	}
	return 0;
}

/* Returns false if something could not be destroyed (then it is leaked). */
static bool kv_end_destroy(struct kv_end *e)
{
	int err;

	if (e->qp) {
		err = ib_destroy_qp(e->qp);
		if (err) {
			kv_fail("ib_destroy_qp on %s: %d (QP and CQ leaked)", e->s->tag, err);
			return false;
		}
		e->qp = NULL;
	}
	if (e->cq) {
		ib_free_cq(e->cq);
		e->cq = NULL;
	}
	return true;
}

static const char *const kv_state_name[] = {
	[IB_QPS_RESET] = "RESET", [IB_QPS_INIT] = "INIT", [IB_QPS_RTR] = "RTR",
	[IB_QPS_RTS] = "RTS", [IB_QPS_SQD] = "SQD", [IB_QPS_SQE] = "SQE", [IB_QPS_ERR] = "ERR",
};

static const char *kv_state(unsigned int st)
{
	return st < ARRAY_SIZE(kv_state_name) && kv_state_name[st] ? kv_state_name[st] : "?";
}

/*
 * ib_query_qp must report state @want, the granted caps and every attribute
 * of @set named in @mask.
 */
static void kv_query(struct kv_end *e, enum ib_qp_state want, const struct ib_qp_attr *set,
		     int mask, const union ib_gid *dgid)
{
	struct ib_qp_init_attr qi = {};
	struct ib_qp_attr q = {};
	const struct ib_global_route *grh;
	int err;

	err = ib_query_qp(e->qp, &q, IB_QP_STATE | IB_QP_CAP | mask, &qi);
	if (err) {
		kv_fail("ib_query_qp on %s: %d", e->s->tag, err);
		return;
	}
	if (q.qp_state != want)
		kv_fail("query_qp %s: state %s, want %s", e->s->tag, kv_state(q.qp_state),
			kv_state(want));
	if (qi.cap.max_send_wr != e->cap.max_send_wr || qi.cap.max_recv_wr != e->cap.max_recv_wr ||
	    qi.cap.max_send_sge != e->cap.max_send_sge ||
	    qi.cap.max_recv_sge != e->cap.max_recv_sge ||
	    qi.cap.max_inline_data != e->cap.max_inline_data)
		kv_fail("query_qp %s in %s: caps wr %u/%u sge %u/%u inline %u, created with %u/%u %u/%u %u",
			e->s->tag, kv_state(want), qi.cap.max_send_wr, qi.cap.max_recv_wr,
			qi.cap.max_send_sge, qi.cap.max_recv_sge, qi.cap.max_inline_data,
			e->cap.max_send_wr, e->cap.max_recv_wr, e->cap.max_send_sge,
			e->cap.max_recv_sge, e->cap.max_inline_data);
	if (!set)
		return;
#define KV_CMP(bit, f)								\
	do {									\
		if ((mask & (bit)) && q.f != set->f)				\
			kv_fail("query_qp %s in %s: " #f " %u, set %u", e->s->tag,	\
				kv_state(want), (unsigned int)q.f, (unsigned int)set->f); \
	} while (0)
	KV_CMP(IB_QP_PKEY_INDEX, pkey_index);
	KV_CMP(IB_QP_PORT, port_num);
	KV_CMP(IB_QP_ACCESS_FLAGS, qp_access_flags);
	KV_CMP(IB_QP_PATH_MTU, path_mtu);
	KV_CMP(IB_QP_DEST_QPN, dest_qp_num);
	KV_CMP(IB_QP_RQ_PSN, rq_psn);
	KV_CMP(IB_QP_MAX_DEST_RD_ATOMIC, max_dest_rd_atomic);
	KV_CMP(IB_QP_MIN_RNR_TIMER, min_rnr_timer);
	KV_CMP(IB_QP_SQ_PSN, sq_psn);
	KV_CMP(IB_QP_TIMEOUT, timeout);
	KV_CMP(IB_QP_RETRY_CNT, retry_cnt);
	KV_CMP(IB_QP_RNR_RETRY, rnr_retry);
	KV_CMP(IB_QP_MAX_QP_RD_ATOMIC, max_rd_atomic);
#undef KV_CMP
	if (mask & IB_QP_AV) {
		grh = rdma_ah_read_grh(&q.ah_attr);
		if (!(rdma_ah_get_ah_flags(&q.ah_attr) & IB_AH_GRH) ||
		    memcmp(grh->dgid.raw, dgid->raw, sizeof(*dgid)) ||
		    grh->sgid_index != e->s->gid_index)
			kv_fail("query_qp %s in %s: AV dgid %pI6c sgid_index %u grh %d, want %pI6c %d",
				e->s->tag, kv_state(want), grh->dgid.raw, grh->sgid_index,
				!!(rdma_ah_get_ah_flags(&q.ah_attr) & IB_AH_GRH), dgid->raw,
				e->s->gid_index);
	}
}

static int kv_modify(struct kv_end *e, struct ib_qp_attr *at, int mask, const char *step,
		     const union ib_gid *dgid)
{
	struct ib_qp_attr set = *at;	/* ib_modify_qp may write into *at */
	int err;

	err = ib_modify_qp(e->qp, at, mask);
	if (err) {
		kv_fail("ib_modify_qp %s on %s: %d", step, e->s->tag, err);
		return err;
	}
	kv_query(e, set.qp_state, &set, mask & ~IB_QP_STATE, dgid);
	return kv_err ? -EIO : 0;
}

static int kv_to_init(struct kv_end *e)
{
	struct ib_qp_attr at = {
		.qp_state = IB_QPS_INIT, .pkey_index = 0, .port_num = KV_PORT,
		.qp_access_flags = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |
				   IB_ACCESS_REMOTE_READ,
	};

	return kv_modify(e, &at, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT |
			 IB_QP_ACCESS_FLAGS, "RESET->INIT", NULL);
}

static int kv_to_rtr(struct kv_end *e, struct kv_end *peer)
{
	struct ib_qp_attr at = {
		.qp_state = IB_QPS_RTR, .path_mtu = IB_MTU_1024,
		.dest_qp_num = peer->qp->qp_num, .rq_psn = peer->sq_psn,
		.max_dest_rd_atomic = kv_rd, .min_rnr_timer = IB_RNR_TIMER_010_24,
	};

	at.ah_attr.type = RDMA_AH_ATTR_TYPE_ROCE;
	rdma_ah_set_port_num(&at.ah_attr, KV_PORT);
	rdma_ah_set_sl(&at.ah_attr, 0);
	rdma_ah_set_grh(&at.ah_attr, &peer->s->gid, 0, e->s->gid_index, 64, 0);
	memcpy(at.ah_attr.roce.dmac, peer->s->mac, ETH_ALEN);
	return kv_modify(e, &at, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU | IB_QP_DEST_QPN |
			 IB_QP_RQ_PSN | IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER,
			 "INIT->RTR", &peer->s->gid);
}

static int kv_to_rts(struct kv_end *e)
{
	struct ib_qp_attr at = {
		.qp_state = IB_QPS_RTS, .sq_psn = e->sq_psn, .timeout = 18, .retry_cnt = 7,
		.rnr_retry = 7, .max_rd_atomic = kv_rd,
	};

	return kv_modify(e, &at, IB_QP_STATE | IB_QP_TIMEOUT | IB_QP_RETRY_CNT |
			 IB_QP_RNR_RETRY | IB_QP_SQ_PSN | IB_QP_MAX_QP_RD_ATOMIC,
			 "RTR->RTS", NULL);
}

static struct kv_pair *kv_pair_close(struct kv_pair *p)
{
	bool ok;

	if (!p)
		return NULL;
	ok = kv_end_destroy(&p->a);
	ok = kv_end_destroy(&p->b) && ok;
	if (ok)	/* else a live CQ may still call into p->req */
		kfree(p);
	return NULL;
}

/*
 * A connected pair: QP A on dev_a and QP B on dev_b, RESET->INIT->RTR->RTS,
 * checked with ib_query_qp after each step.  A's first PSN is just below
 * the 24-bit wrap, so 64 KiB messages wrap it.
 */
static struct kv_pair *kv_pair_open(const struct kv_opts *o)
{
	struct kv_pair *p = kzalloc(sizeof(*p), GFP_KERNEL);

	if (!p) {
		kv_fail("out of memory");
		return NULL;
	}
	p->a.sq_psn = 0xffffe0;
	p->b.sq_psn = 0x00abc0;
	if (kv_end_create(&p->a, &kv_a, o->poll_a, o->wr) ||
	    kv_end_create(&p->b, &kv_b, o->poll_b, o->wr))
		return kv_pair_close(p);
	kv_query(&p->a, IB_QPS_RESET, NULL, 0, NULL);
	kv_query(&p->b, IB_QPS_RESET, NULL, 0, NULL);
	if (kv_err || kv_to_init(&p->a) || kv_to_init(&p->b) || kv_to_rtr(&p->a, &p->b) ||
	    kv_to_rtr(&p->b, &p->a) || kv_to_rts(&p->a) || kv_to_rts(&p->b))
		return kv_pair_close(p);
	return p;
}

static int kv_post_send(struct kv_end *e, const struct ib_send_wr *wr, const char *what)
{
	const struct ib_send_wr *bad = NULL;
	int err = ib_post_send(e->qp, wr, &bad);

	if (err)
		kv_fail("%s: ib_post_send on %s: %d", what, e->s->tag, err);
	return err;
}

static int kv_post_recv(struct kv_end *e, const struct ib_recv_wr *wr, const char *what)
{
	const struct ib_recv_wr *bad = NULL;
	int err = ib_post_recv(e->qp, wr, &bad);

	if (err)
		kv_fail("%s: ib_post_recv on %s: %d", what, e->s->tag, err);
	return err;
}

/* ---------------------------------------------------------------- tests */

/* 1: create and destroy objects, without connecting anything. */
static void kv_t_objects(void)
{
	static const enum ib_poll_context ctxs[] = {
		IB_POLL_DIRECT, IB_POLL_SOFTIRQ, IB_POLL_WORKQUEUE,
	};
	struct kv_side *sides[] = { &kv_a, &kv_b };
	struct kv_end e = {};
	struct ib_pd *pd;
	unsigned int i, j;

	for (i = 0; i < 2 && !kv_err; i++) {
		pd = ib_alloc_pd(sides[i]->dev, 0);
		if (IS_ERR(pd)) {
			kv_note_err("ib_alloc_pd", sides[i], (int)PTR_ERR(pd));
			break;
		}
		ib_dealloc_pd(pd);
		for (j = 0; j < ARRAY_SIZE(ctxs) && !kv_err; j++) {
			if (!kv_end_create(&e, sides[i], ctxs[j], KV_WR))
				kv_query(&e, IB_QPS_RESET, NULL, 0, NULL);
			if (!kv_err && j == 0)
				kv_diag("QP on %s: max_send_wr %u max_recv_wr %u max_send_sge %u max_recv_sge %u max_inline_data %u",
					sides[i]->tag, e.cap.max_send_wr, e.cap.max_recv_wr,
					e.cap.max_send_sge, e.cap.max_recv_sge,
					e.cap.max_inline_data);
			kv_end_destroy(&e);
		}
	}
	if (kv_unsup[0])
		kv_unsupported = true;
}

/* 2: connecting (kv_pair_open checks every transition) and tearing down. */
static void kv_t_connect(void)
{
	struct kv_pair *p = kv_pair_open(&kv_direct);

	if (p)
		kv_diag("QP A %#x (%s) <-> QP B %#x (%s), path MTU 1024, rd_atomic %d",
			p->a.qp->qp_num, kv_a.dev->name, p->b.qp->qp_num, kv_b.dev->name, kv_rd);
	kv_pair_close(p);
}

/* One SEND (with immediate) of @len bytes from @from to @to, all checked. */
static void kv_send_one(struct kv_end *from, struct kv_end *to, u32 len, bool imm)
{
	struct kv_side *src = from->s, *dst = to->s;
	struct ib_sge ss = kv_sge(src, &src->tx, 0, len), rs = kv_sge(dst, &dst->rx, 0, KV_BUF);
	struct ib_recv_wr rwr = { .wr_id = 0x7ec0 + len, .sg_list = &rs, .num_sge = 1 };
	struct ib_send_wr swr = {
		.wr_id = 0x5e40 + len, .sg_list = &ss, .num_sge = len ? 1 : 0,
		.opcode = imm ? IB_WR_SEND_WITH_IMM : IB_WR_SEND, .send_flags = IB_SEND_SIGNALED,
	};
	u32 im = 0xc0ffee00 + (len & 0xff);
	char what[64];

	if (kv_err)
		return;
	snprintf(what, sizeof(what), "%s %u B %s->%s", imm ? "SEND_WITH_IMM" : "SEND", len,
		 src->tag, dst->tag);
	swr.ex.imm_data = cpu_to_be32(im);
	kv_fill_tx(src);
	kv_clear_rx(dst);
	kv_img_put(0, src->tx.va, len);
	if (kv_post_recv(to, &rwr, what) || kv_post_send(from, &swr, what))
		return;
	kv_expect(from, what, KV_OK(swr.wr_id, IB_WC_SEND, KV_ANY));
	if (imm)
		kv_expect(to, what, KV_OK_IMM(rwr.wr_id, IB_WC_RECV, len, im));
	else
		kv_expect(to, what, KV_OK(rwr.wr_id, IB_WC_RECV, len));
	if (kv_err)
		return;
	kv_check_rx(dst, what);
	kv_cq_empty(from, what);
	kv_cq_empty(to, what);
}

static void kv_send_both(u32 len, bool imm)
{
	struct kv_pair *p = kv_pair_open(&kv_direct);

	if (!p)
		return;
	kv_send_one(&p->a, &p->b, len, imm);
	kv_send_one(&p->b, &p->a, len, imm);
	kv_pair_close(p);
}

static void kv_t_send_1(void) { kv_send_both(1, false); }
static void kv_t_send_4k(void) { kv_send_both(4096, false); }
static void kv_t_send_64k(void) { kv_send_both(KV_BUF, false); }
static void kv_t_send_imm(void) { kv_send_both(4096, true); }
static void kv_t_send_0(void) { kv_send_both(0, false); }

/* Copy bytes [from, from + n) of the stream gathered from 3 SGEs of base. */
static void kv_gather(u8 *dst, const u8 *base, const u32 *off, const u32 *len, u32 from, u32 n)
{
	u32 k;
	int i;

	for (i = 0; i < 3 && n; i++) {
		if (from >= len[i]) {
			from -= len[i];
			continue;
		}
		k = min(len[i] - from, n);
		memcpy(dst, base + off[i] + from, k);
		dst += k;
		n -= k;
		from = 0;
	}
}

/* 3 send SGEs of odd sizes scattered into 3 receive SGEs of other sizes. */
static void kv_t_sge(void)
{
	static const u32 so[] = { 3, 1001, 5003 }, sl[] = { 1, 777, 2049 };
	static const u32 ro[] = { 7, 3001, 9001 }, rl[] = { 1500, 13, 4000 };
	const char *what = "SEND 3 SGEs -> 3 RECV SGEs";
	struct kv_pair *p = kv_pair_open(&kv_direct);
	struct ib_sge ss[3], rs[3];
	struct ib_send_wr swr = {
		.wr_id = 0x5e3, .sg_list = ss, .num_sge = 3, .opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
	};
	struct ib_recv_wr rwr = { .wr_id = 0x7e3, .sg_list = rs, .num_sge = 3 };
	u32 total = 0, pos = 0, n;
	int i;

	if (!p)
		return;
	kv_fill_tx(&kv_a);
	kv_clear_rx(&kv_b);
	for (i = 0; i < 3; i++) {
		ss[i] = kv_sge(&kv_a, &kv_a.tx, so[i], sl[i]);
		rs[i] = kv_sge(&kv_b, &kv_b.rx, ro[i], rl[i]);
		total += sl[i];
	}
	/* the receive SGEs fill in order */
	for (i = 0; i < 3 && pos < total; i++) {
		n = min(rl[i], total - pos);
		kv_gather(kv_img + ro[i], kv_a.tx.va, so, sl, pos, n);
		pos += n;
	}
	if (!kv_post_recv(&p->b, &rwr, what) && !kv_post_send(&p->a, &swr, what)) {
		kv_expect(&p->a, what, KV_OK(swr.wr_id, IB_WC_SEND, KV_ANY));
		kv_expect(&p->b, what, KV_OK(rwr.wr_id, IB_WC_RECV, total));
		if (!kv_err)
			kv_check_rx(&kv_b, what);
	}
	kv_pair_close(p);
}

/* Inline SEND: the source is never mapped and is overwritten right after posting. */
static void kv_t_inline(void)
{
	const char *what = "inline SEND A->B";
	struct kv_pair *p = kv_pair_open(&kv_direct);
	struct ib_sge ss[2], rs;
	struct ib_send_wr swr = {
		.wr_id = 0x1a1, .sg_list = ss, .num_sge = 2, .opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED | IB_SEND_INLINE,
	};
	struct ib_recv_wr rwr = { .wr_id = 0x1a2, .sg_list = &rs, .num_sge = 1 };
	u32 n, i, k;

	if (!p)
		return;
	n = min_t(u32, p->a.cap.max_inline_data, KV_INLINE);
	if (n < 2) {
		kv_skip_why("QP A's max_inline_data is %u", p->a.cap.max_inline_data);
		goto out;
	}
	for (i = 0; i < 256; i++)
		kv_inl[i] = (u8)(kv_seed * 3 + i * 5);
	kv_seed++;
	/*
	 * For inline data the SGE address is a kernel virtual address (the
	 * CPU copies it while posting); the lkey is not used.
	 */
	k = n / 3;
	ss[0] = (struct ib_sge){ .addr = (uintptr_t)kv_inl, .length = k,
				 .lkey = kv_a.pd->local_dma_lkey };
	ss[1] = (struct ib_sge){ .addr = (uintptr_t)(kv_inl + 100), .length = n - k,
				 .lkey = kv_a.pd->local_dma_lkey };
	kv_clear_rx(&kv_b);
	kv_img_put(0, kv_inl, k);
	kv_img_put(k, kv_inl + 100, n - k);
	rs = kv_sge(&kv_b, &kv_b.rx, 0, KV_BUF);
	if (kv_post_recv(&p->b, &rwr, what) || kv_post_send(&p->a, &swr, what))
		goto out;
	memset(kv_inl, 0xee, 256);
	kv_expect(&p->a, what, KV_OK(swr.wr_id, IB_WC_SEND, KV_ANY));
	kv_expect(&p->b, what, KV_OK(rwr.wr_id, IB_WC_RECV, n));
	if (!kv_err)
		kv_check_rx(&kv_b, what);
	kv_diag("%u bytes inline (max_inline_data %u)", n, p->a.cap.max_inline_data);
out:
	kv_pair_close(p);
}

/* RDMA WRITE of @len from A's tx into B's rx at @off (+ immediate). */
static void kv_write(u32 len, u32 off, bool imm)
{
	const char *what = imm ? "RDMA_WRITE_WITH_IMM A->B" : "RDMA WRITE A->B";
	struct kv_pair *p = kv_pair_open(&kv_direct);
	struct ib_sge ss = kv_sge(&kv_a, &kv_a.tx, 0, len);
	/* WRITE_WITH_IMM consumes a receive but puts nothing in its buffer */
	struct ib_sge rs = kv_sge(&kv_b, &kv_b.rx, KV_RX_LEN - 256, 256);
	struct ib_recv_wr rwr = { .wr_id = 0x7e1, .sg_list = &rs, .num_sge = 1 };
	struct ib_rdma_wr w = {
		.wr = { .wr_id = 0x3e1, .sg_list = &ss, .num_sge = 1,
			.opcode = imm ? IB_WR_RDMA_WRITE_WITH_IMM : IB_WR_RDMA_WRITE,
			.send_flags = IB_SEND_SIGNALED, .ex.imm_data = cpu_to_be32(0x1234abcd) },
		.remote_addr = kv_b.rx.dma + off, .rkey = kv_b.pd->unsafe_global_rkey,
	};

	if (!p)
		return;
	kv_fill_tx(&kv_a);
	kv_clear_rx(&kv_b);
	kv_img_put(off, kv_a.tx.va, len);
	if ((!imm || !kv_post_recv(&p->b, &rwr, what)) && !kv_post_send(&p->a, &w.wr, what)) {
		kv_expect(&p->a, what, KV_OK(w.wr.wr_id, IB_WC_RDMA_WRITE, KV_ANY));
		if (imm)
			kv_expect(&p->b, what,
				  KV_OK_IMM(rwr.wr_id, IB_WC_RECV_RDMA_WITH_IMM, len, 0x1234abcd));
		if (!kv_err) {
			kv_check_rx(&kv_b, what);
			kv_cq_empty(&p->a, what);
			kv_cq_empty(&p->b, what);
		}
	}
	kv_pair_close(p);
}

static void kv_t_write(void) { kv_write(KV_BUF, 3000, false); }
static void kv_t_write_imm(void) { kv_write(4096, 0, true); }

/* RDMA READ 64 KiB from B's tx into A's rx at an odd offset. */
static void kv_t_read(void)
{
	const char *what = "RDMA READ A<-B";
	struct kv_pair *p = kv_pair_open(&kv_direct);
	struct ib_sge ls = kv_sge(&kv_a, &kv_a.rx, 1001, KV_BUF);
	struct ib_rdma_wr w = {
		.wr = { .wr_id = 0x4ead, .sg_list = &ls, .num_sge = 1,
			.opcode = IB_WR_RDMA_READ, .send_flags = IB_SEND_SIGNALED },
		.remote_addr = kv_b.tx.dma, .rkey = kv_b.pd->unsafe_global_rkey,
	};

	if (!p)
		return;
	kv_fill_tx(&kv_b);
	kv_clear_rx(&kv_a);
	kv_img_put(1001, kv_b.tx.va, KV_BUF);
	if (!kv_post_send(&p->a, &w.wr, what)) {
		kv_expect(&p->a, what, KV_OK(w.wr.wr_id, IB_WC_RDMA_READ, KV_BUF));
		if (!kv_err) {
			kv_check_rx(&kv_a, what);
			kv_cq_empty(&p->a, what);
			kv_cq_empty(&p->b, what);
		}
	}
	kv_pair_close(p);
}

/* 32 SENDs posted as one chain, only the last signaled. */
struct kv_chain {
	struct ib_send_wr swr[KV_CHAIN];
	struct ib_recv_wr rwr[KV_CHAIN];
	struct ib_sge ss[KV_CHAIN], rs[KV_CHAIN];
};

static void kv_t_chain(void)
{
	const u32 slot = KV_BUF / KV_CHAIN;
	struct kv_pair *p = kv_pair_open(&kv_direct);
	struct kv_chain *c = kzalloc(sizeof(*c), GFP_KERNEL);
	char what[48];
	int i;

	if (!p || !c) {
		if (!c)
			kv_fail("out of memory");
		goto out;
	}
	kv_fill_tx(&kv_a);
	kv_clear_rx(&kv_b);
	for (i = 0; i < KV_CHAIN; i++) {
		u32 len = 1 + i * 61;

		c->rs[i] = kv_sge(&kv_b, &kv_b.rx, i * slot, slot);
		c->rwr[i] = (struct ib_recv_wr){ .wr_id = 0x7000 + i, .sg_list = &c->rs[i],
						 .num_sge = 1 };
		c->ss[i] = kv_sge(&kv_a, &kv_a.tx, i * slot, len);
		c->swr[i] = (struct ib_send_wr){ .wr_id = 0x5000 + i, .sg_list = &c->ss[i],
						 .num_sge = 1, .opcode = IB_WR_SEND };
		if (i + 1 < KV_CHAIN) {
			c->rwr[i].next = &c->rwr[i + 1];
			c->swr[i].next = &c->swr[i + 1];
		}
		kv_img_put(i * slot, (u8 *)kv_a.tx.va + i * slot, len);
	}
	c->swr[KV_CHAIN - 1].send_flags = IB_SEND_SIGNALED;
	if (kv_post_recv(&p->b, c->rwr, "32 RECVs") || kv_post_send(&p->a, c->swr, "32 SENDs"))
		goto out;
	kv_expect(&p->a, "the last of 32 SENDs", KV_OK(0x5000 + KV_CHAIN - 1, IB_WC_SEND, KV_ANY));
	for (i = 0; i < KV_CHAIN && !kv_err; i++) {
		snprintf(what, sizeof(what), "RECV %d of 32", i);
		kv_expect(&p->b, what, KV_OK(0x7000 + i, IB_WC_RECV, 1 + i * 61));
	}
	if (!kv_err) {
		kv_check_rx(&kv_b, "32 chained SENDs");
		kv_cq_empty(&p->a, "unsignaled SENDs");
		kv_cq_empty(&p->b, "32 RECVs");
	}
out:
	kfree(c);
	kv_pair_close(p);
}

/*
 * ib_cqe completions: SEND 4 KiB A->B and B->A and an RDMA READ of 4 KiB,
 * every WR with a wr_cqe whose .done checks in and records its context.
 */
static void kv_cqe_traffic(const struct kv_opts *o)
{
	struct kv_pair *p = kv_pair_open(o);
	struct kv_req *r;
	struct ib_sge s0, s1, s2, s3, s4;
	struct ib_recv_wr rb = { .sg_list = &s0, .num_sge = 1 }, ra = { .sg_list = &s2, .num_sge = 1 };
	struct ib_send_wr sa = { .sg_list = &s1, .num_sge = 1, .opcode = IB_WR_SEND,
				 .send_flags = IB_SEND_SIGNALED };
	struct ib_send_wr sb = sa;
	struct ib_rdma_wr rd = {
		.wr = { .sg_list = &s4, .num_sge = 1, .opcode = IB_WR_RDMA_READ,
			.send_flags = IB_SEND_SIGNALED },
		.rkey = kv_b.pd->unsafe_global_rkey,
	};
	int i;

	if (!p)
		return;
	r = p->req;
	sb.sg_list = &s3;
	/* B's tx pattern: SEND B->A and the READ source */
	kv_fill_tx(&kv_a);
	kv_fill_tx(&kv_b);
	kv_clear_rx(&kv_b);
	kv_img_put(0, kv_a.tx.va, 4096);
	rb.wr_cqe = kv_req_init(&r[0], &p->b);
	s0 = kv_sge(&kv_b, &kv_b.rx, 0, 4096);
	sa.wr_cqe = kv_req_init(&r[1], &p->a);
	s1 = kv_sge(&kv_a, &kv_a.tx, 0, 4096);
	if (kv_post_recv(&p->b, &rb, "RECV B") || kv_post_send(&p->a, &sa, "SEND A->B"))
		goto out;
	kv_req_wait(&r[1], "SEND A->B", KV_OK(0, IB_WC_SEND, KV_ANY));
	kv_req_wait(&r[0], "RECV on B", KV_OK(0, IB_WC_RECV, 4096));
	if (kv_err)
		goto out;
	kv_check_rx(&kv_b, "SEND A->B");

	kv_clear_rx(&kv_a);
	kv_img_put(0, kv_b.tx.va, 4096);
	kv_img_put(8192, (u8 *)kv_b.tx.va + 4096, 4096);
	ra.wr_cqe = kv_req_init(&r[2], &p->a);
	s2 = kv_sge(&kv_a, &kv_a.rx, 0, 4096);
	sb.wr_cqe = kv_req_init(&r[3], &p->b);
	s3 = kv_sge(&kv_b, &kv_b.tx, 0, 4096);
	rd.wr.wr_cqe = kv_req_init(&r[4], &p->a);
	s4 = kv_sge(&kv_a, &kv_a.rx, 8192, 4096);
	rd.remote_addr = kv_b.tx.dma + 4096;
	if (kv_post_recv(&p->a, &ra, "RECV A") || kv_post_send(&p->b, &sb, "SEND B->A") ||
	    kv_post_send(&p->a, &rd.wr, "READ A<-B"))
		goto out;
	kv_req_wait(&r[3], "SEND B->A", KV_OK(0, IB_WC_SEND, KV_ANY));
	kv_req_wait(&r[2], "RECV on A", KV_OK(0, IB_WC_RECV, 4096));
	kv_req_wait(&r[4], "READ A<-B", KV_OK(0, IB_WC_RDMA_READ, 4096));
	if (kv_err)
		goto out;
	kv_check_rx(&kv_a, "SEND B->A + READ A<-B");
	for (i = 0; i < 5; i++) {
		bool want = r[i].end->cq->poll_ctx == IB_POLL_SOFTIRQ;

		if (r[i].softirq != want)
			kv_fail("completion %d on %s: .done ran %sin softirq context", i,
				r[i].end->s->tag, r[i].softirq ? "" : "not ");
	}
out:
	kv_pair_close(p);
}

static void kv_t_cqe_direct(void)
{
	kv_cqe_traffic(&kv_direct);
}

static void kv_t_cqe_async(void)
{
	static const struct kv_opts o = { IB_POLL_SOFTIRQ, IB_POLL_WORKQUEUE, KV_WR };

	kv_cqe_traffic(&o);
}

/* Wait until ib_query_qp reports ERR. */
static void kv_wait_err(struct kv_end *e, const char *what)
{
	unsigned long deadline = kv_deadline();
	struct ib_qp_init_attr qi;
	struct ib_qp_attr q;

	for (;;) {
		if (ib_query_qp(e->qp, &q, IB_QP_STATE, &qi)) {
			kv_fail("%s: ib_query_qp on %s failed", what, e->s->tag);
			return;
		}
		if (q.qp_state == IB_QPS_ERR)
			return;
		if (kv_expired(deadline)) {
			kv_fail("%s: QP %s in %s, not ERR, after %u ms", what, e->s->tag,
				kv_state(q.qp_state), timeout_ms);
			return;
		}
		kv_nap();
	}
}

/*
 * A WR with a bad lkey (SEND source, or RDMA READ sink) must complete with
 * LOC_PROT_ERR, the next WR is flushed, the QP is in ERR and receives
 * posted afterwards are flushed.  B's memory is untouched.
 */
static void kv_bad_lkey(bool read)
{
	const char *what = read ? "RDMA READ into a bad lkey" : "SEND from a bad lkey";
	struct kv_pair *p = kv_pair_open(&kv_direct);
	u32 bad = kv_a.pd->local_dma_lkey ^ 0xffffff00;
	struct ib_sge s1 = kv_sge(&kv_a, read ? &kv_a.rx : &kv_a.tx, 0, 4096);
	struct ib_sge s2 = kv_sge(&kv_a, read ? &kv_a.rx : &kv_a.tx, 8192, 64);
	struct ib_sge rsb = kv_sge(&kv_b, &kv_b.rx, 0, KV_BUF);
	struct ib_sge rsa = kv_sge(&kv_a, &kv_a.rx, 16384, 64);
	struct ib_rdma_wr w2 = {
		.wr = { .wr_id = 2, .sg_list = &s2, .num_sge = 1, .send_flags = IB_SEND_SIGNALED,
			.opcode = read ? IB_WR_RDMA_READ : IB_WR_SEND },
		.remote_addr = kv_b.tx.dma + 8192, .rkey = kv_b.pd->unsafe_global_rkey,
	};
	struct ib_rdma_wr w1 = {
		.wr = { .wr_id = 1, .next = &w2.wr, .sg_list = &s1, .num_sge = 1,
			.send_flags = IB_SEND_SIGNALED,
			.opcode = read ? IB_WR_RDMA_READ : IB_WR_SEND },
		.remote_addr = kv_b.tx.dma, .rkey = kv_b.pd->unsafe_global_rkey,
	};
	struct ib_recv_wr ra2 = { .wr_id = 0x7a2, .sg_list = &rsa, .num_sge = 1 };
	struct ib_recv_wr ra1 = { .wr_id = 0x7a1, .next = &ra2, .sg_list = &rsa, .num_sge = 1 };
	struct ib_recv_wr rb = { .wr_id = 0x7b, .sg_list = &rsb, .num_sge = 1 };
	struct ib_wc wc;

	if (!p)
		return;
	s1.lkey = bad;
	kv_fill_tx(&kv_a);
	kv_fill_tx(&kv_b);
	kv_clear_rx(&kv_a);
	kv_clear_rx(&kv_b);
	if ((!read && kv_post_recv(&p->b, &rb, what)) || kv_post_send(&p->a, &w1.wr, what))
		goto out;
	if (kv_poll(&p->a, &wc, kv_deadline())) {
		kv_fail("%s: no completion within %u ms", what, timeout_ms);
		goto out;
	}
	if (!read && wc.status == IB_WC_WR_FLUSH_ERR && wc.wr_id == 1 && wc.qp == p->a.qp &&
	    kv_a.dev->ops.driver_id == RDMA_DRIVER_RXE) {
		/*
		 * rdma_rxe (6.12) moves the QP to ERR when its requester
		 * fails to gather, and its completer then flushes the failed
		 * WQE too.  IBA wants the failed WR completed with its error;
		 * everything else is still checked.
		 */
		kv_skip_why("rdma_rxe deviation: the failed SEND completes with WR_FLUSH_ERR, not LOC_PROT_ERR");
	} else {
		kv_wc_check(&p->a, what, &wc, KV_ERR(1, IB_WC_LOC_PROT_ERR), true);
	}
	kv_expect(&p->a, "the WR behind it", KV_ERR(2, IB_WC_WR_FLUSH_ERR));
	if (kv_err)
		goto out;
	kv_wait_err(&p->a, what);
	if (kv_err || kv_post_recv(&p->a, &ra1, "2 RECVs in ERR"))
		goto out;
	kv_expect(&p->a, "RECV 1 posted in ERR", KV_ERR(0x7a1, IB_WC_WR_FLUSH_ERR));
	kv_expect(&p->a, "RECV 2 posted in ERR", KV_ERR(0x7a2, IB_WC_WR_FLUSH_ERR));
	if (kv_err)
		goto out;
	kv_cq_empty(&p->a, what);
	kv_cq_empty(&p->b, what);
	/* nothing reached B; nothing was written through the bad lkey */
	memset(kv_img, KV_CANARY, KV_RX_LEN);
	kv_check_rx(&kv_b, what);
	if (read) {
		kv_to_cpu(&kv_a, &kv_a.rx);
		if (memchr_inv(kv_a.rx.va, KV_CANARY, 4096))
			kv_fail("%s: the READ wrote through the bad lkey", what);
	}
out:
	kv_pair_close(p);
}

static void kv_t_bad_lkey_send(void) { kv_bad_lkey(false); }
static void kv_t_bad_lkey_read(void) { kv_bad_lkey(true); }

/*
 * A ULP that reposts every receive buffer returned to its pool while its
 * QP is in ERR, as cifs's SMB Direct does on unmount (smbd_post_send_credits
 * takes buffers and posts them until the pool is empty; recv_done puts a
 * flushed buffer back).  Receives posted in ERR complete with WR_FLUSH_ERR,
 * but not from inside ib_post_recv: a flush done there, its softirq
 * completion run when the post re-enables bottom halves, hands the buffer
 * back before the loop looks again, and the loop never ends (the unmount
 * hung in disable_work_sync).  HCAs and rdma_rxe flush asynchronously.
 */
#define KV_RP_BUFS 32
static atomic_t kv_rp_free, kv_rp_flushed, kv_rp_bad;

static void kv_rp_done(struct ib_cq *cq, struct ib_wc *wc)
{
	if (wc->status != IB_WC_WR_FLUSH_ERR)
		atomic_inc(&kv_rp_bad);
	atomic_inc(&kv_rp_flushed);
	atomic_inc(&kv_rp_free);
}

static struct ib_cqe kv_rp_cqe = { .done = kv_rp_done };

static void kv_t_err_repost(void)
{
	static const struct kv_opts o = { IB_POLL_SOFTIRQ, IB_POLL_DIRECT, KV_WR };
	struct kv_pair *p = kv_pair_open(&o);
	struct ib_sge sge = kv_sge(&kv_a, &kv_a.rx, 0, 64);
	struct ib_recv_wr wr = { .wr_cqe = &kv_rp_cqe, .sg_list = &sge, .num_sge = 1 };
	struct ib_qp_attr at = { .qp_state = IB_QPS_ERR };
	unsigned long deadline;
	int posted = 0;

	if (!p)
		return;
	atomic_set(&kv_rp_free, KV_RP_BUFS);
	atomic_set(&kv_rp_flushed, 0);
	atomic_set(&kv_rp_bad, 0);
	if (kv_modify(&p->a, &at, IB_QP_STATE, "to ERR", NULL))
		goto out;
	while (atomic_dec_if_positive(&kv_rp_free) >= 0) {
		if (kv_post_recv(&p->a, &wr, "a RECV posted in ERR"))
			break;
		if (++posted >= 64 * KV_RP_BUFS) {
			kv_fail("%d receives posted from a pool of %d and it never ran dry: each was flushed inside ib_post_recv",
				posted, KV_RP_BUFS);
			break;
		}
	}
	kv_diag("%d receives posted before the pool of %d ran dry", posted, KV_RP_BUFS);
	deadline = kv_deadline();
	while (atomic_read(&kv_rp_flushed) < posted && !kv_expired(deadline))
		kv_nap();
	if (atomic_read(&kv_rp_flushed) != posted)
		kv_fail("%d of %d receives flushed within %u ms", atomic_read(&kv_rp_flushed), posted, timeout_ms);
	if (atomic_read(&kv_rp_bad))
		kv_fail("%d receives completed with a status other than WR_FLUSH_ERR", atomic_read(&kv_rp_bad));
out:
	kv_pair_close(p);
}

/*
 * A consumer that moves its QP to ERR as soon as the receive of a SEND
 * completes: rdma_server's peer does it from user space (rdma_disconnect
 * right after polling), a kernel ULP may do it in its .done, as here.  The
 * ACK of that SEND is still owed: the requester's SEND must complete with
 * SUCCESS, not be resent to a QP in ERR until its retries run out (with
 * retry_cnt 7, forever: rdma_server hung so in CI).  B's .done runs from
 * the IRQ_POLL softirq, before the softirq work item that sends the ACKs
 * of a receive batch: B enters ERR with that ACK still queued.
 */
static struct kv_end *kv_ae_end;
static atomic_t kv_ae_calls;
static int kv_ae_err;
static enum ib_wc_status kv_ae_status;
static DECLARE_COMPLETION(kv_ae_done);

static void kv_ae_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct ib_qp_attr at = { .qp_state = IB_QPS_ERR };

	if (atomic_inc_return(&kv_ae_calls) == 1) {
		kv_ae_status = wc->status;
		kv_ae_err = ib_modify_qp(kv_ae_end->qp, &at, IB_QP_STATE);
		complete(&kv_ae_done);
	}
}

static struct ib_cqe kv_ae_cqe = { .done = kv_ae_recv_done };

static void kv_t_ack_then_err(void)
{
	static const struct kv_opts o = { IB_POLL_DIRECT, IB_POLL_SOFTIRQ, KV_WR };
	struct kv_pair *p = kv_pair_open(&o);
	struct ib_sge ss, rs;
	struct ib_recv_wr rwr = { .wr_cqe = &kv_ae_cqe, .num_sge = 1 };
	struct ib_send_wr swr = {
		.wr_id = 0xac4e, .num_sge = 1, .opcode = IB_WR_SEND, .send_flags = IB_SEND_SIGNALED,
	};

	if (!p)
		return;
	ss = kv_sge(&kv_a, &kv_a.tx, 0, 256);
	rs = kv_sge(&kv_b, &kv_b.rx, 0, 256);
	rwr.sg_list = &rs;
	swr.sg_list = &ss;
	kv_ae_end = &p->b;
	atomic_set(&kv_ae_calls, 0);
	kv_ae_err = 0;
	reinit_completion(&kv_ae_done);
	if (kv_post_recv(&p->b, &rwr, "B's RECV") || kv_post_send(&p->a, &swr, "A's SEND"))
		goto out;
	if (!wait_for_completion_timeout(&kv_ae_done, msecs_to_jiffies(timeout_ms))) {
		kv_fail("B's receive did not complete within %u ms", timeout_ms);
		goto out;
	}
	if (kv_ae_status != IB_WC_SUCCESS || kv_ae_err)
		kv_fail("B's receive: status %s; ib_modify_qp to ERR from its .done: %d",
			ib_wc_status_msg(kv_ae_status), kv_ae_err);
	kv_expect(&p->a, "A's SEND, acknowledged by B before its ERR",
		  KV_OK(swr.wr_id, IB_WC_SEND, KV_ANY));
	kv_cq_empty(&p->a, "after A's SEND");
out:
	kv_pair_close(p);
}

/*
 * Posting beyond the queue depth: the chain stops at the first WR that does
 * not fit, with -ENOMEM and *bad_wr pointing at it.  B has no receives, so
 * A's first SEND waits in RNR (rnr_retry 7 = forever) and nothing completes
 * while posting.  Then A goes to ERR and every posted WR is flushed, in
 * order per queue.
 */
static void kv_t_depth(void)
{
	static const struct kv_opts o = { IB_POLL_DIRECT, IB_POLL_DIRECT, 16 };
	struct kv_pair *p = kv_pair_open(&o);
	struct ib_send_wr *swr = NULL;
	struct ib_recv_wr *rwr = NULL;
	const struct ib_send_wr *sbad;
	const struct ib_recv_wr *rbad;
	struct ib_sge ss, rs;
	struct ib_qp_attr at = { .qp_state = IB_QPS_ERR };
	u32 ns, nr, i, si = 0, ri = 0;
	struct ib_wc wc;
	unsigned long deadline;
	int err;

	if (!p)
		return;
	ns = p->a.cap.max_send_wr;
	nr = p->a.cap.max_recv_wr;
	if (ns + nr > KV_CQE) {
		kv_skip_why("QP caps %u + %u exceed the test's CQ of %d", ns, nr, KV_CQE);
		goto out;
	}
	swr = kcalloc(ns + 1, sizeof(*swr), GFP_KERNEL);
	rwr = kcalloc(nr + 1, sizeof(*rwr), GFP_KERNEL);
	if (!swr || !rwr) {
		kv_fail("out of memory");
		goto out;
	}
	ss = kv_sge(&kv_a, &kv_a.tx, 0, 64);
	rs = kv_sge(&kv_a, &kv_a.rx, 0, 64);
	for (i = 0; i <= nr; i++)
		rwr[i] = (struct ib_recv_wr){ .wr_id = 0x7000 + i, .sg_list = &rs, .num_sge = 1,
					      .next = i < nr ? &rwr[i + 1] : NULL };
	for (i = 0; i <= ns; i++)
		swr[i] = (struct ib_send_wr){ .wr_id = 0x5000 + i, .sg_list = &ss, .num_sge = 1,
					      .opcode = IB_WR_SEND, .send_flags = IB_SEND_SIGNALED,
					      .next = i < ns ? &swr[i + 1] : NULL };
	rbad = NULL;
	err = ib_post_recv(p->a.qp, rwr, &rbad);
	if (err != -ENOMEM || rbad != &rwr[nr])
		kv_fail("%u+1 RECVs (max_recv_wr %u): ib_post_recv %d, bad_wr at WR %td; want -ENOMEM at %u",
			nr, nr, err, rbad ? rbad - rwr : -1, nr);
	sbad = NULL;
	err = ib_post_send(p->a.qp, swr, &sbad);
	if (err != -ENOMEM || sbad != &swr[ns])
		kv_fail("%u+1 SENDs (max_send_wr %u): ib_post_send %d, bad_wr at WR %td; want -ENOMEM at %u",
			ns, ns, err, sbad ? sbad - swr : -1, ns);
	/* still full: a single WR is refused as well */
	rbad = NULL;
	err = ib_post_recv(p->a.qp, &rwr[nr], &rbad);
	if (err != -ENOMEM || rbad != &rwr[nr])
		kv_fail("one more RECV: ib_post_recv %d, want -ENOMEM and bad_wr on it", err);
	sbad = NULL;
	err = ib_post_send(p->a.qp, &swr[ns], &sbad);
	if (err != -ENOMEM || sbad != &swr[ns])
		kv_fail("one more SEND: ib_post_send %d, want -ENOMEM and bad_wr on it", err);
	if (kv_err)
		goto out;
	err = ib_modify_qp(p->a.qp, &at, IB_QP_STATE);
	if (err) {
		kv_fail("ib_modify_qp A -> ERR: %d", err);
		goto out;
	}
	kv_query(&p->a, IB_QPS_ERR, NULL, 0, NULL);
	deadline = kv_deadline();
	while (!kv_err && si + ri < ns + nr) {
		if (kv_poll(&p->a, &wc, deadline)) {
			kv_fail("flush after ERR: %u of %u SENDs and %u of %u RECVs within %u ms",
				si, ns, ri, nr, timeout_ms);
			break;
		}
		if (wc.wr_id >= 0x5000 && wc.wr_id < 0x5000 + ns)
			kv_wc_check(&p->a, "flushed SEND", &wc,
				    KV_ERR(0x5000 + si++, IB_WC_WR_FLUSH_ERR), true);
		else
			kv_wc_check(&p->a, "flushed RECV", &wc,
				    KV_ERR(0x7000 + ri++, IB_WC_WR_FLUSH_ERR), true);
	}
	kv_cq_empty(&p->a, "after the flush");
	kv_cq_empty(&p->b, "B (had no receives)");
	kv_diag("max_send_wr %u, max_recv_wr %u: both queues filled, one more refused, all flushed",
		ns, nr);
out:
	kfree(swr);
	kfree(rwr);
	kv_pair_close(p);
}

static struct ib_srq *kv_srq_cur;
static atomic_t kv_srq_events;

static void kv_srq_event(struct ib_event *ev, void *ctx)
{
	if (ev->event == IB_EVENT_SRQ_LIMIT_REACHED && ev->element.srq == kv_srq_cur)
		atomic_inc(&kv_srq_events);
	else
		pr_info("# unexpected SRQ event: %s\n", ib_event_msg(ev->event));
}

/*
 * 19: an SRQ on B: bad attributes (max_wr 0, limit above the capacity) ->
 * -EINVAL; limit 2 armed; QP B (with the SRQ) gets 3 SENDs of 3000 B from A
 * into 3 of 4 buffers posted with ib_post_srq_recv (ib_post_recv on QP B ->
 * -EINVAL): data, wr_ids in order and qp checked; IB_EVENT_SRQ_LIMIT_REACHED
 * once, limit disarmed; resized to 16 with one WQE posted (it is used
 * first, then 4 posted after the resize; shrinking to 2 with 5 posted ->
 * -EINVAL); QP B to ERR flushes nothing of the SRQ.
 */
static void kv_t_srq(void)
{
	struct ib_srq_init_attr init = {
		.event_handler = kv_srq_event,
		.attr = { .max_wr = 0, .max_sge = 1 },
		.srq_type = IB_SRQT_BASIC,
	};
	struct kv_side *src = &kv_a, *dst = &kv_b;
	struct ib_srq_attr at = {};
	struct ib_qp_attr qa = { .qp_state = IB_QPS_ERR };
	struct ib_recv_wr rwr[4] = {}, bwr = {};
	struct ib_sge rs[8];
	const struct ib_recv_wr *bad = NULL;
	struct kv_pair *p = NULL;
	const u32 len = 3000;
	const char *what = "SRQ: 3 SENDs A->B";
	unsigned long deadline;
	struct ib_srq *srq;
	int i, err;

	srq = ib_create_srq(dst->pd, &init);
	if (!IS_ERR(srq)) {
		kv_fail("ib_create_srq with max_wr 0 succeeded");
		ib_destroy_srq(srq);
		return;
	}
	if (PTR_ERR(srq) == -EOPNOTSUPP) {
		kv_note_err("ib_create_srq", dst, -EOPNOTSUPP);
		return;
	}
	if (PTR_ERR(srq) != -EINVAL)
		kv_fail("ib_create_srq with max_wr 0: %ld, want -EINVAL", PTR_ERR(srq));
	init.attr.max_wr = 4;
	srq = ib_create_srq(dst->pd, &init);
	if (IS_ERR(srq)) {
		kv_note_err("ib_create_srq", dst, (int)PTR_ERR(srq));
		return;
	}
	kv_srq_cur = srq;
	atomic_set(&kv_srq_events, 0);
	if (init.attr.max_wr < 4 || init.attr.max_sge < 1)
		kv_fail("ib_create_srq granted max_wr %u max_sge %u, asked for 4/1",
			init.attr.max_wr, init.attr.max_sge);
	at.srq_limit = init.attr.max_wr + 1;
	err = ib_modify_srq(srq, &at, IB_SRQ_LIMIT);
	if (err != -EINVAL)
		kv_fail("ib_modify_srq limit %u (capacity %u): %d, want -EINVAL", at.srq_limit,
			init.attr.max_wr, err);
	at.srq_limit = 2;
	err = ib_modify_srq(srq, &at, IB_SRQ_LIMIT);
	if (err)
		kv_fail("ib_modify_srq limit 2: %d", err);
	memset(&at, 0, sizeof(at));
	err = ib_query_srq(srq, &at);
	if (err || at.srq_limit != 2 || at.max_wr != init.attr.max_wr)
		kv_fail("ib_query_srq: %d, limit %u max_wr %u (want 2, %u)", err, at.srq_limit,
			at.max_wr, init.attr.max_wr);
	if (kv_err)
		goto out;
	kv_srq_b = srq;
	p = kv_pair_open(&kv_direct);
	kv_srq_b = NULL;
	if (!p)
		goto out;

	kv_fill_tx(src);
	kv_clear_rx(dst);
	for (i = 0; i < ARRAY_SIZE(rs); i++)
		rs[i] = kv_sge(dst, &dst->rx, i * 8192, 8192);
	bwr = (struct ib_recv_wr){ .wr_id = 1, .sg_list = rs, .num_sge = 1 };
	err = ib_post_recv(p->b.qp, &bwr, &bad);
	if (err != -EINVAL)
		kv_fail("ib_post_recv on QP B (with an SRQ): %d, want -EINVAL", err);
	if (init.attr.max_sge < ARRAY_SIZE(rs)) {
		bwr.num_sge = init.attr.max_sge + 1;
		err = ib_post_srq_recv(srq, &bwr, &bad);
		if (err != -EINVAL || bad != &bwr)
			kv_fail("ib_post_srq_recv with %d SGEs (max %u): %d, want -EINVAL",
				bwr.num_sge, init.attr.max_sge, err);
	}
	for (i = 0; i < 4; i++)
		rwr[i] = (struct ib_recv_wr){ .wr_id = 0x5300 + i, .sg_list = &rs[i], .num_sge = 1,
					      .next = i < 3 ? &rwr[i + 1] : NULL };
	err = ib_post_srq_recv(srq, rwr, &bad);
	if (err)
		kv_fail("ib_post_srq_recv of 4: %d", err);
	for (i = 0; i < 3 && !kv_err; i++) {
		struct ib_sge ss = kv_sge(src, &src->tx, i * len, len);
		struct ib_send_wr swr = { .wr_id = 0x5e50 + i, .sg_list = &ss, .num_sge = 1,
					  .opcode = IB_WR_SEND, .send_flags = IB_SEND_SIGNALED };

		kv_img_put(i * 8192, (u8 *)src->tx.va + i * len, len);
		kv_post_send(&p->a, &swr, what);
	}
	for (i = 0; i < 3; i++)
		kv_expect(&p->a, what, KV_OK(0x5e50 + i, IB_WC_SEND, KV_ANY));
	for (i = 0; i < 3; i++)
		kv_expect(&p->b, what, KV_OK(0x5300 + i, IB_WC_RECV, len));
	if (kv_err)
		goto out;
	kv_check_rx(dst, what);
	deadline = kv_deadline();
	while (atomic_read(&kv_srq_events) == 0 && !kv_expired(deadline))
		kv_nap();
	if (atomic_read(&kv_srq_events) != 1)
		kv_fail("%d IB_EVENT_SRQ_LIMIT_REACHED events with 1 of 4 left (limit 2), want 1",
			atomic_read(&kv_srq_events));
	err = ib_query_srq(srq, &at);
	if (err || at.srq_limit != 0)
		kv_fail("ib_query_srq after the event: %d, limit %u (want 0: disarmed)", err,
			at.srq_limit);
	kv_cq_empty(&p->a, what);
	kv_cq_empty(&p->b, what);

	/* Resize with one WQE posted: it moves to the new ring; 4 more fit
	 * where the old ring had room for 3; shrinking below what is posted
	 * is refused. */
	memset(&at, 0, sizeof(at));
	at.max_wr = 16;
	err = ib_modify_srq(srq, &at, IB_SRQ_MAX_WR);
	if (err)
		kv_fail("ib_modify_srq max_wr 16 with 1 posted: %d", err);
	err = ib_query_srq(srq, &at);
	if (err || at.max_wr < 16)
		kv_fail("ib_query_srq after the resize: %d, max_wr %u (want >= 16)", err, at.max_wr);
	for (i = 0; i < 4; i++)
		rwr[i] = (struct ib_recv_wr){ .wr_id = 0x5310 + i, .sg_list = &rs[4 + i], .num_sge = 1,
					      .next = i < 3 ? &rwr[i + 1] : NULL };
	err = ib_post_srq_recv(srq, rwr, &bad);
	if (err)
		kv_fail("ib_post_srq_recv of 4 more after the resize (5 posted): %d", err);
	memset(&at, 0, sizeof(at));
	at.max_wr = 2;
	err = ib_modify_srq(srq, &at, IB_SRQ_MAX_WR);
	if (err != -EINVAL)
		kv_fail("ib_modify_srq max_wr 2 with 5 posted: %d, want -EINVAL", err);
	for (i = 0; i < 2 && !kv_err; i++) {
		struct ib_sge ss = kv_sge(src, &src->tx, (3 + i) * len, len);
		struct ib_send_wr swr = { .wr_id = 0x5e60 + i, .sg_list = &ss, .num_sge = 1,
					  .opcode = IB_WR_SEND, .send_flags = IB_SEND_SIGNALED };

		kv_img_put((3 + i) * 8192, (u8 *)src->tx.va + (3 + i) * len, len);
		kv_post_send(&p->a, &swr, "SRQ after the resize");
	}
	for (i = 0; i < 2; i++)
		kv_expect(&p->a, "SRQ after the resize", KV_OK(0x5e60 + i, IB_WC_SEND, KV_ANY));
	/* the WQE posted before the resize first, then the new ones */
	kv_expect(&p->b, "SRQ after the resize", KV_OK(0x5303, IB_WC_RECV, len));
	kv_expect(&p->b, "SRQ after the resize", KV_OK(0x5310, IB_WC_RECV, len));
	if (!kv_err)
		kv_check_rx(dst, "SRQ after the resize");
	kv_cq_empty(&p->b, "SRQ after the resize");
	err = ib_modify_qp(p->b.qp, &qa, IB_QP_STATE);
	if (err)
		kv_fail("QP B to ERR: %d", err);
	msleep(100);
	kv_cq_empty(&p->b, "QP B in ERR (the SRQ's last receive is not flushed)");
	if (atomic_read(&kv_srq_events) != 1)
		kv_fail("%d limit events, want 1", atomic_read(&kv_srq_events));
out:
	kv_pair_close(p);
	ib_destroy_srq(srq);
	kv_srq_cur = NULL;
}

/* ------------------------------------------------------ fast registration */

/*
 * A fast-registration MR on B mapping 3 non-adjacent pieces of B's rx
 * buffer, out of order: page 1 from offset 0x100, page 5 whole, the first
 * 2 KiB of page 3.  Its iova is the first piece's DMA address (rroce and
 * rxe: a kernel virtual address), so the first page starts 0x100 into it.
 */
#define KV_FR_PIECES	3
#define KV_FR_PAGES	4	/* max_num_sg of the MRs */
#define KV_RX_FAR	(8 * PAGE_SIZE)	/* B's receive buffers: after the FR pages */

static const struct { u32 page, off, len; } kv_fr_layout[KV_FR_PIECES] = {
	{ 1, 0x100, PAGE_SIZE - 0x100 }, { 5, 0, PAGE_SIZE }, { 3, 0, 2048 },
};

struct kv_fr {
	struct kv_side *s;
	struct ib_mr *mr;
	struct scatterlist sg[KV_FR_PIECES];
	bool sg_mapped;
	u32 len;
};

static int kv_fr_alloc(struct kv_side *s, struct kv_fr *fr, u32 max_sg)
{
	memset(fr, 0, sizeof(*fr));
	fr->s = s;
	fr->mr = ib_alloc_mr(s->pd, IB_MR_TYPE_MEM_REG, max_sg);
	if (IS_ERR(fr->mr)) {
		kv_fail("ib_alloc_mr(%s, IB_MR_TYPE_MEM_REG, %u): %ld", s->tag, max_sg,
			PTR_ERR(fr->mr));
		fr->mr = NULL;
		return -EINVAL;
	}
	return 0;
}

/* Maps the pieces (DMA and MR); ib_map_mr_sg must return @want. */
static int kv_fr_map(struct kv_fr *fr, int want)
{
	struct kv_side *s = fr->s;
	int i, n;

	if (!fr->sg_mapped) {
		sg_init_table(fr->sg, KV_FR_PIECES);
		fr->len = 0;
		for (i = 0; i < KV_FR_PIECES; i++) {
			sg_set_page(&fr->sg[i], s->rx.pages + kv_fr_layout[i].page,
				    kv_fr_layout[i].len, kv_fr_layout[i].off);
			fr->len += kv_fr_layout[i].len;
		}
		n = ib_dma_map_sg(s->dev, fr->sg, KV_FR_PIECES, DMA_BIDIRECTIONAL);
		if (n != KV_FR_PIECES) {
			kv_fail("ib_dma_map_sg on %s: %d, want %d", s->tag, n, KV_FR_PIECES);
			if (n > 0)
				ib_dma_unmap_sg(s->dev, fr->sg, KV_FR_PIECES, DMA_BIDIRECTIONAL);
			return -EIO;
		}
		fr->sg_mapped = true;
	}
	n = ib_map_mr_sg(fr->mr, fr->sg, KV_FR_PIECES, NULL, PAGE_SIZE);
	if (n != want) {
		kv_fail("ib_map_mr_sg of %d pieces on %s: %d, want %d", KV_FR_PIECES, s->tag, n,
			want);
		return -EINVAL;
	}
	if (want == KV_FR_PIECES && (fr->mr->length != fr->len ||
				     fr->mr->iova != sg_dma_address(&fr->sg[0]))) {
		kv_fail("ib_map_mr_sg on %s: iova %#llx length %llu, want %#llx %u", s->tag,
			fr->mr->iova, fr->mr->length, (u64)sg_dma_address(&fr->sg[0]), fr->len);
		return -EINVAL;
	}
	return 0;
}

static void kv_fr_free(struct kv_fr *fr)
{
	int err;

	if (fr->sg_mapped)
		ib_dma_unmap_sg(fr->s->dev, fr->sg, KV_FR_PIECES, DMA_BIDIRECTIONAL);
	fr->sg_mapped = false;
	if (fr->mr) {
		err = ib_dereg_mr(fr->mr);
		if (err)
			kv_fail("ib_dereg_mr on %s: %d", fr->s->tag, err);
	}
	fr->mr = NULL;
}

/* The next key byte (what a ULP does before each registration). */
static void kv_fr_newkey(struct kv_fr *fr)
{
	ib_update_fast_reg_key(fr->mr, ib_inc_rkey(fr->mr->rkey) & 0xff);
}

/* An FR MR on B over the 3 pieces, with the next key byte. */
static int kv_fr_new(struct kv_fr *fr)
{
	if (kv_fr_alloc(&kv_b, fr, KV_FR_PAGES) || kv_fr_map(fr, KV_FR_PIECES))
		return -EINVAL;
	kv_fr_newkey(fr);
	return 0;
}

#define KV_FR_ACCESS (IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_WRITE)

static int kv_fr_post_reg(struct kv_end *e, struct kv_fr *fr, int access, u64 wr_id)
{
	struct ib_reg_wr w = {
		.wr = { .wr_id = wr_id, .opcode = IB_WR_REG_MR, .send_flags = IB_SEND_SIGNALED },
		.mr = fr->mr, .key = fr->mr->rkey, .access = access,
	};

	return kv_post_send(e, &w.wr, "IB_WR_REG_MR");
}

/* REG_MR on @e, completed successfully. */
static bool kv_fr_reg(struct kv_end *e, struct kv_fr *fr, u64 wr_id)
{
	return !kv_fr_post_reg(e, fr, KV_FR_ACCESS, wr_id) &&
	       kv_expect(e, "IB_WR_REG_MR", KV_OK(wr_id, IB_WC_REG_MR, KV_ANY));
}

static int kv_post_inv(struct kv_end *e, u32 key, u64 wr_id)
{
	struct ib_send_wr w = { .wr_id = wr_id, .opcode = IB_WR_LOCAL_INV,
				.send_flags = IB_SEND_SIGNALED, .ex.invalidate_rkey = key };

	return kv_post_send(e, &w, "IB_WR_LOCAL_INV");
}

/* Puts @len bytes of @src at offset @at of the FR MR into the image. */
static void kv_fr_img(u32 at, const u8 *src, u32 len)
{
	u32 i, base = 0, n;

	for (i = 0; i < KV_FR_PIECES && len; i++) {
		u32 plen = kv_fr_layout[i].len;

		if (at < base + plen) {
			n = min(len, base + plen - at);
			kv_img_put(kv_fr_layout[i].page * PAGE_SIZE + kv_fr_layout[i].off +
				   (at - base), src, n);
			src += n;
			at += n;
			len -= n;
		}
		base += plen;
	}
}

/* RDMA WRITE/READ of @len bytes between A's tx/rx and @raddr/@rkey on B. */
static int kv_fr_rdma(struct kv_end *a, bool read, u64 wr_id, u64 raddr, u32 rkey, u32 len,
		      const char *what)
{
	struct ib_sge ls = kv_sge(&kv_a, read ? &kv_a.rx : &kv_a.tx, 0, len);
	struct ib_rdma_wr w = {
		.wr = { .wr_id = wr_id, .sg_list = &ls, .num_sge = 1,
			.opcode = read ? IB_WR_RDMA_READ : IB_WR_RDMA_WRITE,
			.send_flags = IB_SEND_SIGNALED },
		.remote_addr = raddr, .rkey = rkey,
	};

	return kv_post_send(a, &w.wr, what);
}

/* A WRITE of @len at FR offset @at, checked in B's rx byte for byte. */
static bool kv_fr_write_ok(struct kv_pair *p, struct kv_fr *fr, u32 rkey, u32 at, u32 len,
			   u64 wr_id, const char *what)
{
	kv_fill_tx(&kv_a);
	kv_clear_rx(&kv_b);
	kv_fr_img(at, kv_a.tx.va, len);
	if (kv_fr_rdma(&p->a, false, wr_id, fr->mr->iova + at, rkey, len, what) ||
	    !kv_expect(&p->a, what, KV_OK(wr_id, IB_WC_RDMA_WRITE, KV_ANY)))
		return false;
	kv_check_rx(&kv_b, what);
	return !kv_err;
}

/*
 * A WR through a key B does not honour (any more): A's WR completes with
 * REM_ACCESS_ERR, the SEND behind it is flushed, both QPs end in ERR, and
 * nothing was written into B's rx (the image must be current).
 */
static void kv_fr_refused(struct kv_pair *p, struct kv_fr *fr, bool read, u32 rkey,
			  const char *what)
{
	struct ib_sge ss = kv_sge(&kv_a, &kv_a.tx, 0, 16);
	struct ib_send_wr next = { .wr_id = 0xf1f, .sg_list = &ss, .num_sge = 1,
				   .opcode = IB_WR_SEND, .send_flags = IB_SEND_SIGNALED };

	kv_fill_tx(&kv_a);
	if (kv_fr_rdma(&p->a, read, 0xf1e, fr->mr->iova, rkey, fr->len, what) ||
	    kv_post_send(&p->a, &next, what))
		return;
	kv_expect(&p->a, what, KV_ERR(0xf1e, IB_WC_REM_ACCESS_ERR));
	kv_expect(&p->a, "the SEND behind it", KV_ERR(0xf1f, IB_WC_WR_FLUSH_ERR));
	if (kv_err)
		return;
	kv_wait_err(&p->a, what);
	kv_wait_err(&p->b, what);
	kv_check_rx(&kv_b, what);
}

/*
 * REG_MR behind a SEND that cannot complete yet (A has no receive: RNR NAKs,
 * rnr_retry 7 = forever) runs at once, as on hardware, instead of waiting for
 * the SEND (nvme-rdma, iSER and NFS chain REG_MR before a SEND with other
 * messages in flight; waiting cost each a round trip): A's WRITE through the
 * new rkey lands while the SEND still waits.  Its completion comes after the
 * SEND's, in order, once A posts a receive.
 */
static void kv_t_fr_no_wait(void)
{
	struct kv_pair *p = kv_pair_open(&kv_direct);
	struct ib_sge ss = kv_sge(&kv_b, &kv_b.tx, 0, 64);
	struct ib_sge rs = kv_sge(&kv_a, &kv_a.rx, 0, 64);
	struct ib_send_wr swr = { .wr_id = 0xf60, .sg_list = &ss, .num_sge = 1,
				  .opcode = IB_WR_SEND, .send_flags = IB_SEND_SIGNALED };
	struct ib_recv_wr rwr = { .wr_id = 0xf62, .sg_list = &rs, .num_sge = 1 };
	struct kv_fr fr = {};

	if (!p)
		return;
	if (kv_fr_new(&fr))
		goto out;
	kv_fill_tx(&kv_b);
	if (kv_post_send(&p->b, &swr, "B's SEND (A has no receive)") ||
	    kv_fr_post_reg(&p->b, &fr, KV_FR_ACCESS, 0xf61))
		goto out;
	if (!kv_fr_write_ok(p, &fr, fr.mr->rkey, 0, 512, 0xf63,
			    "RDMA WRITE A->B through the rkey of the REG_MR behind the waiting SEND"))
		goto out;
	kv_cq_empty(&p->b, "B, the SEND still waiting for a receive");
	kv_clear_rx(&kv_a);
	kv_img_put(0, kv_b.tx.va, 64);
	if (kv_post_recv(&p->a, &rwr, "A's receive"))
		goto out;
	kv_expect(&p->a, "A's receive of B's SEND", KV_OK(0xf62, IB_WC_RECV, 64));
	kv_expect(&p->b, "B's SEND, first", KV_OK(0xf60, IB_WC_SEND, KV_ANY));
	kv_expect(&p->b, "the REG_MR, after the SEND", KV_OK(0xf61, IB_WC_REG_MR, KV_ANY));
	if (!kv_err)
		kv_check_rx(&kv_a, "B's SEND");
	kv_cq_empty(&p->a, "FR no wait");
	kv_cq_empty(&p->b, "FR no wait");
out:
	kv_pair_close(p);
	kv_fr_free(&fr);
}

/*
 * LOCAL_INV behind a SEND that cannot complete yet (A has no receive: RNR
 * NAKs forever) runs once the SEND was sent, as on hardware and rdma_rxe,
 * not once it completed: a WRITE through the rkey from another QP of A is
 * refused meanwhile.  (NFS over RDMA invalidates a reply's MRs with RPCs in
 * flight; waiting held every WR behind the LOCAL_INV for a round trip.)  Its
 * completion comes after the SEND's, in order, once A posts a receive.
 */
static void kv_t_inv_no_wait(void)
{
	struct kv_pair *p = kv_pair_open(&kv_direct);
	struct kv_pair *q = p ? kv_pair_open(&kv_direct) : NULL;
	struct ib_sge ss = kv_sge(&kv_b, &kv_b.tx, 0, 64);
	struct ib_sge rs = kv_sge(&kv_a, &kv_a.rx, 0, 64);
	struct ib_send_wr swr = { .wr_id = 0xf80, .sg_list = &ss, .num_sge = 1,
				  .opcode = IB_WR_SEND, .send_flags = IB_SEND_SIGNALED };
	struct ib_recv_wr rwr = { .wr_id = 0xf82, .sg_list = &rs, .num_sge = 1 };
	struct kv_fr fr = {};

	if (!q)
		goto out;
	if (kv_fr_new(&fr))
		goto out;
	if (!kv_fr_reg(&p->b, &fr, 0xf83) ||
	    !kv_fr_write_ok(q, &fr, fr.mr->rkey, 0, 256, 0xf84,
			    "RDMA WRITE A->B (second pair) before LOCAL_INV"))
		goto out;
	kv_fill_tx(&kv_b);
	if (kv_post_send(&p->b, &swr, "B's SEND (A has no receive)") ||
	    kv_post_inv(&p->b, fr.mr->rkey, 0xf81))
		goto out;
	kv_fr_refused(q, &fr, false, fr.mr->rkey,
		      "RDMA WRITE A->B (second pair) after a LOCAL_INV behind the waiting SEND");
	if (kv_err)
		goto out;
	kv_cq_empty(&p->b, "B, the SEND still waiting for a receive");
	kv_clear_rx(&kv_a);
	kv_img_put(0, kv_b.tx.va, 64);
	if (kv_post_recv(&p->a, &rwr, "A's receive"))
		goto out;
	kv_expect(&p->a, "A's receive of B's SEND", KV_OK(0xf82, IB_WC_RECV, 64));
	kv_expect(&p->b, "B's SEND, first", KV_OK(0xf80, IB_WC_SEND, KV_ANY));
	kv_expect(&p->b, "the LOCAL_INV, after the SEND", KV_OK(0xf81, IB_WC_LOCAL_INV, KV_ANY));
	if (!kv_err)
		kv_check_rx(&kv_a, "B's SEND");
	kv_cq_empty(&p->a, "LOCAL_INV no wait");
	kv_cq_empty(&p->b, "LOCAL_INV no wait");
out:
	kv_pair_close(q);
	kv_pair_close(p);
	kv_fr_free(&fr);
}

/* 20: FR MR, 3 pieces over 3 pages, WRITE/READ through it from the peer. */
static void kv_t_fr_rdma(void)
{
	struct kv_pair *p = kv_pair_open(&kv_direct);
	struct kv_fr fr = {};

	if (!p)
		return;
	if (!(kv_b.dev->attrs.device_cap_flags & IB_DEVICE_MEM_MGT_EXTENSIONS) ||
	    kv_b.dev->attrs.max_fast_reg_page_list_len < KV_FR_PAGES) {
		kv_fail("%s: device_cap_flags %#llx (IB_DEVICE_MEM_MGT_EXTENSIONS?), max_fast_reg_page_list_len %u",
			kv_b.dev->name, kv_b.dev->attrs.device_cap_flags,
			kv_b.dev->attrs.max_fast_reg_page_list_len);
		goto out;
	}
	if (kv_fr_new(&fr))
		goto out;
	kv_diag("FR MR on B: iova %#llx length %llu page_size %u rkey %#x", fr.mr->iova,
		fr.mr->length, fr.mr->page_size, fr.mr->rkey);
	if (!kv_fr_reg(&p->b, &fr, 0xf10) ||
	    !kv_fr_write_ok(p, &fr, fr.mr->rkey, 0, fr.len, 0xf11, "RDMA WRITE A->B through the FR rkey"))
		goto out;
	/* READ it all back into A's rx */
	kv_clear_rx(&kv_a);
	kv_img_put(0, kv_a.tx.va, fr.len);
	if (kv_fr_rdma(&p->a, true, 0xf12, fr.mr->iova, fr.mr->rkey, fr.len, "RDMA READ A<-B") ||
	    !kv_expect(&p->a, "RDMA READ through the FR rkey", KV_OK(0xf12, IB_WC_RDMA_READ, fr.len)))
		goto out;
	kv_check_rx(&kv_a, "RDMA READ through the FR rkey");
	/* a WRITE across the first page boundary of the MR */
	if (!kv_err)
		kv_fr_write_ok(p, &fr, fr.mr->rkey, 3000, 1000, 0xf13,
			       "RDMA WRITE A->B at FR offset 3000 (across pieces 1-2)");
	kv_cq_empty(&p->a, "FR");
	kv_cq_empty(&p->b, "FR");
out:
	kv_pair_close(p);
	kv_fr_free(&fr);
}

/* 21: LOCAL_INV on B, then A's WRITE through the old rkey fails. */
static void kv_t_fr_inv(void)
{
	struct kv_pair *p = kv_pair_open(&kv_direct);
	struct kv_fr fr = {};

	if (!p)
		return;
	if (kv_fr_new(&fr))
		goto out;
	if (!kv_fr_reg(&p->b, &fr, 0xf20) ||
	    !kv_fr_write_ok(p, &fr, fr.mr->rkey, 100, 64, 0xf21, "RDMA WRITE A->B before LOCAL_INV"))
		goto out;
	if (kv_post_inv(&p->b, fr.mr->rkey, 0xf22) ||
	    !kv_expect(&p->b, "IB_WR_LOCAL_INV on B", KV_OK(0xf22, IB_WC_LOCAL_INV, KV_ANY)))
		goto out;
	kv_fr_refused(p, &fr, false, fr.mr->rkey, "RDMA WRITE A->B after LOCAL_INV");
out:
	kv_pair_close(p);
	kv_fr_free(&fr);
}

/* 22: re-registration with a new key byte: the new rkey works, the old fails. */
static void kv_t_fr_rekey(void)
{
	struct kv_pair *p = kv_pair_open(&kv_direct);
	struct kv_fr fr = {};
	u32 old;

	if (!p)
		return;
	if (kv_fr_new(&fr))
		goto out;
	old = fr.mr->rkey;
	if (!kv_fr_reg(&p->b, &fr, 0xf30) ||
	    !kv_fr_write_ok(p, &fr, old, 0, 256, 0xf31, "RDMA WRITE A->B, first key") ||
	    kv_post_inv(&p->b, old, 0xf32) ||
	    !kv_expect(&p->b, "IB_WR_LOCAL_INV on B", KV_OK(0xf32, IB_WC_LOCAL_INV, KV_ANY)) ||
	    kv_fr_map(&fr, KV_FR_PIECES))
		goto out;
	kv_fr_newkey(&fr);
	if ((fr.mr->rkey & ~0xffu) != (old & ~0xffu) || fr.mr->rkey == old) {
		kv_fail("new key %#x: want old %#x with another key byte", fr.mr->rkey, old);
		goto out;
	}
	if (!kv_fr_reg(&p->b, &fr, 0xf33) ||
	    !kv_fr_write_ok(p, &fr, fr.mr->rkey, 0, fr.len, 0xf34, "RDMA WRITE A->B, new key"))
		goto out;
	kv_fr_refused(p, &fr, true, old, "RDMA READ A<-B with the old key");
out:
	kv_pair_close(p);
	kv_fr_free(&fr);
}

/* A completion with an error status; rxe may choose another one (noted). */
static void kv_expect_err(struct kv_end *e, const char *what, u64 wr_id,
			  enum ib_wc_status want)
{
	struct ib_wc wc;

	if (kv_err)
		return;
	if (kv_poll(e, &wc, kv_deadline())) {
		kv_fail("%s: no completion within %u ms", what, timeout_ms);
		return;
	}
	if (wc.status != want && wc.wr_id == wr_id && e->s->dev->ops.driver_id == RDMA_DRIVER_RXE) {
		kv_skip_why("rdma_rxe: %s completes with %s, not %s", what,
			    ib_wc_status_msg(wc.status), ib_wc_status_msg(want));
		return;
	}
	kv_wc_check(e, what, &wc, KV_ERR(wr_id, want), true);
}

/* 23: SEND_WITH_INV from A invalidates B's FR MR. */
static void kv_t_fr_send_inv(void)
{
	const char *what = "SEND_WITH_INV A->B";
	struct kv_pair *p = kv_pair_open(&kv_direct);
	struct kv_fr fr = {};
	struct ib_sge ss = kv_sge(&kv_a, &kv_a.tx, 0, 100);
	struct ib_sge rs = kv_sge(&kv_b, &kv_b.rx, KV_RX_FAR, 4096);
	struct ib_recv_wr rwr = { .wr_id = 0xf4b, .sg_list = &rs, .num_sge = 1 };
	struct ib_send_wr swr = { .wr_id = 0xf4a, .sg_list = &ss, .num_sge = 1,
				  .opcode = IB_WR_SEND_WITH_INV, .send_flags = IB_SEND_SIGNALED };
	struct ib_wc wc;

	if (!p)
		return;
	if (kv_fr_new(&fr))
		goto out;
	if (!kv_fr_reg(&p->b, &fr, 0xf40) ||
	    !kv_fr_write_ok(p, &fr, fr.mr->rkey, 0, 128, 0xf41, "RDMA WRITE A->B before SEND_WITH_INV"))
		goto out;
	kv_fill_tx(&kv_a);
	kv_clear_rx(&kv_b);
	kv_img_put(KV_RX_FAR, kv_a.tx.va, 100);
	swr.ex.invalidate_rkey = fr.mr->rkey;
	if (kv_post_recv(&p->b, &rwr, what) || kv_post_send(&p->a, &swr, what))
		goto out;
	kv_expect(&p->a, what, KV_OK(0xf4a, IB_WC_SEND, KV_ANY));
	if (kv_err || kv_poll(&p->b, &wc, kv_deadline())) {
		if (!kv_err)
			kv_fail("%s: no receive completion on B", what);
		goto out;
	}
	if (!kv_wc_check(&p->b, what, &wc, KV_OK(0xf4b, IB_WC_RECV, 100), true))
		goto out;
	if (!(wc.wc_flags & IB_WC_WITH_INVALIDATE) || wc.ex.invalidate_rkey != fr.mr->rkey) {
		kv_fail("%s: wc_flags %#x invalidate_rkey %#x, want IB_WC_WITH_INVALIDATE and %#x",
			what, wc.wc_flags, wc.ex.invalidate_rkey, fr.mr->rkey);
		goto out;
	}
	kv_check_rx(&kv_b, what);
	if (!kv_err)
		kv_fr_refused(p, &fr, false, fr.mr->rkey, "RDMA WRITE A->B after SEND_WITH_INV");
out:
	kv_pair_close(p);
	kv_fr_free(&fr);
}

/*
 * 24: bad cases, each on a fresh pair: alloc_mr beyond the limits; a
 * mapping longer than max_num_sg; LOCAL_INV of an unknown key; REG_MR of a
 * valid MR; REG_MR with remote write but no local write; SEND_WITH_INV of
 * an unknown key.  Then a good registration and WRITE still work.
 */
static void kv_t_fr_bad(void)
{
	struct kv_pair *p = NULL;
	struct kv_fr fr = {}, fr2 = {};
	struct ib_mr *mr;
	u32 unknown;
	struct ib_sge ss = kv_sge(&kv_a, &kv_a.tx, 0, 64);
	struct ib_sge rs = kv_sge(&kv_b, &kv_b.rx, KV_RX_FAR, 4096);
	struct ib_recv_wr rwr = { .wr_id = 0xf5b, .sg_list = &rs, .num_sge = 1 };
	struct ib_send_wr swr = { .wr_id = 0xf5a, .sg_list = &ss, .num_sge = 1,
				  .opcode = IB_WR_SEND_WITH_INV, .send_flags = IB_SEND_SIGNALED };

	mr = ib_alloc_mr(kv_b.pd, IB_MR_TYPE_MEM_REG,
			 kv_b.dev->attrs.max_fast_reg_page_list_len + 1);
	if (!IS_ERR(mr)) {
		ib_dereg_mr(mr);
		if (kv_b.dev->ops.driver_id != RDMA_DRIVER_RXE) {
			kv_fail("ib_alloc_mr beyond max_fast_reg_page_list_len succeeded");
			return;
		}
		kv_skip_why("rdma_rxe: ib_alloc_mr beyond max_fast_reg_page_list_len succeeds");
	}
	if (kv_b.dev->ops.driver_id != RDMA_DRIVER_RXE) {
		mr = ib_alloc_mr(kv_b.pd, IB_MR_TYPE_SG_GAPS, 4);
		if (!IS_ERR(mr)) {
			kv_fail("ib_alloc_mr(IB_MR_TYPE_SG_GAPS) succeeded");
			ib_dereg_mr(mr);
			return;
		}
	}
	/* 2 pages for a 3-page list: 2 pieces mapped */
	if (kv_fr_alloc(&kv_b, &fr, 2) || kv_fr_map(&fr, 2))
		goto out;
	kv_fr_free(&fr);

	/* LOCAL_INV of a key nothing has */
	unknown = 0xfffffe00 | 0x5a;
	p = kv_pair_open(&kv_direct);
	if (!p || kv_post_inv(&p->b, unknown, 0xf50))
		goto out;
	kv_expect_err(&p->b, "LOCAL_INV of an unknown key", 0xf50, IB_WC_LOC_PROT_ERR);
	if (!kv_err)
		kv_wait_err(&p->b, "LOCAL_INV of an unknown key");
	p = kv_pair_close(p);

	/* REG_MR of a valid MR */
	if (kv_err || kv_fr_alloc(&kv_b, &fr, KV_FR_PAGES) || kv_fr_map(&fr, KV_FR_PIECES))
		goto out;
	kv_fr_newkey(&fr);
	p = kv_pair_open(&kv_direct);
	if (!p || !kv_fr_reg(&p->b, &fr, 0xf51) || kv_fr_post_reg(&p->b, &fr, KV_FR_ACCESS, 0xf52))
		goto out;
	kv_expect_err(&p->b, "REG_MR of a valid MR", 0xf52, IB_WC_LOC_PROT_ERR);
	p = kv_pair_close(p);

	/* remote write without local write */
	if (kv_err || kv_fr_alloc(&kv_b, &fr2, KV_FR_PAGES) || kv_fr_map(&fr2, KV_FR_PIECES))
		goto out;
	p = kv_pair_open(&kv_direct);
	if (!p || kv_fr_post_reg(&p->b, &fr2, IB_ACCESS_REMOTE_WRITE, 0xf53))
		goto out;
	kv_expect_err(&p->b, "REG_MR with REMOTE_WRITE without LOCAL_WRITE", 0xf53,
		      IB_WC_LOC_QP_OP_ERR);
	p = kv_pair_close(p);

	/*
	 * SEND_WITH_INV of an unknown key (not on rxe: 6.12's rxe sends no
	 * NAK for it, its requester retries until retry_cnt runs out)
	 */
	if (kv_err)
		goto out;
	if (kv_b.dev->ops.driver_id == RDMA_DRIVER_RXE) {
		kv_skip_why("rdma_rxe: no NAK for SEND_WITH_INV of an unknown key");
		goto good;
	}
	p = kv_pair_open(&kv_direct);
	swr.ex.invalidate_rkey = unknown;
	if (!p || kv_post_recv(&p->b, &rwr, "RECV") || kv_post_send(&p->a, &swr, "SEND_WITH_INV"))
		goto out;
	kv_expect_err(&p->a, "SEND_WITH_INV of an unknown key (sender)", 0xf5a,
		      IB_WC_REM_ACCESS_ERR);
	kv_expect_err(&p->b, "SEND_WITH_INV of an unknown key (receiver)", 0xf5b,
		      IB_WC_REM_INV_REQ_ERR);
	p = kv_pair_close(p);

good:
	/*
	 * still working: fr2 (left free by the failed REG_MR) registered
	 * properly, a WRITE through it.  rxe accepts that bad access, so
	 * there a fresh MR is used.
	 */
	if (kv_err)
		goto out;
	if (kv_b.dev->ops.driver_id == RDMA_DRIVER_RXE) {
		kv_fr_free(&fr2);
		if (kv_fr_alloc(&kv_b, &fr2, KV_FR_PAGES) || kv_fr_map(&fr2, KV_FR_PIECES))
			goto out;
	}
	p = kv_pair_open(&kv_direct);
	kv_fr_newkey(&fr2);
	if (p && kv_fr_reg(&p->b, &fr2, 0xf54))
		kv_fr_write_ok(p, &fr2, fr2.mr->rkey, 0, fr2.len, 0xf55,
			       "RDMA WRITE A->B through a good FR MR after the errors");
out:
	kv_pair_close(p);
	kv_fr_free(&fr);
	kv_fr_free(&fr2);
}

struct kv_test {
	const char *name;
	void (*fn)(void);
};

static const struct kv_test kv_tests[] = {
	{ "create/destroy PD, CQs (direct, softirq, workqueue) and RC QPs on both devices, query_qp in RESET", kv_t_objects },
	{ "connect RC QP A <-> QP B: RESET->INIT->RTR->RTS, query_qp state, attributes and caps after each", kv_t_connect },
	{ "SEND/RECV 1 B A->B and B->A", kv_t_send_1 },
	{ "SEND/RECV 4 KiB A->B and B->A", kv_t_send_4k },
	{ "SEND/RECV 64 KiB A->B and B->A (64 packets at MTU 1024, PSN wrap)", kv_t_send_64k },
	{ "SEND_WITH_IMM 4 KiB A->B and B->A: imm_data, IB_WC_WITH_IMM", kv_t_send_imm },
	{ "SEND with 3 SGEs of odd sizes into 3 RECV SGEs of other sizes", kv_t_sge },
	{ "inline SEND (IB_SEND_INLINE, 2 SGEs, source overwritten after posting)", kv_t_inline },
	{ "zero-length SEND A->B and B->A: byte_len 0, buffer untouched", kv_t_send_0 },
	{ "RDMA WRITE 64 KiB into B through B's unsafe_global_rkey", kv_t_write },
	{ "RDMA_WRITE_WITH_IMM 4 KiB: data placed, a RECV on B consumed with the immediate", kv_t_write_imm },
	{ "RDMA READ 64 KiB from B through B's unsafe_global_rkey", kv_t_read },
	{ "chain of 32 SENDs through wr.next, only the last signaled: 1 send completion, 32 RECVs in order", kv_t_chain },
	{ "ib_cqe completions on IB_POLL_DIRECT CQs via ib_process_cq_direct: SEND both ways, RDMA READ", kv_t_cqe_direct },
	{ "ib_cqe completions on IB_POLL_SOFTIRQ (A) and IB_POLL_WORKQUEUE (B) CQs: SEND both ways, RDMA READ", kv_t_cqe_async },
	{ "SEND from a bad lkey -> LOC_PROT_ERR, next WR flushed, QP in ERR, later RECVs flushed", kv_t_bad_lkey_send },
	{ "RDMA READ into a bad lkey -> LOC_PROT_ERR, next WR flushed, QP in ERR, later RECVs flushed", kv_t_bad_lkey_read },
	{ "a pool of 32 receive buffers reposted while the QP is in ERR (as SMB Direct on unmount): flushed outside ib_post_recv, the pool runs dry", kv_t_err_repost },
	{ "B moves its QP to ERR from the .done of a RECV (softirq CQ): the SEND's ACK still leaves, A's SEND completes with SUCCESS", kv_t_ack_then_err },
	{ "posting beyond max_send_wr/max_recv_wr -> -ENOMEM with *bad_wr at the first WR not posted; ERR flushes all", kv_t_depth },
	{ "SRQ on B: bad attributes, ib_post_srq_recv, 3 SENDs into it (data, qp), limit event once, ERR flushes nothing of it", kv_t_srq },
	{ "FRWR: ib_alloc_mr + ib_map_mr_sg (3 pages, offset 0x100) + IB_WR_REG_MR on B; A WRITEs and READs through the FR rkey", kv_t_fr_rdma },
	{ "FRWR: IB_WR_LOCAL_INV on B, then A's WRITE -> REM_ACCESS_ERR, flush, both QPs in ERR, B untouched", kv_t_fr_inv },
	{ "FRWR: re-registration with a new key byte: the new rkey works, the old one -> REM_ACCESS_ERR", kv_t_fr_rekey },
	{ "FRWR: SEND_WITH_INV A->B: IB_WC_WITH_INVALIDATE, invalidate_rkey; then A's WRITE -> REM_ACCESS_ERR", kv_t_fr_send_inv },
	{ "FRWR bad cases: alloc_mr limits, map beyond max_num_sg, LOCAL_INV/SEND_WITH_INV of unknown keys, REG_MR of a valid MR or bad access; then a good one", kv_t_fr_bad },
	{ "FRWR: REG_MR behind a SEND waiting in RNR runs at once (A WRITEs through its rkey meanwhile) and completes after the SEND", kv_t_fr_no_wait },
	{ "FRWR: LOCAL_INV behind a SEND waiting in RNR runs once the SEND was sent (a WRITE through its rkey is refused meanwhile) and completes after the SEND", kv_t_inv_no_wait },
};

#define KV_NTESTS 28
static_assert(ARRAY_SIZE(kv_tests) == KV_NTESTS);
/* selftests/rdma/kverbs.sh reads the plan with modinfo -F ktap_plan */
MODULE_INFO(ktap_plan, __stringify(KV_NTESTS));

/* ---------------------------------------------------------------- setup */
static int kv_side_setup(struct kv_side *s, const char *name)
{
	const struct ib_gid_attr *ga = NULL;
	struct net_device *ndev;
	struct ib_port_attr pa;
	char ifname[IFNAMSIZ] = "?";
	int i, err;

	s->dev = ib_device_get_by_name(name, RDMA_DRIVER_UNKNOWN);
	if (!s->dev) {
		kv_diag("setup: no ib device '%s'", name);
		return -ENODEV;
	}
	if (!rdma_protocol_roce(s->dev, KV_PORT)) {
		kv_diag("setup: %s port %d is not RoCE", name, KV_PORT);
		return -EINVAL;
	}
	err = ib_query_port(s->dev, KV_PORT, &pa);
	if (err || pa.state != IB_PORT_ACTIVE || pa.active_mtu < IB_MTU_1024) {
		kv_diag("setup: %s port %d: query %d, state %d, active_mtu %d (want ACTIVE, >= 1024)",
			name, KV_PORT, err, pa.state, pa.active_mtu);
		return err ?: -ENETDOWN;
	}
	if (gid_index >= 0) {
		ga = rdma_get_gid_attr(s->dev, KV_PORT, gid_index);
		if (!IS_ERR(ga) && ga->gid_type != IB_GID_TYPE_ROCE_UDP_ENCAP) {
			rdma_put_gid_attr(ga);
			ga = ERR_PTR(-EINVAL);
		}
	} else {
		for (i = 0; i < pa.gid_tbl_len; i++) {
			ga = rdma_get_gid_attr(s->dev, KV_PORT, i);
			if (IS_ERR(ga))
				continue;
			if (ga->gid_type == IB_GID_TYPE_ROCE_UDP_ENCAP &&
			    ipv6_addr_v4mapped((const struct in6_addr *)ga->gid.raw))
				break;
			rdma_put_gid_attr(ga);
			ga = ERR_PTR(-ENOENT);
		}
	}
	if (IS_ERR_OR_NULL(ga)) {
		kv_diag("setup: %s: no RoCE v2 %s GID on port %d", name,
			gid_index >= 0 ? "(gid_index)" : "IPv4-mapped", KV_PORT);
		return -ENOENT;
	}
	s->gid_index = ga->index;
	s->gid = ga->gid;
	err = rdma_read_gid_l2_fields(ga, NULL, s->mac);
	rcu_read_lock();
	ndev = rdma_read_gid_attr_ndev_rcu(ga);
	if (!IS_ERR(ndev))
		strscpy(ifname, ndev->name, sizeof(ifname));
	rcu_read_unlock();
	rdma_put_gid_attr(ga);
	if (err) {
		kv_diag("setup: %s: GID %d has no netdev: %d", name, s->gid_index, err);
		return err;
	}
	kv_diag("%s = %s: GID %d %pI6c on %s (%pM), driver id %d", s->tag, name, s->gid_index,
		s->gid.raw, ifname, s->mac, s->dev->ops.driver_id);

	s->pd = ib_alloc_pd(s->dev, IB_PD_UNSAFE_GLOBAL_RKEY);
	if (IS_ERR(s->pd)) {
		err = PTR_ERR(s->pd);
		s->pd = NULL;
		kv_diag("setup: ib_alloc_pd(%s, IB_PD_UNSAFE_GLOBAL_RKEY): %d", name, err);
		return err;
	}
	err = kv_buf_alloc(s, &s->tx, KV_BUF, false);
	if (!err)
		err = kv_buf_alloc(s, &s->rx, KV_RX_LEN, true);
	if (err)
		kv_diag("setup: buffers on %s: %d", name, err);
	return err;
}

static void kv_side_teardown(struct kv_side *s)
{
	if (!s->dev)
		return;
	kv_buf_free(s, &s->tx);
	kv_buf_free(s, &s->rx);
	if (s->pd)
		ib_dealloc_pd(s->pd);
	s->pd = NULL;
	ib_device_put(s->dev);
	s->dev = NULL;
}

static int kv_setup(void)
{
	int err;

	kv_img = kmalloc(KV_RX_LEN, GFP_KERNEL);
	kv_inl = kmalloc(256, GFP_KERNEL);
	if (!kv_img || !kv_inl)
		return -ENOMEM;
	err = kv_side_setup(&kv_a, dev_a);
	if (!err)
		err = kv_side_setup(&kv_b, dev_b);
	if (err)
		return err;
	kv_rd = min(min(kv_a.dev->attrs.max_qp_rd_atom, kv_a.dev->attrs.max_qp_init_rd_atom),
		    min(kv_b.dev->attrs.max_qp_rd_atom, kv_b.dev->attrs.max_qp_init_rd_atom));
	kv_rd = clamp(kv_rd, 1, 4);
	return 0;
}

static void kv_teardown(void)
{
	kv_side_teardown(&kv_a);
	kv_side_teardown(&kv_b);
	kfree(kv_img);
	kfree(kv_inl);
	kv_img = NULL;
	kv_inl = NULL;
}

static int __init kv_init(void)
{
	int i, pass = 0, fail = 0, skip = 0, err;

	pr_info("KTAP version 1\n");
	pr_info("1..%d\n", KV_NTESTS);
	kv_diag("dev_a=%s dev_b=%s gid_index=%d timeout_ms=%u", dev_a, dev_b, gid_index,
		timeout_ms);
	err = kv_setup();
	for (i = 0; i < KV_NTESTS; i++) {
		const struct kv_test *t = &kv_tests[i];

		if (err || kv_abort) {
			pr_info("not ok %d - %s # %s\n", i + 1, t->name,
				err ? "setup failed" : "aborted by a fatal signal");
			fail++;
			continue;
		}
		kv_err = false;
		kv_skip[0] = 0;
		t->fn();
		if (kv_unsupported) {
			/* the driver has no kernel verbs: nothing to test */
			pr_info("unsupported: %s\n", kv_unsup);
			for (; i < KV_NTESTS; i++, skip++)
				pr_info("ok %d - %s # SKIP no kernel verbs: %s\n", i + 1,
					kv_tests[i].name, kv_unsup);
			break;
		}
		if (kv_err || kv_abort) {
			pr_info("not ok %d - %s\n", i + 1, t->name);
			fail++;
		} else if (kv_skip[0]) {
			pr_info("ok %d - %s # SKIP %s\n", i + 1, t->name, kv_skip);
			skip++;
		} else {
			pr_info("ok %d - %s\n", i + 1, t->name);
			pass++;
		}
	}
	kv_teardown();
	pr_info("%d passed, %d failed, %d skipped\n", pass, fail, skip);
	return 0;
}

static void __exit kv_exit(void)
{
}

module_init(kv_init);
module_exit(kv_exit);
MODULE_DESCRIPTION("kernel-consumer verbs test for rroce (and rdma_rxe)");
MODULE_LICENSE("GPL");
