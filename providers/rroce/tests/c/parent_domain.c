// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Test client for thread domains and parent domains, run with
 * mock_uverbs.so preloaded (see datapath.c for the WQE layouts and the
 * mock's hooks).
 *
 * Checks ibv_alloc_td/ibv_dealloc_td and ibv_alloc_parent_domain/
 * ibv_dealloc_pd with their errno cases, a CQ, QPs and an SRQ created on a
 * parent domain, what the parent domain's allocator is asked for (the
 * per-queue scratch buffers: resource type, size, alignment) and that
 * every block goes back to its free(), IBV_ALLOCATOR_USE_DEFAULT, failing
 * and misbehaving allocators, and traffic through the rings of a QP and an
 * SRQ made on a parent domain.  Every failed check prints "FAIL <line>:
 * <expression>"; success ends with "parent_domain=ok".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "check.h"

/* The provider's resource types: (RDMA_DRIVER_UNKNOWN << 32) | code. */
#define RES_TYPE_QP 1ull
#define RES_TYPE_SRQ 4ull
#define BUF_ALIGN 64u

/* rroce_proto::wqe layouts */
struct swqe {
	uint64_t wr_id;
	uint8_t opcode;
	uint8_t flags;
	uint16_t num_sge;
	uint32_t inline_len;
	uint32_t imm_or_inv;
	uint32_t rkey;
	uint64_t remote_addr;
	uint64_t compare_add;
	uint64_t swap;
	uint32_t remote_qpn;
	uint32_t remote_qkey;
	uint32_t ah;
	uint32_t reserved;
};
_Static_assert(sizeof(struct swqe) == 64, "send WQE header");

struct wsge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

struct rwqe {
	uint64_t wr_id;
	uint16_t num_sge;
	uint8_t reserved[6];
};

struct cqe {
	uint64_t wr_id;
	uint8_t status;
	uint8_t opcode;
	uint8_t wc_flags;
	uint8_t sl;
	uint32_t byte_len;
	uint32_t imm_or_inv;
	uint32_t qp_num;
	uint32_t src_qp;
	uint32_t vendor_err;
	uint16_t slid;
	uint16_t pkey_index;
	uint8_t dlid_path_bits;
	uint8_t reserved[27];
};
_Static_assert(sizeof(struct cqe) == 64, "CQE");

static int (*mock_cq_push)(uint32_t, const void *);
static int (*mock_sq_pop)(uint32_t, void *, size_t);
static int (*mock_rq_pop)(uint32_t, void *, size_t);
static int (*mock_srq_pop)(uint32_t, void *, size_t);
static int (*mock_live_objects)(void);
static int (*mock_live_pds)(void);
static int (*mock_user_maps)(void);

static void *hook(const char *name)
{
	void *p = dlsym(RTLD_DEFAULT, name);

	if (!p) {
		printf("FAIL: mock hook %s missing\n", name);
		exit(1);
	}
	return p;
}

/* ---- The application's allocator ------------------------------------ */

enum alloc_mode {
	ALLOC_OK,		/* posix_memalign, filled with garbage */
	ALLOC_DEFAULT,		/* IBV_ALLOCATOR_USE_DEFAULT */
	ALLOC_FAIL_AT,		/* NULL for call number fail_at, else OK */
	ALLOC_MISALIGNED,	/* one byte past an aligned block */
};

struct alloc_call {
	struct ibv_pd *pd;
	void *pd_context;
	size_t size, alignment;
	uint64_t type;
	void *ptr;		/* returned */
	void *base;		/* to free(3) */
	int freed;
};

static struct alloc_call calls[64];
static int ncalls, nfrees, bad_frees;
static enum alloc_mode mode;
static int fail_at;
static int cookie;		/* &cookie is the pd_context */

static void reset_log(enum alloc_mode m)
{
	for (int i = 0; i < ncalls; i++)
		if (calls[i].base && !calls[i].freed)
			free(calls[i].base);
	memset(calls, 0, sizeof(calls));
	ncalls = nfrees = bad_frees = 0;
	mode = m;
}

