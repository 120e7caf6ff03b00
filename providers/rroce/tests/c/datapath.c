// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Test client for the data-path verbs, run with mock_uverbs.so preloaded.
 *
 * The mock plays the kernel: it produces CQEs into CQ rings and consumes
 * WQEs from SQ/RQ rings (hooks found with dlsym).  WQEs and CQEs are
 * encoded/decoded here from the layout documented in rroce_proto::wqe,
 * independently of the Rust code.  Every check that fails prints
 * "FAIL <line>: <expression>" and the program exits 1; success ends with
 * "datapath=ok".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

#include "check.h"

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
_Static_assert(offsetof(struct swqe, remote_addr) == 24, "send WQE header");
_Static_assert(offsetof(struct swqe, ah) == 56, "send WQE header");

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
_Static_assert(sizeof(struct rwqe) == 16, "recv WQE header");

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
	uint8_t reserved[3];
	uint64_t timestamp;
	uint8_t reserved2[16];
};
_Static_assert(sizeof(struct cqe) == 64, "CQE");
_Static_assert(offsetof(struct cqe, dlid_path_bits) == 36, "CQE");
_Static_assert(offsetof(struct cqe, timestamp) == 40, "CQE");

static void (*mock_set_fault)(const char *);
static void (*mock_set_ring_start)(uint32_t);
static int (*mock_cq_push)(uint32_t, const void *);
static int (*mock_cq_poke_prod)(uint32_t, uint32_t);
static int64_t (*mock_cq_cons)(uint32_t);
static uint32_t (*mock_last_cq_flags)(void);
static int (*mock_sq_pop)(uint32_t, void *, size_t);
static int (*mock_rq_pop)(uint32_t, void *, size_t);
static int (*mock_srq_pop)(uint32_t, void *, size_t);
static int (*mock_sq_poke_cons)(uint32_t, uint32_t);
static int (*mock_doorbells)(uint32_t);
static void (*mock_last_doorbell)(void *);
static int (*mock_qp_state)(uint32_t);
static int (*mock_notifies)(uint32_t, int *);
static int (*mock_live_objects)(void);
static int (*mock_user_maps)(void);
static int (*mock_cq_resizes)(uint32_t);

static void *hook(const char *name)
{
	void *p = dlsym(RTLD_DEFAULT, name);

	if (!p) {
		printf("FAIL: mock hook %s missing\n", name);
		exit(1);
	}
	return p;
}

static void load_hooks(void)
{
	mock_set_fault = hook("mock_set_fault");
	mock_set_ring_start = hook("mock_set_ring_start");
	mock_cq_push = hook("mock_cq_push");
	mock_cq_poke_prod = hook("mock_cq_poke_prod");
	mock_cq_cons = hook("mock_cq_cons");
	mock_last_cq_flags = hook("mock_last_cq_flags");
	mock_sq_pop = hook("mock_sq_pop");
	mock_rq_pop = hook("mock_rq_pop");
	mock_srq_pop = hook("mock_srq_pop");
	mock_sq_poke_cons = hook("mock_sq_poke_cons");
	mock_doorbells = hook("mock_doorbells");
	mock_last_doorbell = hook("mock_last_doorbell");
	mock_qp_state = hook("mock_qp_state");
	mock_notifies = hook("mock_notifies");
	mock_live_objects = hook("mock_live_objects");
	mock_user_maps = hook("mock_user_maps");
	mock_cq_resizes = hook("mock_cq_resizes");
}

static struct cqe make_cqe(uint64_t wr_id)
{
	struct cqe c;

	memset(&c, 0, sizeof(c));
	c.wr_id = wr_id;
	c.status = (uint8_t)(wr_id % 3 ? IBV_WC_SUCCESS : IBV_WC_REM_ACCESS_ERR);
	c.opcode = (uint8_t)(wr_id % 2 ? IBV_WC_RECV : IBV_WC_RDMA_WRITE);
	c.wc_flags = IBV_WC_WITH_IMM | IBV_WC_GRH;
	c.sl = 5;
	c.byte_len = 1000 + (uint32_t)wr_id;
	/* immediate data as on the wire: memory bytes 11 22 33 44 */
	memcpy(&c.imm_or_inv, "\x11\x22\x33\x44", 4);
	c.qp_num = 0x123456;
	c.src_qp = 0xabcdef;
	c.vendor_err = 0x77;
	c.slid = 0x1234;
	c.pkey_index = 3;
	c.dlid_path_bits = 9;
	memset(c.reserved, 0xee, sizeof(c.reserved)); /* ignored */
	memset(c.reserved2, 0xee, sizeof(c.reserved2));
	c.timestamp = 1000000000ull * 1000 + wr_id; /* CLOCK_MONOTONIC ns */
	return c;
}

static void check_wc(const struct ibv_wc *wc, uint64_t wr_id)
{
	struct cqe c = make_cqe(wr_id);

	CHECK_EQ(wc->wr_id, wr_id);
	CHECK_EQ(wc->status, c.status);
	CHECK_EQ(wc->opcode, c.opcode);
	CHECK_EQ(wc->vendor_err, 0x77);
	CHECK_EQ(wc->byte_len, c.byte_len);
	CHECK(!memcmp(&wc->imm_data, "\x11\x22\x33\x44", 4));
	CHECK_EQ(wc->qp_num, 0x123456);
	CHECK_EQ(wc->src_qp, 0xabcdef);
	CHECK_EQ(wc->wc_flags, IBV_WC_WITH_IMM | IBV_WC_GRH);
	CHECK_EQ(wc->pkey_index, 3);
	CHECK_EQ(wc->slid, 0x1234);
	CHECK_EQ(wc->sl, 5);
	CHECK_EQ(wc->dlid_path_bits, 9);
}

static void test_cq(struct ibv_context *ctx)
{
	struct ibv_wc wc[8];
	struct ibv_cq *cq;
	struct cqe c;
	uint64_t next = 1, seen = 1;
	int n, sol;

	/* Indices start just below 2^32 so the test wraps them. */
	mock_set_ring_start(0xfffffff0u);
	cq = ibv_create_cq(ctx, 5, NULL, NULL, 0);
	CHECK(cq);
	if (!cq)
		return;
	CHECK_EQ(cq->cqe, 8);
	CHECK_EQ(mock_user_maps(), 1);
	CHECK_EQ(ibv_poll_cq(cq, 8, wc), 0);

	for (int i = 0; i < 3; i++) {
		c = make_cqe(next++);
		CHECK_EQ(mock_cq_push(cq->handle, &c), 0);
	}
	n = ibv_poll_cq(cq, 2, wc);
	CHECK_EQ(n, 2);
	check_wc(&wc[0], seen++);
	check_wc(&wc[1], seen++);
	CHECK_EQ(mock_cq_cons(cq->handle), 0xfffffff2u);
	n = ibv_poll_cq(cq, 8, wc);
	CHECK_EQ(n, 1);
	check_wc(&wc[0], seen++);
	CHECK_EQ(ibv_poll_cq(cq, 8, wc), 0);

	/* Fill the CQ completely (8 entries), again and again across the
	 * 2^32 wrap; the provider must release every slot it polled. */
	for (int round = 0; round < 10; round++) {
		for (int i = 0; i < 8; i++) {
			c = make_cqe(next++);
			CHECK_EQ(mock_cq_push(cq->handle, &c), 0);
		}
		c = make_cqe(999);
		CHECK_EQ(mock_cq_push(cq->handle, &c), -1); /* full */
		for (int got = 0; got < 8;) {
			n = ibv_poll_cq(cq, 3, wc);
			CHECK(n > 0);
			if (n <= 0)
				break;
			for (int i = 0; i < n; i++)
				check_wc(&wc[i], seen++);
			got += n;
		}
	}
	CHECK_EQ(seen, next);
	CHECK_EQ(ibv_poll_cq(cq, 0, wc), 0);

	CHECK_EQ(ibv_req_notify_cq(cq, 1), 0);
	CHECK_EQ(mock_notifies(cq->handle, &sol), 1);
	CHECK_EQ(sol, 1);
	CHECK_EQ(ibv_req_notify_cq(cq, 0), 0);
	CHECK_EQ(mock_notifies(cq->handle, &sol), 2);
	CHECK_EQ(sol, 0);

	/* A valid CQE followed by one with an undefined status: the first is
	 * delivered, then the CQ reports an error for good. */
	c = make_cqe(7);
	CHECK_EQ(mock_cq_push(cq->handle, &c), 0);
	c.status = 99;
	CHECK_EQ(mock_cq_push(cq->handle, &c), 0);
	c = make_cqe(8);
	CHECK_EQ(mock_cq_push(cq->handle, &c), 0);
	CHECK_EQ(ibv_poll_cq(cq, 8, wc), 1);
	check_wc(&wc[0], 7);
	CHECK(ibv_poll_cq(cq, 8, wc) < 0);
	CHECK(ibv_poll_cq(cq, 8, wc) < 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);

	/* A producer index beyond what the ring can hold. */
	mock_set_ring_start(0);
	cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	CHECK(cq);
	if (!cq)
		return;
	CHECK_EQ(mock_cq_poke_prod(cq->handle, 5), 0);
	CHECK(ibv_poll_cq(cq, 8, wc) < 0);
	CHECK_EQ(mock_cq_poke_prod(cq->handle, 1), 0);
	CHECK(ibv_poll_cq(cq, 8, wc) < 0); /* sticky */
	/* Undefined opcode and flags bits. */
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	for (int k = 0; k < 2; k++) {
		cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
		CHECK(cq);
		if (!cq)
			return;
		c = make_cqe(1);
		if (k == 0)
			c.opcode = 7;
		else
			c.wc_flags = 0x10;
		CHECK_EQ(mock_cq_push(cq->handle, &c), 0);
		CHECK(ibv_poll_cq(cq, 1, wc) < 0);
		CHECK_EQ(ibv_destroy_cq(cq), 0);
	}
	CHECK_EQ(mock_user_maps(), 0);

	errno = 0;
	CHECK(!ibv_create_cq(ctx, 0, NULL, NULL, 0));
	CHECK_EQ(errno, EINVAL);
}