static void *test_alloc(struct ibv_pd *pd, void *pd_context, size_t size, size_t alignment,
			uint64_t resource_type)
{
	struct alloc_call *c;
	void *p = NULL;

	if (ncalls == 64)
		return NULL;
	c = &calls[ncalls++];
	*c = (struct alloc_call){ pd, pd_context, size, alignment, resource_type, NULL, NULL, 0 };
	if (mode == ALLOC_DEFAULT)
		return c->ptr = IBV_ALLOCATOR_USE_DEFAULT;
	if (mode == ALLOC_FAIL_AT && ncalls == fail_at)
		return NULL;
	if (posix_memalign(&p, alignment, size + 1))
		return NULL;
	memset(p, 0xa5, size + 1);
	c->base = p;
	c->ptr = mode == ALLOC_MISALIGNED ? (char *)p + 1 : p;
	return c->ptr;
}

static void test_free(struct ibv_pd *pd, void *pd_context, void *ptr, uint64_t resource_type)
{
	nfrees++;
	for (int i = 0; i < ncalls; i++)
		if (calls[i].ptr == ptr && calls[i].base && !calls[i].freed &&
		    calls[i].pd == pd && calls[i].pd_context == pd_context &&
		    calls[i].type == resource_type) {
			calls[i].freed = 1;
			free(calls[i].base);
			return;
		}
	bad_frees++;
}

/* Blocks handed out and not given back. */
static int outstanding(void)
{
	int n = 0;

	for (int i = 0; i < ncalls; i++)
		n += calls[i].base && !calls[i].freed;
	return n;
}

static struct ibv_pd *parent(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_td *td,
			     int allocators)
{
	struct ibv_parent_domain_init_attr a;

	memset(&a, 0, sizeof(a));
	a.pd = pd;
	a.td = td;
	if (allocators) {
		a.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
			      IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
		a.alloc = test_alloc;
		a.free = test_free;
		a.pd_context = &cookie;
	}
	return ibv_alloc_parent_domain(ctx, &a);
}

/* ---- Helpers ---------------------------------------------------------- */

static int to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	int ret = 0;

	for (int s = IBV_QPS_INIT; s <= IBV_QPS_RTS && !ret; s++) {
		memset(&a, 0, sizeof(a));
		a.qp_state = s;
		ret = ibv_modify_qp(qp, &a, IBV_QP_STATE);
	}
	return ret;
}

/* 6 send WRs, 3 receives, 2 SGEs, 40 inline bytes: the mock makes 8 SQ
 * slots of 128 bytes (4 SGEs or 64 inline bytes) and 4 RQ slots of 64
 * bytes (3 SGEs). */
static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_srq *srq,
			      struct ibv_qp_cap *cap)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.srq = srq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 6;
	ia.cap.max_recv_wr = srq ? 0 : 3;
	ia.cap.max_send_sge = 2;
	ia.cap.max_recv_sge = srq ? 0 : 2;
	ia.cap.max_inline_data = 40;
	qp = ibv_create_qp(pd, &ia);
	if (cap)
		*cap = ia.cap;
	return qp;
}

/* Call i of the log was for `size` bytes of `type` from parent domain pd. */
static void check_call(int line, int i, struct ibv_pd *pd, size_t size, uint64_t type)
{
	struct alloc_call *c = &calls[i];

	if (i >= ncalls || c->pd != pd || c->pd_context != &cookie || c->size != size ||
	    c->alignment != BUF_ALIGN || c->type != type) {
		printf("FAIL %d: allocator call %d: pd %p ctx %p size %zu align %zu type %llu\n",
		       line, i, (void *)c->pd, c->pd_context, c->size, c->alignment,
		       (unsigned long long)c->type);
		failures++;
	}
}

/* ---- Tests ------------------------------------------------------------ */

static void test_td(struct ibv_context *ctx)
{
	struct ibv_td_init_attr ta;
	struct ibv_td *td;

	ta.comp_mask = 1;
	errno = 0;
	CHECK(!ibv_alloc_td(ctx, &ta));
	CHECK_EQ(errno, EINVAL);
	ta.comp_mask = 0;
	td = ibv_alloc_td(ctx, &ta);
	CHECK(td);
	if (!td)
		return;
	CHECK(td->context == ctx);
	CHECK_EQ(ibv_dealloc_td(td), 0);
}