/* Polls exactly `want` completions (in batches of 3) and checks that they
 * are wr_ids *seen, *seen + 1, ... */
static void poll_expect(struct ibv_cq *cq, int want, uint64_t *seen)
{
	struct ibv_wc wc[3];

	for (int got = 0; got < want;) {
		int n = ibv_poll_cq(cq, 3, wc);

		CHECK(n > 0);
		if (n <= 0)
			return;
		for (int i = 0; i < n; i++)
			check_wc(&wc[i], (*seen)++);
		got += n;
	}
	CHECK_EQ(ibv_poll_cq(cq, 3, wc), 0);
}

static void test_resize_cq(struct ibv_context *ctx)
{
	struct ibv_wc wc[8];
	struct ibv_cq *cq;
	struct cqe c;
	uint64_t next = 1, seen = 1;

	/* Indices near 2^32, so the moved entries straddle the wrap. */
	mock_set_ring_start(0xfffffffau);
	cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	CHECK(cq);
	if (!cq)
		return;
	CHECK_EQ(cq->cqe, 8);

	/* No outstanding CQEs: up and down. */
	CHECK_EQ(ibv_resize_cq(cq, 100), 0);
	CHECK_EQ(cq->cqe, 128);
	CHECK_EQ(mock_user_maps(), 1); /* the old ring was unmapped */
	CHECK_EQ(ibv_resize_cq(cq, 3), 0);
	CHECK_EQ(cq->cqe, 4);
	CHECK_EQ(mock_user_maps(), 1);
	CHECK_EQ(mock_cq_resizes(cq->handle), 2);
	CHECK_EQ(ibv_poll_cq(cq, 8, wc), 0);

	/* 4 of 4 slots used, 1 polled, grow: the other 3 come from the new
	 * ring in order, and it takes 16 more. */
	for (int i = 0; i < 4; i++) {
		c = make_cqe(next++);
		CHECK_EQ(mock_cq_push(cq->handle, &c), 0);
	}
	CHECK_EQ(ibv_poll_cq(cq, 1, wc), 1);
	check_wc(&wc[0], seen++);
	CHECK_EQ(ibv_resize_cq(cq, 20), 0);
	CHECK_EQ(cq->cqe, 32);
	for (int i = 0; i < 16; i++) {
		c = make_cqe(next++);
		CHECK_EQ(mock_cq_push(cq->handle, &c), 0);
	}
	poll_expect(cq, 19, &seen);
	CHECK_EQ(seen, next);

	/* Shrinking below the unpolled count fails and changes nothing. */
	for (int i = 0; i < 5; i++) {
		c = make_cqe(next++);
		CHECK_EQ(mock_cq_push(cq->handle, &c), 0);
	}
	CHECK_EQ(ibv_poll_cq(cq, 1, wc), 1);
	check_wc(&wc[0], seen++);
	CHECK_EQ(ibv_resize_cq(cq, 3), EINVAL);
	CHECK_EQ(cq->cqe, 32);
	CHECK_EQ(ibv_resize_cq(cq, 0), EINVAL);
	CHECK_EQ(ibv_resize_cq(cq, 5000), EINVAL);
	CHECK_EQ(ibv_resize_cq(cq, -1), EINVAL);
	CHECK_EQ(mock_cq_resizes(cq->handle), 3);
	CHECK_EQ(cq->cqe, 32);
	CHECK_EQ(mock_user_maps(), 1);
	/* Exactly the unpolled count is enough. */
	CHECK_EQ(ibv_resize_cq(cq, 4), 0);
	CHECK_EQ(cq->cqe, 4);
	poll_expect(cq, 4, &seen);
	CHECK_EQ(seen, next);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	CHECK_EQ(mock_user_maps(), 0);

	/* The kernel resized but its reply cannot be used: the CQ is broken
	 * (there is no way back to the old ring). */
	for (int k = 0; k < 3; k++) {
		static const char *const faults[] = {
			"resize_bad_offset", "resize_discontinuous", "resize_entry_small"
		};
		static const int errs[] = { EINVAL, EPROTO, EPROTO };

		cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
		CHECK(cq);
		if (!cq)
			return;
		c = make_cqe(1);
		CHECK_EQ(mock_cq_push(cq->handle, &c), 0);
		mock_set_fault(faults[k]);
		CHECK_EQ(ibv_resize_cq(cq, 16), errs[k]);
		CHECK(ibv_poll_cq(cq, 8, wc) < 0);
		CHECK_EQ(ibv_resize_cq(cq, 16), EIO);
		CHECK_EQ(ibv_destroy_cq(cq), 0);
	}
	CHECK_EQ(mock_user_maps(), 0);
	mock_set_ring_start(0);
}

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

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *cq, enum ibv_qp_type type,
			      struct ibv_qp_cap *cap_out)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = type;
	ia.cap.max_send_wr = 6;
	ia.cap.max_recv_wr = 3;
	ia.cap.max_send_sge = 2;
	ia.cap.max_recv_sge = 2;
	ia.cap.max_inline_data = 40;
	qp = ibv_create_qp(pd, &ia);
	if (cap_out)
		*cap_out = ia.cap;
	return qp;
}

static int pop_send(struct ibv_qp *qp, struct swqe *h, uint8_t *data, size_t data_len)
{
	uint8_t e[128];
	int r = mock_sq_pop(qp->handle, e, sizeof(e));

	if (r == 1) {
		memcpy(h, e, sizeof(*h));
		memcpy(data, e + 64, data_len < 64 ? data_len : 64);
	}
	return r;
}