/* Bad attributes; a PD in use by a parent domain, a TD in use. */
static void test_parent_domain(struct ibv_context *ctx, struct ibv_context *ctx2,
			       struct ibv_pd *pd)
{
	struct ibv_parent_domain_init_attr a;
	struct ibv_td_init_attr ta = { 0 };
	struct ibv_pd *pd2, *pd_other, *nested;
	struct ibv_td *td, *td_other;
	int pds = mock_live_pds();

	pd_other = ibv_alloc_pd(ctx2);
	td_other = ibv_alloc_td(ctx2, &ta);
	td = ibv_alloc_td(ctx, &ta);
	CHECK(pd_other && td_other && td);
	if (!pd_other || !td_other || !td)
		return;
	pds++;

	memset(&a, 0, sizeof(a));
	errno = 0;
	CHECK(!ibv_alloc_parent_domain(ctx, &a)); /* no PD */
	CHECK_EQ(errno, EINVAL);
	a.pd = pd;
	a.comp_mask = 1 << 2; /* unknown bit */
	errno = 0;
	CHECK(!ibv_alloc_parent_domain(ctx, &a));
	CHECK_EQ(errno, EINVAL);
	a.comp_mask = 0;
	a.pd = pd_other; /* another context's PD */
	errno = 0;
	CHECK(!ibv_alloc_parent_domain(ctx, &a));
	CHECK_EQ(errno, EINVAL);
	a.pd = pd;
	a.td = td_other; /* another context's TD */
	errno = 0;
	CHECK(!ibv_alloc_parent_domain(ctx, &a));
	CHECK_EQ(errno, EINVAL);

	pd2 = parent(ctx, pd, td, 0);
	CHECK(pd2);
	if (!pd2)
		return;
	/* Interchangeable with its PD for the core code: same context and
	 * kernel handle; no kernel object of its own. */
	CHECK(pd2 != pd && pd2->context == ctx && pd2->handle == pd->handle);
	CHECK_EQ(mock_live_pds(), pds);
	/* No parent domain of a parent domain. */
	nested = parent(ctx, pd2, NULL, 0);
	CHECK(!nested);
	CHECK_EQ(errno, EINVAL);
	/* In use. */
	CHECK_EQ(ibv_dealloc_pd(pd), EBUSY);
	CHECK_EQ(ibv_dealloc_td(td), EBUSY);
	CHECK_EQ(mock_live_pds(), pds);

	CHECK_EQ(ibv_dealloc_pd(pd2), 0);
	CHECK_EQ(mock_live_pds(), pds); /* no DEALLOC_PD for a parent domain */
	CHECK_EQ(ibv_dealloc_td(td), 0);
	CHECK_EQ(ibv_dealloc_td(td_other), 0);
	CHECK_EQ(ibv_dealloc_pd(pd_other), 0);
	CHECK_EQ(mock_live_pds(), pds - 1);
}

/* ibv_create_cq_ex with IBV_CQ_INIT_ATTR_MASK_PD. */
static void test_cq(struct ibv_context *ctx, struct ibv_context *ctx2, struct ibv_pd *pd)
{
	struct ibv_cq_init_attr_ex ca;
	struct ibv_pd *pd2, *pd_other, *pd2_other;
	struct ibv_cq_ex *cq;

	pd2 = parent(ctx, pd, NULL, 1);
	pd_other = ibv_alloc_pd(ctx2);
	pd2_other = pd_other ? parent(ctx2, pd_other, NULL, 0) : NULL;
	CHECK(pd2 && pd2_other);
	if (!pd2 || !pd2_other)
		return;
	reset_log(ALLOC_OK);

	memset(&ca, 0, sizeof(ca));
	ca.cqe = 16;
	ca.wc_flags = IBV_WC_STANDARD_FLAGS;
	ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD;
	ca.parent_domain = pd; /* a protection domain */
	errno = 0;
	CHECK(!ibv_create_cq_ex(ctx, &ca));
	CHECK_EQ(errno, EINVAL);
	ca.parent_domain = NULL;
	errno = 0;
	CHECK(!ibv_create_cq_ex(ctx, &ca));
	CHECK_EQ(errno, EINVAL);
	ca.parent_domain = pd2_other; /* another context's */
	errno = 0;
	CHECK(!ibv_create_cq_ex(ctx, &ca));
	CHECK_EQ(errno, EINVAL);

	ca.parent_domain = pd2;
	cq = ibv_create_cq_ex(ctx, &ca);
	CHECK(cq);
	if (!cq)
		return;
	/* A CQ has no buffer of the provider's: its ring is kernel memory. */
	CHECK_EQ(ncalls, 0);
	CHECK_EQ(ibv_dealloc_pd(pd2), EBUSY);
	CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
	CHECK_EQ(ibv_dealloc_pd(pd2), 0);
	CHECK_EQ(ibv_dealloc_pd(pd2_other), 0);
	CHECK_EQ(ibv_dealloc_pd(pd_other), 0);
}

/* A QP on a parent domain with allocators: its buffers, traffic, free. */
static void test_qp(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq)
{
	static uint8_t buf[4096] __attribute__((aligned(4096)));
	static const char msg[] = "through a parent domain";
	struct ibv_td_init_attr ta = { 0 };
	struct ibv_send_wr wr[2], *bad;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_sge sge[2];
	struct ibv_qp_cap cap;
	struct ibv_wc wc;
	struct ibv_pd *pd2;
	struct ibv_td *td;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct cqe c;
	uint8_t e[128];
	struct swqe h;
	struct rwqe rh;
	struct wsge s[2];
	int live = mock_live_objects();

	td = ibv_alloc_td(ctx, &ta);
	pd2 = td ? parent(ctx, pd, td, 1) : NULL;
	CHECK(pd2);
	if (!pd2)
		return;
	reset_log(ALLOC_OK);
	qp = make_qp(pd2, cq, NULL, &cap);
	CHECK(qp);
	if (!qp)
		return;
	CHECK(qp->pd == pd2);
	CHECK_EQ(cap.max_send_sge, 4);
	CHECK_EQ(cap.max_inline_data, 64);
	CHECK_EQ(cap.max_recv_sge, 3);
	/* SQ: staging entry, SGEs, inline bytes; RQ: staging entry, SGEs. */
	CHECK_EQ(ncalls, 5);
	check_call(__LINE__, 0, pd2, 128, RES_TYPE_QP);
	check_call(__LINE__, 1, pd2, 4 * 16, RES_TYPE_QP);
	check_call(__LINE__, 2, pd2, 64, RES_TYPE_QP);
	check_call(__LINE__, 3, pd2, 64, RES_TYPE_QP);
	check_call(__LINE__, 4, pd2, 3 * 16, RES_TYPE_QP);
	CHECK_EQ(nfrees, 0);
	CHECK_EQ(ibv_dealloc_pd(pd2), EBUSY);
	CHECK_EQ(ibv_dealloc_td(td), EBUSY);

	/* An MR on the parent domain: the PD's kernel handle. */
	mr = ibv_reg_mr(pd2, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	if (!mr)
		return;
	CHECK(mr->pd == pd2);
	memcpy(buf, msg, sizeof(msg));

	CHECK_EQ(to_rts(qp), 0);
	/* A receive with two SGEs. */
	sge[0] = (struct ibv_sge){ (uintptr_t)buf + 1024, 100, mr->lkey };
	sge[1] = (struct ibv_sge){ (uintptr_t)buf + 2048, 200, mr->lkey };
	memset(&rwr, 0, sizeof(rwr));
	rwr.wr_id = 0xbeef;
	rwr.sg_list = sge;
	rwr.num_sge = 2;
	CHECK_EQ(ibv_post_recv(qp, &rwr, &rbad), 0);
	CHECK_EQ(mock_rq_pop(qp->handle, e, 64), 1);
	memcpy(&rh, e, sizeof(rh));
	memcpy(s, e + 16, sizeof(s));
	CHECK_EQ(rh.wr_id, 0xbeef);
	CHECK_EQ(rh.num_sge, 2);
	CHECK_EQ(s[0].addr, (uintptr_t)buf + 1024);
	CHECK_EQ(s[1].length, 200);
	CHECK_EQ(s[1].lkey, mr->lkey);

	/* A SEND with SGEs and an inline one, in one list. */
	sge[0] = (struct ibv_sge){ (uintptr_t)buf, 8, mr->lkey };
	sge[1] = (struct ibv_sge){ (uintptr_t)buf + 8, sizeof(msg) - 8, mr->lkey };
	memset(wr, 0, sizeof(wr));
	wr[0].wr_id = 1;
	wr[0].opcode = IBV_WR_SEND;
	wr[0].send_flags = IBV_SEND_SIGNALED;
	wr[0].sg_list = sge;
	wr[0].num_sge = 2;
	wr[0].next = &wr[1];
	wr[1].wr_id = 2;
	wr[1].opcode = IBV_WR_SEND;
	wr[1].send_flags = IBV_SEND_INLINE;
	wr[1].sg_list = sge;
	wr[1].num_sge = 2;
	CHECK_EQ(ibv_post_send(qp, wr, &bad), 0);
	CHECK_EQ(mock_sq_pop(qp->handle, e, sizeof(e)), 1);
	memcpy(&h, e, sizeof(h));
	memcpy(s, e + 64, sizeof(s));
	CHECK_EQ(h.wr_id, 1);
	CHECK_EQ(h.opcode, IBV_WR_SEND);
	CHECK_EQ(h.num_sge, 2);
	CHECK_EQ(s[0].addr, (uintptr_t)buf);
	CHECK_EQ(s[1].length, sizeof(msg) - 8);
	CHECK_EQ(mock_sq_pop(qp->handle, e, sizeof(e)), 1);
	memcpy(&h, e, sizeof(h));
	CHECK_EQ(h.wr_id, 2);
	CHECK_EQ(h.flags, IBV_SEND_INLINE);
	CHECK_EQ(h.inline_len, sizeof(msg));
	CHECK(!memcmp(e + 64, msg, sizeof(msg)));

	/* Its completion. */
	memset(&c, 0, sizeof(c));
	c.wr_id = 1;
	c.status = IBV_WC_SUCCESS;
	c.opcode = IBV_WC_SEND;
	c.qp_num = qp->qp_num;
	CHECK_EQ(mock_cq_push(cq->handle, &c), 0);
	CHECK_EQ(ibv_poll_cq(cq, 1, &wc), 1);
	CHECK_EQ(wc.wr_id, 1);
	CHECK_EQ(wc.qp_num, qp->qp_num);

	CHECK_EQ(ibv_destroy_qp(qp), 0);
	/* Every block went back to free(), with its pd, context and type. */
	CHECK_EQ(nfrees, 5);
	CHECK_EQ(bad_frees, 0);
	CHECK_EQ(outstanding(), 0);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(mock_live_objects(), live);
	CHECK_EQ(ibv_dealloc_pd(pd2), 0);
	CHECK_EQ(ibv_dealloc_td(td), 0);
}

/* ibv_create_qp_ex and the ibv_wr_* API on a parent domain. */
static void test_qp_ex(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq)
{
	static const char msg[] = "wr api";
	struct ibv_qp_init_attr_ex ia;
	struct ibv_qp_ex *qx;
	struct ibv_pd *pd2;
	struct ibv_qp *qp;
	uint8_t e[128];
	struct swqe h;

	pd2 = parent(ctx, pd, NULL, 1);
	CHECK(pd2);
	if (!pd2)
		return;
	reset_log(ALLOC_OK);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 6;
	ia.cap.max_recv_wr = 3;
	ia.cap.max_send_sge = 2;
	ia.cap.max_recv_sge = 2;
	ia.cap.max_inline_data = 40;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ia.pd = pd2;
	ia.send_ops_flags = IBV_QP_EX_WITH_SEND;
	qp = ibv_create_qp_ex(ctx, &ia);
	CHECK(qp);
	if (!qp)
		return;
	CHECK(qp->pd == pd2);
	CHECK_EQ(ncalls, 5);
	check_call(__LINE__, 0, pd2, 128, RES_TYPE_QP);
	qx = ibv_qp_to_qp_ex(qp);
	CHECK(qx);
	CHECK_EQ(to_rts(qp), 0);
	if (qx) {
		ibv_wr_start(qx);
		qx->wr_id = 7;
		qx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(qx);
		ibv_wr_set_inline_data(qx, (void *)msg, sizeof(msg));
		CHECK_EQ(ibv_wr_complete(qx), 0);
		CHECK_EQ(mock_sq_pop(qp->handle, e, sizeof(e)), 1);
		memcpy(&h, e, sizeof(h));
		CHECK_EQ(h.wr_id, 7);
		CHECK_EQ(h.inline_len, sizeof(msg));
		CHECK(!memcmp(e + 64, msg, sizeof(msg)));
	}
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(nfrees, 5);
	CHECK_EQ(outstanding(), 0);
	CHECK_EQ(ibv_dealloc_pd(pd2), 0);
}

/* IBV_ALLOCATOR_USE_DEFAULT, a failing and a misbehaving allocator. */
static void test_allocator_answers(struct ibv_context *ctx, struct ibv_pd *pd,
				   struct ibv_cq *cq)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_pd *pd2;
	struct ibv_qp *qp;
	uint8_t e[128];
	struct swqe h;
	int live = mock_live_objects(), maps = mock_user_maps();

	pd2 = parent(ctx, pd, NULL, 1);
	CHECK(pd2);
	if (!pd2)
		return;

	/* USE_DEFAULT: the provider's heap; free() is never called. */
	reset_log(ALLOC_DEFAULT);
	qp = make_qp(pd2, cq, NULL, NULL);
	CHECK(qp);
	if (!qp)
		return;
	CHECK_EQ(ncalls, 5);
	CHECK_EQ(to_rts(qp), 0);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 9;
	wr.opcode = IBV_WR_SEND;
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0);
	CHECK_EQ(mock_sq_pop(qp->handle, e, sizeof(e)), 1);
	memcpy(&h, e, sizeof(h));
	CHECK_EQ(h.wr_id, 9);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(nfrees, 0);

	/* NULL on the third call: ENOMEM, the first two are given back,
	 * the kernel QP is destroyed again, nothing stays mapped. */
	reset_log(ALLOC_FAIL_AT);
	fail_at = 3;
	errno = 0;
	CHECK(!make_qp(pd2, cq, NULL, NULL));
	CHECK_EQ(errno, ENOMEM);
	CHECK_EQ(ncalls, 3);
	CHECK_EQ(nfrees, 2);
	CHECK_EQ(bad_frees, 0);
	CHECK_EQ(outstanding(), 0);
	CHECK_EQ(mock_live_objects(), live);
	CHECK_EQ(mock_user_maps(), maps);

	/* A block not aligned for SGEs: EINVAL, and it goes back too (the
	 * byte buffer before it takes any alignment). */
	reset_log(ALLOC_MISALIGNED);
	errno = 0;
	CHECK(!make_qp(pd2, cq, NULL, NULL));
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(ncalls, 2);
	CHECK_EQ(nfrees, 2);
	CHECK_EQ(bad_frees, 0);
	CHECK_EQ(outstanding(), 0);
	CHECK_EQ(mock_live_objects(), live);
	CHECK_EQ(mock_user_maps(), maps);

	/* Without IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS: never asked. */
	CHECK_EQ(ibv_dealloc_pd(pd2), 0);
	pd2 = parent(ctx, pd, NULL, 0);
	CHECK(pd2);
	if (!pd2)
		return;
	reset_log(ALLOC_OK);
	qp = make_qp(pd2, cq, NULL, NULL);
	CHECK(qp);
	CHECK_EQ(ncalls, 0);
	if (qp)
		CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_dealloc_pd(pd2), 0);
}