static void test_rc(struct ibv_pd *pd, struct ibv_cq *cq)
{
	static uint8_t buf[4096] __attribute__((aligned(4096)));
	struct ibv_send_wr wr[4], *bad;
	struct ibv_recv_wr rwr[5], *rbad;
	struct ibv_sge sge[6];
	struct ibv_qp_init_attr qia;
	struct ibv_qp_attr qa;
	struct ibv_qp_cap cap;
	struct swqe h;
	struct wsge s[4];
	uint8_t data[64], db[32], re[64];
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint32_t u32;
	uint64_t u64;
	int dbs;

	mock_set_ring_start(0xfffffffcu);
	qp = make_qp(pd, cq, IBV_QPT_RC, &cap);
	CHECK(qp);
	if (!qp)
		return;
	/* Real capacities: 8 SQ slots of 128 bytes (4 SGEs or 64 inline
	 * bytes), 4 RQ slots of 64 bytes (3 SGEs). */
	CHECK_EQ(cap.max_send_wr, 8);
	CHECK_EQ(cap.max_recv_wr, 4);
	CHECK_EQ(cap.max_send_sge, 4);
	CHECK_EQ(cap.max_recv_sge, 3);
	CHECK_EQ(cap.max_inline_data, 64);
	CHECK_EQ(qp->state, IBV_QPS_RESET);
	CHECK_EQ(mock_user_maps(), 1 + 2);

	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr);
	if (!mr)
		return;
	CHECK(mr->lkey && mr->rkey && mr->lkey != mr->rkey);
	CHECK(mr->addr == buf && mr->length == sizeof(buf) && mr->pd == pd);
	for (int i = 0; i < 64; i++)
		buf[i] = (uint8_t)(0xa0 + i);

	/* Posting in RESET fails. */
	memset(wr, 0, sizeof(wr));
	wr[0].wr_id = 1;
	wr[0].opcode = IBV_WR_SEND;
	CHECK_EQ(ibv_post_send(qp, &wr[0], &bad), EINVAL);
	CHECK(bad == &wr[0]);
	memset(rwr, 0, sizeof(rwr));
	CHECK_EQ(ibv_post_recv(qp, &rwr[0], &rbad), EINVAL);
	CHECK(rbad == &rwr[0]);

	CHECK_EQ(to_rts(qp), 0);
	CHECK_EQ(mock_qp_state(qp->handle), IBV_QPS_RTS);
	CHECK_EQ(qp->state, IBV_QPS_RTS);
	memset(&qa, 0, sizeof(qa));
	CHECK_EQ(ibv_query_qp(qp, &qa, IBV_QP_STATE | IBV_QP_CAP, &qia), 0);
	CHECK_EQ(qa.qp_state, IBV_QPS_RTS);
	CHECK_EQ(qa.cap.max_send_wr, 8);
	CHECK_EQ(qa.cap.max_send_sge, 4);
	CHECK_EQ(qa.cap.max_inline_data, 64);
	CHECK_EQ(qia.cap.max_recv_wr, 4);
	CHECK_EQ(qia.cap.max_recv_sge, 3);

	/* Three WRs in one call: one doorbell. */
	sge[0] = (struct ibv_sge){ (uintptr_t)buf, 16, mr->lkey };
	sge[1] = (struct ibv_sge){ (uintptr_t)buf + 100, 200, mr->lkey };
	sge[2] = (struct ibv_sge){ (uintptr_t)buf, 20, mr->lkey };
	sge[3] = (struct ibv_sge){ (uintptr_t)buf + 20, 20, mr->lkey };
	memset(wr, 0, sizeof(wr));
	wr[0].wr_id = 0x1111;
	wr[0].opcode = IBV_WR_SEND;
	wr[0].send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
	wr[0].sg_list = &sge[0];
	wr[0].num_sge = 2;
	wr[0].next = &wr[1];
	wr[1].wr_id = 0x2222;
	wr[1].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr[1].send_flags = IBV_SEND_FENCE;
	memcpy(&wr[1].imm_data, "\xaa\xbb\xcc\xdd", 4);
	wr[1].wr.rdma.remote_addr = 0x7f0000001000ull;
	wr[1].wr.rdma.rkey = 0x55aa;
	wr[1].sg_list = &sge[0];
	wr[1].num_sge = 1;
	wr[1].next = &wr[2];
	wr[2].wr_id = 0x3333;
	wr[2].opcode = IBV_WR_SEND_WITH_INV;
	wr[2].send_flags = IBV_SEND_INLINE;
	wr[2].invalidate_rkey = 0x4242;
	wr[2].sg_list = &sge[2];
	wr[2].num_sge = 2;
	bad = (void *)1;
	CHECK_EQ(ibv_post_send(qp, &wr[0], &bad), 0);
	CHECK(bad == NULL);
	CHECK_EQ(mock_doorbells(qp->handle), 1);

	CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 1);
	CHECK_EQ(h.wr_id, 0x1111);
	CHECK_EQ(h.opcode, IBV_WR_SEND);
	CHECK_EQ(h.flags, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED);
	CHECK_EQ(h.num_sge, 2);
	CHECK_EQ(h.inline_len, 0);
	CHECK_EQ(h.reserved, 0);
	memcpy(s, data, 2 * sizeof(s[0]));
	CHECK_EQ(s[0].addr, (uintptr_t)buf);
	CHECK_EQ(s[0].length, 16);
	CHECK_EQ(s[0].lkey, mr->lkey);
	CHECK_EQ(s[1].addr, (uintptr_t)buf + 100);
	CHECK_EQ(s[1].length, 200);

	CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 1);
	CHECK_EQ(h.wr_id, 0x2222);
	CHECK_EQ(h.opcode, IBV_WR_RDMA_WRITE_WITH_IMM);
	CHECK_EQ(h.flags, IBV_SEND_FENCE);
	CHECK(!memcmp(&h.imm_or_inv, "\xaa\xbb\xcc\xdd", 4));
	CHECK_EQ(h.remote_addr, 0x7f0000001000ull);
	CHECK_EQ(h.rkey, 0x55aa);
	CHECK_EQ(h.num_sge, 1);

	CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 1);
	CHECK_EQ(h.wr_id, 0x3333);
	CHECK_EQ(h.opcode, IBV_WR_SEND_WITH_INV);
	CHECK_EQ(h.flags, IBV_SEND_INLINE);
	CHECK_EQ(h.num_sge, 0);
	CHECK_EQ(h.inline_len, 40);
	CHECK_EQ(h.imm_or_inv, 0x4242);
	CHECK(!memcmp(data, buf, 40));
	CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 0);

	/* The doorbell's exact bytes. */
	mock_last_doorbell(db);
	memcpy(&u32, db, 4);
	CHECK_EQ(u32, 28); /* IB_USER_VERBS_CMD_POST_SEND */
	CHECK_EQ(db[4] | db[5] << 8, 8);
	CHECK_EQ(db[6] | db[7] << 8, 1);
	memcpy(&u64, db + 8, 8);
	CHECK(u64 != 0);
	memcpy(&u32, db + 16, 4);
	CHECK_EQ(u32, qp->handle);
	memcpy(&u32, db + 20, 4);
	CHECK_EQ(u32, 0);
	memcpy(&u32, db + 24, 4);
	CHECK_EQ(u32, 0);
	memcpy(&u32, db + 28, 4);
	CHECK_EQ(u32, sizeof(struct ibv_send_wr));

	/* Atomic compare-and-swap. */
	memset(wr, 0, sizeof(wr));
	sge[4] = (struct ibv_sge){ (uintptr_t)buf + 8, 8, mr->lkey };
	wr[0].wr_id = 0x4444;
	wr[0].opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	wr[0].send_flags = IBV_SEND_SIGNALED;
	wr[0].wr.atomic.remote_addr = 0x1000;
	wr[0].wr.atomic.compare_add = 0x0102030405060708ull;
	wr[0].wr.atomic.swap = 0x1112131415161718ull;
	wr[0].wr.atomic.rkey = 0x99;
	wr[0].sg_list = &sge[4];
	wr[0].num_sge = 1;
	CHECK_EQ(ibv_post_send(qp, &wr[0], &bad), 0);
	CHECK_EQ(mock_doorbells(qp->handle), 2);
	CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 1);
	CHECK_EQ(h.opcode, IBV_WR_ATOMIC_CMP_AND_SWP);
	CHECK_EQ(h.compare_add, 0x0102030405060708ull);
	CHECK_EQ(h.swap, 0x1112131415161718ull);
	CHECK_EQ(h.rkey, 0x99);
	CHECK_EQ(h.remote_addr, 0x1000);

	/* Errors: nothing posted, no doorbell. */
	dbs = mock_doorbells(qp->handle);
	wr[0].opcode = IBV_WR_SEND;
	wr[0].sg_list = sge;
	wr[0].num_sge = 5; /* > max_send_sge 4 */
	CHECK_EQ(ibv_post_send(qp, &wr[0], &bad), EINVAL);
	CHECK(bad == &wr[0]);
	wr[0].num_sge = -1;
	CHECK_EQ(ibv_post_send(qp, &wr[0], &bad), EINVAL);
	wr[0].num_sge = 1;
	wr[0].send_flags = IBV_SEND_IP_CSUM;
	CHECK_EQ(ibv_post_send(qp, &wr[0], &bad), EINVAL);
	wr[0].send_flags = IBV_SEND_INLINE; /* 65 bytes > 64 */
	sge[5] = (struct ibv_sge){ (uintptr_t)buf, 65, mr->lkey };
	wr[0].sg_list = &sge[5];
	CHECK_EQ(ibv_post_send(qp, &wr[0], &bad), EINVAL);
	wr[0].send_flags = 0;
	wr[0].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD; /* 65-byte atomic */
	CHECK_EQ(ibv_post_send(qp, &wr[0], &bad), EINVAL);
	wr[0].opcode = IBV_WR_LOCAL_INV; /* SGEs on a local op */
	CHECK_EQ(ibv_post_send(qp, &wr[0], &bad), EINVAL);
	wr[0].opcode = IBV_WR_BIND_MW; /* no window */
	wr[0].num_sge = 0;
	CHECK_EQ(ibv_post_send(qp, &wr[0], &bad), EINVAL);
	{
		/* A window of another context, of no type, a type-2 bind
		 * without a region. */
		struct ibv_mw other = { .context = NULL, .pd = pd, .rkey = 0x4401,
					.type = IBV_MW_TYPE_2 };
		struct ibv_mw notype = { .context = pd->context, .pd = pd,
					 .rkey = 0x4401, .type = 3 };
		struct ibv_mw t2 = { .context = pd->context, .pd = pd, .rkey = 0x4401,
				     .type = IBV_MW_TYPE_2 };

		wr[0].bind_mw.mw = &other;
		wr[0].bind_mw.bind_info.mr = mr;
		CHECK_EQ(ibv_post_send(qp, &wr[0], &bad), EINVAL);
		wr[0].bind_mw.mw = &notype;
		CHECK_EQ(ibv_post_send(qp, &wr[0], &bad), EINVAL);
		wr[0].bind_mw.mw = &t2;
		wr[0].bind_mw.bind_info.mr = NULL;
		CHECK_EQ(ibv_post_send(qp, &wr[0], &bad), EINVAL);
	}
	wr[0].opcode = (enum ibv_wr_opcode)99;
	CHECK_EQ(ibv_post_send(qp, &wr[0], &bad), EINVAL);
	CHECK_EQ(mock_doorbells(qp->handle), dbs);
	CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 0);

	/* BIND_MW, LOCAL_INV, SEND_WITH_INV encode their fields
	 * (proto::wqe); type 2 carries the caller's new key. */
	{
		struct ibv_mw t2 = { .context = pd->context, .pd = pd, .rkey = 0x4401,
				     .type = IBV_MW_TYPE_2 };

		memset(wr, 0, sizeof(wr));
		wr[0].wr_id = 0x77;
		wr[0].opcode = IBV_WR_BIND_MW;
		wr[0].send_flags = IBV_SEND_SIGNALED;
		wr[0].bind_mw.mw = &t2;
		wr[0].bind_mw.rkey = 0x4402;
		wr[0].bind_mw.bind_info = (struct ibv_mw_bind_info){
			mr, (uintptr_t)buf + 16, 100,
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ
		};
		CHECK_EQ(ibv_post_send(qp, &wr[0], &bad), 0);
		CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 1);
		CHECK_EQ(h.opcode, IBV_WR_BIND_MW);
		CHECK_EQ(h.wr_id, 0x77);
		CHECK_EQ(h.imm_or_inv, 0x4401);
		CHECK_EQ(h.rkey, 0x4402);
		CHECK_EQ(h.remote_addr, (uintptr_t)buf + 16);
		CHECK_EQ(h.compare_add, 100);
		CHECK_EQ(h.remote_qpn, mr->lkey);
		CHECK_EQ(h.remote_qkey, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
		CHECK_EQ(h.ah, 2);
		CHECK_EQ(h.num_sge, 0);
		wr[0].opcode = IBV_WR_LOCAL_INV;
		wr[0].invalidate_rkey = 0x4402;
		CHECK_EQ(ibv_post_send(qp, &wr[0], &bad), 0);
		CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 1);
		CHECK_EQ(h.opcode, IBV_WR_LOCAL_INV);
		CHECK_EQ(h.imm_or_inv, 0x4402);
		wr[0].opcode = IBV_WR_SEND_WITH_INV;
		CHECK_EQ(ibv_post_send(qp, &wr[0], &bad), 0);
		CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 1);
		CHECK_EQ(h.opcode, IBV_WR_SEND_WITH_INV);
		CHECK_EQ(h.imm_or_inv, 0x4402);
		dbs = mock_doorbells(qp->handle);
	}

	/* An error in the middle: the first WR is posted and rung. */
	memset(wr, 0, sizeof(wr));
	for (int i = 0; i < 3; i++) {
		wr[i].wr_id = 0x5000 + i;
		wr[i].opcode = IBV_WR_SEND;
		wr[i].next = i < 2 ? &wr[i + 1] : NULL;
	}
	wr[1].opcode = (enum ibv_wr_opcode)99;
	CHECK_EQ(ibv_post_send(qp, &wr[0], &bad), EINVAL);
	CHECK(bad == &wr[1]);
	CHECK_EQ(mock_doorbells(qp->handle), dbs + 1);
	CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 1);
	CHECK_EQ(h.wr_id, 0x5000);
	CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 0);

	/* Full SQ: 8 fit, the 9th gets ENOMEM; freeing slots lets more in;
	 * the indices wrap past 2^32 meanwhile. */
	memset(wr, 0, sizeof(wr));
	wr[0].opcode = IBV_WR_SEND;
	for (int i = 0; i < 8; i++) {
		wr[0].wr_id = 0x6000 + i;
		CHECK_EQ(ibv_post_send(qp, &wr[0], &bad), 0);
	}
	wr[0].wr_id = 0x6008;
	CHECK_EQ(ibv_post_send(qp, &wr[0], &bad), ENOMEM);
	CHECK(bad == &wr[0]);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 1);
		CHECK_EQ(h.wr_id, 0x6000 + i);
	}
	wr[0].next = &wr[1];
	wr[1] = wr[0];
	wr[1].next = &wr[2];
	wr[2] = wr[0];
	wr[2].next = NULL;
	wr[1].wr_id = 0x6009;
	wr[2].wr_id = 0x600a;
	CHECK_EQ(ibv_post_send(qp, &wr[0], &bad), ENOMEM);
	CHECK(bad == &wr[2]);
	for (int i = 2; i < 10; i++) {
		CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 1);
		CHECK_EQ(h.wr_id, 0x6000 + i);
	}
	CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 0);

	/* Receives: no doorbell. */
	dbs = mock_doorbells(qp->handle);
	memset(rwr, 0, sizeof(rwr));
	rwr[0].wr_id = 0x7000;
	rwr[0].sg_list = sge;
	rwr[0].num_sge = 3;
	rwr[0].next = &rwr[1];
	rwr[1].wr_id = 0x7001;
	rbad = (void *)1;
	CHECK_EQ(ibv_post_recv(qp, &rwr[0], &rbad), 0);
	CHECK(rbad == NULL);
	CHECK_EQ(mock_rq_pop(qp->handle, re, sizeof(re)), 1);
	{
		struct rwqe r;

		memcpy(&r, re, sizeof(r));
		CHECK_EQ(r.wr_id, 0x7000);
		CHECK_EQ(r.num_sge, 3);
		CHECK(!memcmp(r.reserved, "\0\0\0\0\0\0", 6));
		memcpy(s, re + 16, 3 * sizeof(s[0]));
		CHECK_EQ(s[0].addr, (uintptr_t)buf);
		CHECK_EQ(s[1].length, 200);
		CHECK_EQ(s[2].lkey, mr->lkey);
	}
	CHECK_EQ(mock_rq_pop(qp->handle, re, sizeof(re)), 1);
	CHECK_EQ(((struct rwqe *)re)->wr_id, 0x7001);
	CHECK_EQ(((struct rwqe *)re)->num_sge, 0);
	CHECK_EQ(mock_rq_pop(qp->handle, re, sizeof(re)), 0);
	rwr[0].next = NULL;
	rwr[0].num_sge = 4; /* > max_recv_sge 3 */
	CHECK_EQ(ibv_post_recv(qp, &rwr[0], &rbad), EINVAL);
	CHECK(rbad == &rwr[0]);
	rwr[0].num_sge = 1;
	for (int i = 0; i < 5; i++) {
		rwr[i] = rwr[0];
		rwr[i].wr_id = 0x7100 + i;
		rwr[i].next = i < 4 ? &rwr[i + 1] : NULL;
	}
	CHECK_EQ(ibv_post_recv(qp, &rwr[0], &rbad), ENOMEM);
	CHECK(rbad == &rwr[4]);
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(mock_rq_pop(qp->handle, re, sizeof(re)), 1);
		CHECK_EQ(((struct rwqe *)re)->wr_id, 0x7100 + i);
	}
	CHECK_EQ(mock_doorbells(qp->handle), dbs);

	/* The kernel publishes a consumer index beyond the producer: the SQ
	 * is broken for good. */
	memset(wr, 0, sizeof(wr));
	wr[0].opcode = IBV_WR_SEND;
	CHECK_EQ(mock_sq_poke_cons(qp->handle, 0x12345), 0);
	{
		int ret = 0, tries = 0;

		/* Detected at the latest when the SQ looks full. */
		while (!ret && tries++ < 9)
			ret = ibv_post_send(qp, &wr[0], &bad);
		CHECK_EQ(ret, EIO);
		CHECK_EQ(ibv_post_send(qp, &wr[0], &bad), EIO);
	}

	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
}