/* An SRQ on a parent domain (and a QP using it, pyverbs' setup). */
static void test_srq(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_srq_init_attr sa;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_sge sge;
	struct ibv_pd *pd2;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	struct rwqe rh;
	struct wsge s;
	uint8_t e[64];

	pd2 = parent(ctx, pd, NULL, 1);
	CHECK(pd2);
	if (!pd2)
		return;
	reset_log(ALLOC_OK);
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 4;
	sa.attr.max_sge = 2;
	srq = ibv_create_srq(pd2, &sa);
	CHECK(srq);
	if (!srq)
		return;
	CHECK(srq->pd == pd2);
	/* 64-byte entries of 3 SGEs: staging entry, SGEs. */
	CHECK_EQ(sa.attr.max_sge, 3);
	CHECK_EQ(ncalls, 2);
	check_call(__LINE__, 0, pd2, 64, RES_TYPE_SRQ);
	check_call(__LINE__, 1, pd2, 3 * 16, RES_TYPE_SRQ);

	qp = make_qp(pd2, cq, srq, NULL);
	CHECK(qp);
	/* The QP has no RQ: its SQ's three buffers only. */
	CHECK_EQ(ncalls, 5);
	check_call(__LINE__, 2, pd2, 128, RES_TYPE_QP);

	sge = (struct ibv_sge){ 0x10000, 64, 0x77 };
	memset(&rwr, 0, sizeof(rwr));
	rwr.wr_id = 0x5151;
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	CHECK_EQ(ibv_post_srq_recv(srq, &rwr, &rbad), 0);
	CHECK_EQ(mock_srq_pop(srq->handle, e, sizeof(e)), 1);
	memcpy(&rh, e, sizeof(rh));
	memcpy(&s, e + 16, sizeof(s));
	CHECK_EQ(rh.wr_id, 0x5151);
	CHECK_EQ(rh.num_sge, 1);
	CHECK_EQ(s.addr, 0x10000);
	CHECK_EQ(s.lkey, 0x77);

	if (qp)
		CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(nfrees, 3);
	CHECK_EQ(ibv_dealloc_pd(pd2), EBUSY);
	CHECK_EQ(ibv_destroy_srq(srq), 0);
	CHECK_EQ(nfrees, 5);
	CHECK_EQ(bad_frees, 0);
	CHECK_EQ(outstanding(), 0);
	CHECK_EQ(ibv_dealloc_pd(pd2), 0);
}