static void test_ud_uc(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;
	struct ibv_qp *qp;
	struct swqe h;
	uint8_t data[64];

	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.port_num = 1;
	aa.grh.hop_limit = 64;
	ah = ibv_create_ah(pd, &aa);
	CHECK(ah);
	if (!ah)
		return;
	CHECK(ah->pd == pd);

	mock_set_ring_start(0);
	qp = make_qp(pd, cq, IBV_QPT_UD, NULL);
	CHECK(qp);
	if (!qp)
		return;
	CHECK_EQ(to_rts(qp), 0);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 0x8000;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	memcpy(&wr.imm_data, "\x01\x02\x03\x04", 4);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = 0x123456;
	wr.wr.ud.remote_qkey = 0x11110000;
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0);
	CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 1);
	CHECK_EQ(h.opcode, IBV_WR_SEND_WITH_IMM);
	CHECK(!memcmp(&h.imm_or_inv, "\x01\x02\x03\x04", 4));
	CHECK_EQ(h.remote_qpn, 0x123456);
	CHECK_EQ(h.remote_qkey, 0x11110000);
	/* mock AH numbers are 500 + handle, never 0 */
	CHECK(h.ah > 500);

	wr.wr.ud.remote_qpn = 0x1000000; /* > 24 bits */
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), EINVAL);
	wr.wr.ud.remote_qpn = 1;
	wr.wr.ud.ah = NULL;
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), EINVAL);
	wr.wr.ud.ah = ah;
	wr.opcode = IBV_WR_RDMA_WRITE; /* not on UD */
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), EINVAL);
	CHECK(bad == &wr);
	CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 0);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_ah(ah), 0);

	qp = make_qp(pd, cq, IBV_QPT_UC, NULL);
	CHECK(qp);
	if (!qp)
		return;
	CHECK_EQ(to_rts(qp), 0);
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_RDMA_READ; /* not on UC */
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), EINVAL);
	wr.opcode = IBV_WR_RDMA_WRITE;
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0);
	CHECK_EQ(ibv_destroy_qp(qp), 0);

	errno = 0;
	CHECK(!make_qp(pd, cq, IBV_QPT_RAW_PACKET, NULL));
	CHECK_EQ(errno, EOPNOTSUPP);
}

/* ibv_create_cq_ex: same ring, polled with start/next/end_poll and the
 * read_* functions, and with ibv_poll_cq on the same CQ. */
static void test_cq_ex(struct ibv_context *ctx)
{
	struct ibv_cq_init_attr_ex ca;
	struct ibv_poll_cq_attr pa = { 0 };
	struct ibv_cq_ex *cq;
	struct ibv_wc wc[2];
	struct cqe c;
	uint32_t imm;
	int live = mock_live_objects();

	memset(&ca, 0, sizeof(ca));
	ca.cqe = 4;
	ca.wc_flags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_CVLAN;
	errno = 0;
	CHECK(!ibv_create_cq_ex(ctx, &ca));
	CHECK_EQ(errno, EOPNOTSUPP);
	ca.wc_flags = IBV_WC_STANDARD_FLAGS;
	ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
	ca.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
	errno = 0;
	CHECK(!ibv_create_cq_ex(ctx, &ca));
	CHECK_EQ(errno, EOPNOTSUPP);
	ca.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
	ca.cqe = 0;
	errno = 0;
	CHECK(!ibv_create_cq_ex(ctx, &ca));
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(mock_live_objects(), live);

	ca.cqe = 4;
	mock_set_ring_start(0xfffffffeu);
	cq = ibv_create_cq_ex(ctx, &ca);
	CHECK(cq);
	if (!cq)
		return;
	CHECK_EQ(ibv_cq_ex_to_cq(cq)->cqe, 4);
	CHECK(ibv_cq_ex_to_cq(cq)->context == ctx);
	CHECK_EQ(ibv_start_poll(cq, &pa), ENOENT);

	for (uint64_t id = 1; id <= 3; id++) {
		c = make_cqe(id);
		CHECK_EQ(mock_cq_push(ibv_cq_ex_to_cq(cq)->handle, &c), 0);
	}
	pa.comp_mask = 1;
	CHECK_EQ(ibv_start_poll(cq, &pa), EINVAL);
	pa.comp_mask = 0;
	CHECK_EQ(ibv_start_poll(cq, &pa), 0);
	for (uint64_t id = 1;; id++) {
		c = make_cqe(id);
		CHECK_EQ(cq->wr_id, id);
		CHECK_EQ(cq->status, c.status);
		CHECK_EQ(ibv_wc_read_opcode(cq), c.opcode);
		CHECK_EQ(ibv_wc_read_vendor_err(cq), 0x77);
		CHECK_EQ(ibv_wc_read_byte_len(cq), c.byte_len);
		imm = ibv_wc_read_imm_data(cq);
		CHECK(!memcmp(&imm, "\x11\x22\x33\x44", 4));
		CHECK_EQ(ibv_wc_read_qp_num(cq), 0x123456);
		CHECK_EQ(ibv_wc_read_src_qp(cq), 0xabcdef);
		CHECK_EQ(ibv_wc_read_wc_flags(cq), IBV_WC_WITH_IMM | IBV_WC_GRH);
		CHECK_EQ(ibv_wc_read_slid(cq), 0x1234);
		CHECK_EQ(ibv_wc_read_sl(cq), 5);
		CHECK_EQ(ibv_wc_read_dlid_path_bits(cq), 9);
		if (id == 2)
			break;
		CHECK_EQ(ibv_next_poll(cq), 0);
	}
	ibv_end_poll(cq);
	/* Every CQE read so far was released to the kernel. */
	CHECK_EQ(mock_cq_cons(ibv_cq_ex_to_cq(cq)->handle), 0u);
	/* The rest through the classic API. */
	CHECK_EQ(ibv_poll_cq(ibv_cq_ex_to_cq(cq), 2, wc), 1);
	check_wc(&wc[0], 3);
	CHECK_EQ(ibv_start_poll(cq, NULL), ENOENT);
	c = make_cqe(4);
	CHECK_EQ(mock_cq_push(ibv_cq_ex_to_cq(cq)->handle, &c), 0);
	CHECK_EQ(ibv_start_poll(cq, &pa), 0);
	CHECK_EQ(cq->wr_id, 4);
	CHECK_EQ(ibv_next_poll(cq), ENOENT);
	ibv_end_poll(cq);
	/* No timestamp readers on a CQ that did not ask for them. */
	CHECK(!cq->read_completion_ts && !cq->read_completion_wallclock_ns);
	CHECK_EQ(ibv_req_notify_cq(ibv_cq_ex_to_cq(cq), 0), 0);
	CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
	CHECK_EQ(mock_live_objects(), live);

	/* Completion timestamps: the CQE's device clock (CLOCK_MONOTONIC
	 * ns), and as wall-clock ns with the offset of the two clocks. */
	ca.wc_flags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
		      IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
	cq = ibv_create_cq_ex(ctx, &ca);
	CHECK(cq);
	if (!cq)
		return;
	/* the kernel was asked for timestamped CQEs */
	CHECK_EQ(mock_last_cq_flags(), IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION);
	CHECK(cq->read_completion_ts && cq->read_completion_wallclock_ns);
	c = make_cqe(5);
	CHECK_EQ(mock_cq_push(ibv_cq_ex_to_cq(cq)->handle, &c), 0);
	CHECK_EQ(ibv_start_poll(cq, &pa), 0);
	CHECK_EQ(cq->wr_id, 5);
	CHECK_EQ(ibv_wc_read_completion_ts(cq), c.timestamp);
	{
		struct timespec m0, r, m1;
		uint64_t wall, lo, hi;

		clock_gettime(CLOCK_MONOTONIC, &m0);
		clock_gettime(CLOCK_REALTIME, &r);
		wall = ibv_wc_read_completion_wallclock_ns(cq);
		clock_gettime(CLOCK_MONOTONIC, &m1);
		/* wall = ts + (realtime - monotonic), the offset taken during
		 * the call: between the offsets seen just before and after */
		lo = c.timestamp + (uint64_t)r.tv_sec * 1000000000ull + (uint64_t)r.tv_nsec -
		     ((uint64_t)m1.tv_sec * 1000000000ull + (uint64_t)m1.tv_nsec);
		hi = c.timestamp + (uint64_t)r.tv_sec * 1000000000ull + (uint64_t)r.tv_nsec -
		     ((uint64_t)m0.tv_sec * 1000000000ull + (uint64_t)m0.tv_nsec) + 1000000ull;
		CHECK(wall >= lo - 1000000ull && wall <= hi);
	}
	ibv_end_poll(cq);
	{
		struct ibv_values_ex v = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };
		struct timespec m0, m1;
		uint64_t t, a, b;

		clock_gettime(CLOCK_MONOTONIC, &m0);
		CHECK_EQ(ibv_query_rt_values_ex(ctx, &v), 0);
		clock_gettime(CLOCK_MONOTONIC, &m1);
		/* raw ticks (ns) in tv_nsec, as hardware providers report them */
		CHECK_EQ(v.raw_clock.tv_sec, 0);
		t = (uint64_t)v.raw_clock.tv_nsec;
		a = (uint64_t)m0.tv_sec * 1000000000ull + (uint64_t)m0.tv_nsec;
		b = (uint64_t)m1.tv_sec * 1000000000ull + (uint64_t)m1.tv_nsec;
		CHECK(a <= t && t <= b);
		v.comp_mask = 2;
		CHECK_EQ(ibv_query_rt_values_ex(ctx, &v), EINVAL);
	}
	CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
	/* Wall clock alone needs the kernel's timestamps too (libibverbs
	 * asks for them only for IBV_WC_EX_WITH_COMPLETION_TIMESTAMP). */
	ca.wc_flags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
	cq = ibv_create_cq_ex(ctx, &ca);
	CHECK(cq);
	if (!cq)
		return;
	CHECK_EQ(mock_last_cq_flags(), IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION);
	CHECK(!cq->read_completion_ts && cq->read_completion_wallclock_ns);
	CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
	CHECK_EQ(mock_live_objects(), live);
}