static struct ibv_context *open_rroce0(struct ibv_device **list, int n)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "rroce0"))
			return ibv_open_device(list[i]);
	return NULL;
}

int main(void)
{
	struct ibv_context *ctx, *ctx2;
	struct ibv_device **list;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	int n;

	mock_cq_push = hook("mock_cq_push");
	mock_sq_pop = hook("mock_sq_pop");
	mock_rq_pop = hook("mock_rq_pop");
	mock_srq_pop = hook("mock_srq_pop");
	mock_live_objects = hook("mock_live_objects");
	mock_live_pds = hook("mock_live_pds");
	mock_user_maps = hook("mock_user_maps");

	list = ibv_get_device_list(&n);
	if (!list) {
		printf("device_list_errno=%d\n", errno);
		return 2;
	}
	ctx = open_rroce0(list, n);
	ctx2 = open_rroce0(list, n);
	if (!ctx || !ctx2) {
		printf("open_errno=%d\n", errno);
		return 4;
	}
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(pd && cq);
	if (pd && cq) {
		test_td(ctx);
		test_parent_domain(ctx, ctx2, pd);
		test_cq(ctx, ctx2, pd);
		test_qp(ctx, pd, cq);
		test_qp_ex(ctx, pd, cq);
		test_allocator_answers(ctx, pd, cq);
		test_srq(ctx, pd, cq);
		CHECK_EQ(ibv_destroy_cq(cq), 0);
		CHECK_EQ(ibv_dealloc_pd(pd), 0);
	}
	CHECK_EQ(mock_live_pds(), 0);
	CHECK_EQ(mock_live_objects(), 0);
	CHECK_EQ(mock_user_maps(), 0);
	reset_log(ALLOC_OK);
	CHECK_EQ(ibv_close_device(ctx2), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	ibv_free_device_list(list);
	if (failures) {
		printf("failures=%d\n", failures);
		return 1;
	}
	printf("parent_domain=ok\n");
	return 0;
}