static struct ibv_qp *make_qp_ex(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq,
				 enum ibv_qp_type type, uint64_t ops)
{
	struct ibv_qp_init_attr_ex ia;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = type;
	ia.cap.max_send_wr = 6;
	ia.cap.max_recv_wr = 3;
	ia.cap.max_send_sge = 2;
	ia.cap.max_recv_sge = 2;
	ia.cap.max_inline_data = 40;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
	ia.pd = pd;
	if (ops) {
		ia.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		ia.send_ops_flags = ops;
	}
	return ibv_create_qp_ex(ctx, &ia);
}

/* ibv_create_qp_ex and the ibv_wr_* API writing into the SQ ring. */
static void test_qp_ex(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq)
{
	static uint8_t buf[4096] __attribute__((aligned(4096)));
	const uint64_t rc_ops = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
				IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
				IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
				IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
	struct ibv_sge sgl[2];
	struct ibv_data_buf db[2];
	struct ibv_ah_attr aa;
	struct ibv_qp_ex *qx;
	struct ibv_qp *qp;
	struct ibv_ah *ah;
	struct ibv_mr *mr;
	struct wsge s[2];
	struct swqe h;
	uint8_t data[64];
	int dbs;

	/* Without SEND_OPS_FLAGS: a plain QP, no ibv_qp_ex. */
	qp = make_qp_ex(ctx, pd, cq, IBV_QPT_UC, 0);
	CHECK(qp);
	if (!qp)
		return;
	CHECK(!ibv_qp_to_qp_ex(qp));
	CHECK_EQ(ibv_destroy_qp(qp), 0);

	/* Unsupported: operations the type lacks, MW binds, XRC. */
	errno = 0;
	CHECK(!make_qp_ex(ctx, pd, cq, IBV_QPT_UD, IBV_QP_EX_WITH_RDMA_WRITE));
	CHECK_EQ(errno, EOPNOTSUPP);
	errno = 0;
	CHECK(!make_qp_ex(ctx, pd, cq, IBV_QPT_RC, IBV_QP_EX_WITH_TSO));
	CHECK_EQ(errno, EOPNOTSUPP);
	errno = 0;
	CHECK(!make_qp_ex(ctx, pd, cq, IBV_QPT_UC, IBV_QP_EX_WITH_ATOMIC_WRITE));
	CHECK_EQ(errno, EOPNOTSUPP);

	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	if (!mr)
		return;
	for (int i = 0; i < 64; i++)
		buf[i] = (uint8_t)(0x30 + i);

	mock_set_ring_start(0xfffffffeu);
	qp = make_qp_ex(ctx, pd, cq, IBV_QPT_RC, rc_ops);
	CHECK(qp);
	if (!qp)
		return;
	qx = ibv_qp_to_qp_ex(qp);
	CHECK(qx);
	if (!qx)
		return;
	CHECK(qx->wr_send && qx->wr_rdma_read && qx->wr_atomic_fetch_add);
	CHECK(!qx->wr_bind_mw && !qx->wr_local_inv && !qx->wr_send_inv);

	/* Not in RTS: wr_complete fails and posts nothing. */
	ibv_wr_start(qx);
	qx->wr_id = 1;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 8);
	CHECK_EQ(ibv_wr_complete(qx), EINVAL);
	CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 0);
	CHECK_EQ(to_rts(qp), 0);

	/* Five requests in one batch, one doorbell. */
	dbs = mock_doorbells(qp->handle);
	ibv_wr_start(qx);
	qx->wr_id = 0x10;
	qx->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
	ibv_wr_send_imm(qx, htobe32(0x01020304));
	sgl[0] = (struct ibv_sge){ (uintptr_t)buf, 16, mr->lkey };
	sgl[1] = (struct ibv_sge){ (uintptr_t)buf + 100, 200, mr->lkey };
	ibv_wr_set_sge_list(qx, 2, sgl);
	qx->wr_id = 0x11;
	qx->wr_flags = 0;
	ibv_wr_rdma_write(qx, 0xabc, 0x1000);
	db[0] = (struct ibv_data_buf){ buf, 5 };
	db[1] = (struct ibv_data_buf){ buf + 10, 3 };
	ibv_wr_set_inline_data_list(qx, 2, db);
	qx->wr_id = 0x12;
	ibv_wr_rdma_read(qx, 0xdef, 0x2000);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf + 64, 32);
	qx->wr_id = 0x13;
	ibv_wr_atomic_cmp_swp(qx, 0x55, 0x3000, 7, 9);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf + 128, 8);
	qx->wr_id = 0x14;
	ibv_wr_atomic_fetch_add(qx, 0x66, 0x4000, 3);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf + 136, 8);
	/* Nothing reaches the ring before wr_complete. */
	CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 0);
	CHECK_EQ(ibv_wr_complete(qx), 0);
	CHECK_EQ(mock_doorbells(qp->handle), dbs + 1);

	CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 1);
	CHECK_EQ(h.wr_id, 0x10);
	CHECK_EQ(h.opcode, IBV_WR_SEND_WITH_IMM);
	CHECK_EQ(h.flags, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED);
	CHECK(!memcmp(&h.imm_or_inv, "\x01\x02\x03\x04", 4));
	CHECK_EQ(h.num_sge, 2);
	memcpy(s, data, sizeof(s));
	CHECK_EQ(s[0].addr, (uintptr_t)buf);
	CHECK_EQ(s[0].length, 16);
	CHECK_EQ(s[1].addr, (uintptr_t)buf + 100);
	CHECK_EQ(s[1].length, 200);
	CHECK_EQ(s[1].lkey, mr->lkey);

	CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 1);
	CHECK_EQ(h.wr_id, 0x11);
	CHECK_EQ(h.opcode, IBV_WR_RDMA_WRITE);
	CHECK_EQ(h.flags, IBV_SEND_INLINE);
	CHECK_EQ(h.rkey, 0xabc);
	CHECK_EQ(h.remote_addr, 0x1000);
	CHECK_EQ(h.inline_len, 8);
	CHECK(!memcmp(data, buf, 5) && !memcmp(data + 5, buf + 10, 3));

	CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 1);
	CHECK_EQ(h.wr_id, 0x12);
	CHECK_EQ(h.opcode, IBV_WR_RDMA_READ);
	CHECK_EQ(h.rkey, 0xdef);
	CHECK_EQ(h.remote_addr, 0x2000);
	memcpy(s, data, sizeof(s[0]));
	CHECK_EQ(s[0].addr, (uintptr_t)buf + 64);
	CHECK_EQ(s[0].length, 32);

	CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 1);
	CHECK_EQ(h.wr_id, 0x13);
	CHECK_EQ(h.opcode, IBV_WR_ATOMIC_CMP_AND_SWP);
	CHECK_EQ(h.compare_add, 7);
	CHECK_EQ(h.swap, 9);
	CHECK_EQ(h.remote_addr, 0x3000);

	CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 1);
	CHECK_EQ(h.wr_id, 0x14);
	CHECK_EQ(h.opcode, IBV_WR_ATOMIC_FETCH_AND_ADD);
	CHECK_EQ(h.compare_add, 3);
	CHECK_EQ(h.rkey, 0x66);
	CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 0);

	/* An invalid request fails the whole batch: nothing posted. */
	ibv_wr_start(qx);
	qx->wr_id = 0x20;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 4);
	ibv_wr_rdma_write(qx, 1, 2);
	ibv_wr_set_inline_data(qx, buf, 65); /* > max_inline_data (64) */
	CHECK_EQ(ibv_wr_complete(qx), EINVAL);
	CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 0);
	/* A setter without an operation, and wr_set_ud_addr on RC. */
	ibv_wr_start(qx);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 4);
	CHECK_EQ(ibv_wr_complete(qx), EINVAL);
	ibv_wr_start(qx);
	ibv_wr_send(qx);
	ibv_wr_set_ud_addr(qx, NULL, 1, 1);
	CHECK_EQ(ibv_wr_complete(qx), EINVAL);
	/* More than the SQ holds (8 slots): ENOMEM, nothing posted. */
	ibv_wr_start(qx);
	for (int i = 0; i < 9; i++) {
		qx->wr_id = 0x100 + (uint64_t)i;
		ibv_wr_send(qx);
		ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 1);
	}
	CHECK_EQ(ibv_wr_complete(qx), ENOMEM);
	CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 0);
	/* wr_abort drops what was built. */
	ibv_wr_start(qx);
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 4);
	ibv_wr_abort(qx);
	CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 0);
	/* Classic post_send still works on the same SQ; an empty batch too. */
	ibv_wr_start(qx);
	CHECK_EQ(ibv_wr_complete(qx), 0);
	{
		struct ibv_send_wr wr, *bad;

		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 0x30;
		wr.opcode = IBV_WR_SEND;
		CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0);
		CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 1);
		CHECK_EQ(h.wr_id, 0x30);
	}
	CHECK_EQ(ibv_destroy_qp(qp), 0);

	/* UD: the address is required. */
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.port_num = 1;
	aa.grh.hop_limit = 64;
	ah = ibv_create_ah(pd, &aa);
	CHECK(ah);
	qp = make_qp_ex(ctx, pd, cq, IBV_QPT_UD, IBV_QP_EX_WITH_SEND);
	CHECK(qp);
	if (!qp || !ah)
		return;
	qx = ibv_qp_to_qp_ex(qp);
	CHECK(qx && !qx->wr_send_imm);
	CHECK_EQ(to_rts(qp), 0);
	ibv_wr_start(qx);
	qx->wr_id = 0x40;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 0);
	CHECK_EQ(ibv_wr_complete(qx), EINVAL);
	ibv_wr_start(qx);
	qx->wr_id = 0x41;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
	ibv_wr_set_ud_addr(qx, ah, 0x654321, 0x11110000);
	ibv_wr_set_inline_data(qx, buf, 4);
	CHECK_EQ(ibv_wr_complete(qx), 0);
	CHECK_EQ(pop_send(qp, &h, data, sizeof(data)), 1);
	CHECK_EQ(h.wr_id, 0x41);
	CHECK_EQ(h.opcode, IBV_WR_SEND);
	CHECK_EQ(h.remote_qpn, 0x654321);
	CHECK_EQ(h.remote_qkey, 0x11110000);
	CHECK(h.ah > 500);
	CHECK_EQ(h.inline_len, 4);
	CHECK(!memcmp(data, buf, 4));
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_ah(ah), 0);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
}

/* An XRC SRQ of @xrcd with completions on @cq (NULL with errno). */
static struct ibv_srq *make_xrc_srq(struct ibv_context *ctx, struct ibv_pd *pd,
				    struct ibv_xrcd *xrcd, struct ibv_cq *cq, uint32_t mask)
{
	struct ibv_srq_init_attr_ex sa;

	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 4;
	sa.attr.max_sge = 2;
	sa.comp_mask = mask;
	sa.srq_type = IBV_SRQT_XRC;
	sa.pd = pd;
	sa.xrcd = xrcd;
	sa.cq = cq;
	return ibv_create_srq_ex(ctx, &sa);
}

/* An XRC_RECV QP of @xrcd (NULL with errno). */
static struct ibv_qp *make_xrc_tgt(struct ibv_context *ctx, struct ibv_xrcd *xrcd)
{
	struct ibv_qp_init_attr_ex ia;

	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_XRC_RECV;
	ia.comp_mask = IBV_QP_INIT_ATTR_XRCD;
	ia.xrcd = xrcd;
	return ibv_create_qp_ex(ctx, &ia);
}

/* Neither post verb works on a QP without queues (an XRC target). */
static void check_no_queues(struct ibv_qp *qp)
{
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_recv_wr rwr, *rbad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_SEND;
	CHECK_EQ(to_rts(qp), 0);
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), EINVAL);
	CHECK(bad == &wr);
	memset(&rwr, 0, sizeof(rwr));
	CHECK_EQ(ibv_post_recv(qp, &rwr, &rbad), EINVAL);
	CHECK(rbad == &rwr);
}

/*
 * XRC: domains, XRC SRQs (srq_num, receives), XRC_SEND QPs (the remote
 * SRQ number at offset 48 of the send WQE, through ibv_post_send and
 * ibv_wr_set_xrc_srqn; no receive queue), XRC_RECV QPs (nothing mapped,
 * no posting) and ibv_open_qp.
 */
static void test_xrc(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq)
{
	static uint8_t buf[256];
	const uint32_t xrc_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
				  IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	struct ibv_xrcd_init_attr xa;
	struct ibv_srq_init_attr_ex sa;
	struct ibv_qp_open_attr oa;
	struct ibv_send_wr wr, *bad;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_sge sge = { (uintptr_t)buf, 100, 0x77 };
	struct ibv_qp_cap cap;
	struct ibv_qp *ini, *tgt, *opened;
	struct ibv_qp_ex *qx;
	struct ibv_srq *srq, *basic;
	struct ibv_xrcd *xrcd;
	struct swqe h;
	struct rwqe rh;
	uint8_t data[64], e[64];
	uint32_t srqn = 0;
	int maps, objects;

	objects = mock_live_objects();
	memset(&xa, 0, sizeof(xa));
	xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
	xa.fd = -1;
	xa.oflags = O_CREAT;
	xrcd = ibv_open_xrcd(ctx, &xa);
	CHECK(xrcd);
	if (!xrcd)
		return;
	CHECK(xrcd->context == ctx);
	CHECK_EQ(mock_live_objects(), objects + 1);

	/* An XRC SRQ: its number is the core response's srqn. */
	srq = make_xrc_srq(ctx, pd, xrcd, cq, xrc_mask);
	CHECK(srq);
	if (!srq)
		return;
	CHECK_EQ(ibv_get_srq_num(srq, &srqn), 0);
	CHECK(srqn > 2000 && srqn < 2000 + 64);
	/* Receives go to its ring as to a basic SRQ's. */
	memset(&rwr, 0, sizeof(rwr));
	rwr.wr_id = 0x5150;
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	CHECK_EQ(ibv_post_srq_recv(srq, &rwr, &rbad), 0);
	CHECK_EQ(mock_srq_pop(srq->handle, e, 32), 1);
	memcpy(&rh, e, sizeof(rh));
	CHECK_EQ(rh.wr_id, 0x5150);
	CHECK_EQ(rh.num_sge, 1);
	CHECK(!memcmp(e + 16, &(struct wsge){ (uintptr_t)buf, 100, 0x77 }, 16));
	/* The domain is busy while the SRQ uses it. */
	CHECK_EQ(ibv_close_xrcd(xrcd), EBUSY);

	/* Wrong XRC SRQs: no CQ, tag matching; a broken answer. */
	errno = 0;
	CHECK(!make_xrc_srq(ctx, pd, xrcd, cq, xrc_mask & ~IBV_SRQ_INIT_ATTR_CQ));
	CHECK_EQ(errno, EINVAL);
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 4;
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ |
		       IBV_SRQ_INIT_ATTR_TM;
	sa.srq_type = IBV_SRQT_TM;
	sa.pd = pd;
	sa.cq = cq;
	sa.tm_cap.max_num_tags = 4;
	errno = 0;
	CHECK(!ibv_create_srq_ex(ctx, &sa));
	CHECK_EQ(errno, EOPNOTSUPP);
	mock_set_fault("srq_srqn_mismatch");
	errno = 0;
	CHECK(!make_xrc_srq(ctx, pd, xrcd, cq, xrc_mask));
	CHECK_EQ(errno, EPROTO);

	/* A basic SRQ through create_srq_ex (a CQ given): no SRQ number. */
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ;
	sa.srq_type = IBV_SRQT_BASIC;
	sa.attr.max_sge = 1;
	basic = ibv_create_srq_ex(ctx, &sa);
	CHECK(basic);
	if (basic) {
		CHECK(sa.attr.max_wr >= 4);
		CHECK_EQ(ibv_get_srq_num(basic, &srqn), EINVAL);
		CHECK_EQ(ibv_destroy_srq(basic), 0);
	}

	/* XRC_SEND through ibv_create_qp: an SQ, no RQ. */
	ini = make_qp(pd, cq, IBV_QPT_XRC_SEND, &cap);
	CHECK(ini);
	if (!ini)
		return;
	CHECK_EQ(cap.max_recv_wr, 0);
	CHECK(cap.max_send_wr >= 6);
	memset(&rwr, 0, sizeof(rwr));
	rbad = NULL;
	CHECK_EQ(ibv_post_recv(ini, &rwr, &rbad), EINVAL);
	CHECK(rbad == &rwr);
	CHECK_EQ(to_rts(ini), 0);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 0x1234;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.wr.rdma.remote_addr = 0x9000;
	wr.wr.rdma.rkey = 0x42;
	wr.qp_type.xrc.remote_srqn = srqn;
	CHECK_EQ(ibv_post_send(ini, &wr, &bad), 0);
	CHECK_EQ(pop_send(ini, &h, data, 16), 1);
	CHECK_EQ(h.wr_id, 0x1234);
	CHECK_EQ(h.opcode, IBV_WR_RDMA_WRITE);
	CHECK_EQ(h.remote_addr, 0x9000);
	CHECK_EQ(h.rkey, 0x42);
	CHECK_EQ(h.remote_qpn, srqn);	/* offset 48 */
	CHECK_EQ(h.num_sge, 1);
	/* Not RC's ATOMIC WRITE; no SRQ number above 24 bits. */
	wr.opcode = IBV_WR_ATOMIC_WRITE;
	bad = NULL;
	CHECK_EQ(ibv_post_send(ini, &wr, &bad), EINVAL);
	CHECK(bad == &wr);
	wr.opcode = IBV_WR_SEND;
	wr.qp_type.xrc.remote_srqn = 1u << 24;
	CHECK_EQ(ibv_post_send(ini, &wr, &bad), EINVAL);
	CHECK_EQ(pop_send(ini, &h, data, 16), 0);
	CHECK_EQ(ibv_destroy_qp(ini), 0);

	/* XRC_SEND with the work-request API: ibv_wr_set_xrc_srqn. */
	errno = 0;
	CHECK(!make_qp_ex(ctx, pd, cq, IBV_QPT_XRC_SEND, IBV_QP_EX_WITH_ATOMIC_WRITE));
	CHECK_EQ(errno, EOPNOTSUPP);
	ini = make_qp_ex(ctx, pd, cq, IBV_QPT_XRC_SEND,
			 IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ);
	CHECK(ini);
	if (!ini)
		return;
	qx = ibv_qp_to_qp_ex(ini);
	CHECK(qx);
	CHECK_EQ(to_rts(ini), 0);
	ibv_wr_start(qx);
	qx->wr_id = 0x77;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
	ibv_wr_set_xrc_srqn(qx, 0xabcdef);
	ibv_wr_set_sge(qx, 0x88, (uintptr_t)buf, 8);
	qx->wr_id = 0x78;
	ibv_wr_rdma_read(qx, 0x43, 0xa000);
	ibv_wr_set_sge(qx, 0x88, (uintptr_t)buf, 8);
	ibv_wr_set_xrc_srqn(qx, srqn);
	CHECK_EQ(ibv_wr_complete(qx), 0);
	CHECK_EQ(pop_send(ini, &h, data, 16), 1);
	CHECK_EQ(h.wr_id, 0x77);
	CHECK_EQ(h.opcode, IBV_WR_SEND);
	CHECK_EQ(h.remote_qpn, 0xabcdef);
	CHECK_EQ(pop_send(ini, &h, data, 16), 1);
	CHECK_EQ(h.wr_id, 0x78);
	CHECK_EQ(h.opcode, IBV_WR_RDMA_READ);
	CHECK_EQ(h.remote_qpn, srqn);
	/* A request without its SRQ number fails the batch. */
	ibv_wr_start(qx);
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, 0x88, (uintptr_t)buf, 8);
	CHECK_EQ(ibv_wr_complete(qx), EINVAL);
	CHECK_EQ(pop_send(ini, &h, data, 16), 0);
	CHECK_EQ(ibv_destroy_qp(ini), 0);

	/* XRC_RECV: no PD, no CQ, nothing mapped, nothing to post. */
	maps = mock_user_maps();
	tgt = make_xrc_tgt(ctx, xrcd);
	CHECK(tgt);
	if (!tgt)
		return;
	CHECK_EQ(mock_user_maps(), maps);
	CHECK(!tgt->pd && !tgt->send_cq && !tgt->recv_cq);
	CHECK_EQ(tgt->qp_type, IBV_QPT_XRC_RECV);
	check_no_queues(tgt);

	/* ibv_open_qp: another handle to the target. */
	memset(&oa, 0, sizeof(oa));
	oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
	oa.qp_num = tgt->qp_num;
	oa.xrcd = xrcd;
	oa.qp_type = IBV_QPT_RC;
	errno = 0;
	CHECK(!ibv_open_qp(ctx, &oa));
	CHECK_EQ(errno, EINVAL);
	oa.qp_type = IBV_QPT_XRC_RECV;
	opened = ibv_open_qp(ctx, &oa);
	CHECK(opened);
	if (opened) {
		CHECK_EQ(opened->qp_num, tgt->qp_num);
		CHECK(opened->handle != tgt->handle);
		CHECK_EQ(opened->qp_type, IBV_QPT_XRC_RECV);
		CHECK_EQ(mock_user_maps(), maps);
		check_no_queues(opened);
		CHECK_EQ(ibv_destroy_qp(opened), 0);
	}
	CHECK_EQ(ibv_destroy_qp(tgt), 0);
	CHECK_EQ(ibv_destroy_srq(srq), 0);
	CHECK_EQ(ibv_close_xrcd(xrcd), 0);
	CHECK_EQ(mock_live_objects(), objects);
}

static void test_hostile(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq)
{
	static const struct {
		const char *fault;
		int kind; /* 0 CQ, 1 QP, 2 AH */
		int err;
	} cases[] = {
		{ "cq_entries_not_pow2", 0, EPROTO },
		{ "cq_ring_small", 0, EPROTO },
		{ "cq_entry_small", 0, EPROTO },
		{ "cq_cqe_exceeds", 0, EPROTO },
		{ "cq_huge_entries", 0, EPROTO },
		{ "cq_bad_header", 0, EPROTO },
		{ "cq_bad_offset", 0, EINVAL },
		{ "qp_sge_overclaim", 1, EPROTO },
		{ "qp_inline_overclaim", 1, EPROTO },
		{ "qp_no_rq", 1, EPROTO },
		{ "qp_fewer_wr", 1, EPROTO },
		{ "qp_rq_entry_odd", 1, EPROTO },
		{ "qp_qpn_mismatch", 1, EPROTO },
		{ "qp_bad_header", 1, EPROTO },
		{ "ah_zero", 2, EPROTO },
	};
	int live = mock_live_objects(), maps = mock_user_maps();
	struct ibv_ah_attr aa;
	void *obj;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		mock_set_fault(cases[i].fault);
		errno = 0;
		if (cases[i].kind == 0) {
			obj = ibv_create_cq(ctx, 4, NULL, NULL, 0);
		} else if (cases[i].kind == 1) {
			obj = make_qp(pd, cq, IBV_QPT_RC, NULL);
		} else {
			memset(&aa, 0, sizeof(aa));
			aa.port_num = 1;
			obj = ibv_create_ah(pd, &aa);
		}
		if (obj || errno != cases[i].err)
			printf("FAIL %d: fault %s: obj %p errno %d\n", __LINE__,
			       cases[i].fault, obj, errno);
		failures += obj || errno != cases[i].err;
		/* The kernel object was destroyed again, nothing stays mapped. */
		CHECK_EQ(mock_live_objects(), live);
		CHECK_EQ(mock_user_maps(), maps);
	}
	mock_set_fault("");
}

int main(void)
{
	struct ibv_device **list, *dev = NULL;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	int n;

	load_hooks();
	list = ibv_get_device_list(&n);
	if (!list) {
		printf("device_list_errno=%d\n", errno);
		return 2;
	}
	for (int i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "rroce0"))
			dev = list[i];
	if (!dev) {
		printf("rroce0=missing\n");
		return 3;
	}
	ctx = ibv_open_device(dev);
	if (!ctx) {
		printf("open_errno=%d\n", errno);
		return 4;
	}
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);

	test_cq(ctx);
	test_resize_cq(ctx);
	test_cq_ex(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(cq);
	if (pd && cq) {
		test_rc(pd, cq);
		test_ud_uc(pd, cq);
		test_qp_ex(ctx, pd, cq);
		test_xrc(ctx, pd, cq);
		test_hostile(ctx, pd, cq);
		CHECK_EQ(ibv_destroy_cq(cq), 0);
	}
	CHECK_EQ(mock_live_objects(), 0);
	CHECK_EQ(mock_user_maps(), 0);
	if (pd)
		CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
	ibv_free_device_list(list);
	if (failures) {
		printf("failures=%d\n", failures);
		return 1;
	}
	printf("datapath=ok\n");
	return 0;
}
