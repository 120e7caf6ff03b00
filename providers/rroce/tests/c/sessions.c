// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * The two sessions of the extended verbs API are critical sections
 * against other threads (through the mock kernel, tests/load.rs):
 * - ibv_wr_start ... ibv_wr_complete: another thread's ibv_post_send on
 *   the QP waits for it, and the request built sends its own buffer (it
 *   used to send the other thread's: the SQ's scratch SGEs were shared);
 * - ibv_start_poll ... ibv_end_poll: another thread's poll waits for it,
 *   and the read_* functions report this session's completion.
 * Prints "sessions=ok".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include "check.h"

struct swqe {
	uint64_t wr_id; uint8_t opcode, flags; uint16_t num_sge; uint32_t inline_len;
	uint32_t imm_or_inv, rkey; uint64_t remote_addr, compare_add, swap;
	uint32_t remote_qpn, remote_qkey, ah, reserved;
};
struct wsge { uint64_t addr; uint32_t length, lkey; };
struct cqe {
	uint64_t wr_id; uint8_t status, opcode, wc_flags, sl; uint32_t byte_len, imm_or_inv,
	qp_num, src_qp, vendor_err; uint16_t slid, pkey_index; uint8_t dlid_path_bits;
	uint8_t reserved[3]; uint64_t timestamp; uint8_t reserved2[16];
};
static int (*mock_cq_push)(uint32_t, const void *);
static int (*mock_sq_pop)(uint32_t, void *, size_t);

static struct ibv_qp *g_qp;
static uint8_t bufA[64], bufB[64];
static volatile int b_done;

static void *poster(void *arg)
{
	struct ibv_sge s = { .addr = (uintptr_t)bufB, .length = 8, .lkey = 0x22 };
	struct ibv_send_wr wr = { .wr_id = 2, .sg_list = &s, .num_sge = 1,
				  .opcode = IBV_WR_SEND }, *bad;
	(void)arg;
	CHECK_EQ(ibv_post_send(g_qp, &wr, &bad), 0);
	b_done = 1;
	return NULL;
}

static void test_wr_session(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr_ex ia;
	struct ibv_qp_attr a;
	struct ibv_qp_ex *qx;
	pthread_t t;
	uint8_t e[128];

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 6; ia.cap.max_recv_wr = 3;
	ia.cap.max_send_sge = 2; ia.cap.max_recv_sge = 2;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ia.pd = pd;
	ia.send_ops_flags = IBV_QP_EX_WITH_SEND;
	g_qp = ibv_create_qp_ex(ctx, &ia);
	CHECK(g_qp);
	for (int s = IBV_QPS_INIT; s <= IBV_QPS_RTS; s++) {
		memset(&a, 0, sizeof(a)); a.qp_state = s;
		CHECK_EQ(ibv_modify_qp(g_qp, &a, IBV_QP_STATE), 0);
	}
	qx = ibv_qp_to_qp_ex(g_qp);
	/* Thread A: inside its critical section, builds wr_id 1 from bufA. */
	ibv_wr_start(qx);
	qx->wr_id = 1;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, 0x11, (uintptr_t)bufA, 8);
	/* Thread B posts on the same QP: it must wait for A's wr_complete. */
	pthread_create(&t, NULL, poster, NULL);
	usleep(200000);
	CHECK_EQ(b_done, 0); /* B must not get into A's critical section */
	CHECK_EQ(ibv_wr_complete(qx), 0);
	pthread_join(t, NULL);
	for (int i = 0; i < 2; i++) {
		struct swqe h; struct wsge s;
		CHECK_EQ(mock_sq_pop(g_qp->handle, e, sizeof(e)), 1);
		memcpy(&h, e, sizeof(h)); memcpy(&s, e + 64, sizeof(s));
		printf("wqe wr_id=%llu sge.addr=%s lkey=%#x\n", (unsigned long long)h.wr_id,
		       s.addr == (uintptr_t)bufA ? "bufA" : s.addr == (uintptr_t)bufB ? "bufB" : "?",
		       s.lkey);
		if (h.wr_id == 1) {
			CHECK(s.addr == (uintptr_t)bufA); /* not B's buffer */
			CHECK_EQ(s.lkey, 0x11);
		}
	}
	CHECK_EQ(ibv_destroy_qp(g_qp), 0);
}

static struct ibv_cq_ex *g_cq;
static volatile int p_done;
static uint32_t b_len;

static void *poller(void *arg)
{
	(void)arg;
	if (ibv_start_poll(g_cq, NULL) == 0) {
		b_len = ibv_wc_read_byte_len(g_cq);
		ibv_end_poll(g_cq);
	}
	p_done = 1;
	return NULL;
}

static void test_poll_session(struct ibv_context *ctx)
{
	struct ibv_cq_init_attr_ex ca;
	struct cqe c;
	pthread_t t;

	memset(&ca, 0, sizeof(ca));
	ca.cqe = 4;
	ca.wc_flags = IBV_WC_STANDARD_FLAGS;
	g_cq = ibv_create_cq_ex(ctx, &ca);
	CHECK(g_cq);
	for (uint64_t i = 1; i <= 2; i++) {
		memset(&c, 0, sizeof(c));
		c.wr_id = i; c.opcode = IBV_WC_RECV; c.byte_len = (uint32_t)(10 * i);
		CHECK_EQ(mock_cq_push(ibv_cq_ex_to_cq(g_cq)->handle, &c), 0);
	}
	CHECK_EQ(ibv_start_poll(g_cq, NULL), 0);
	CHECK_EQ(g_cq->wr_id, 1);
	pthread_create(&t, NULL, poller, NULL);
	usleep(200000);
	CHECK_EQ(p_done, 0); /* B must not poll inside A's session */
	CHECK_EQ(g_cq->wr_id, 1); /* A's wr_id, not B's */
	CHECK_EQ(ibv_wc_read_byte_len(g_cq), 10); /* A's completion, not B's */
	ibv_end_poll(g_cq);
	pthread_join(t, NULL);
	CHECK_EQ(b_len, 20);
	CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(g_cq)), 0);
}

int main(void)
{
	struct ibv_device **list, *dev = NULL;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	int n;

	mock_cq_push = dlsym(RTLD_DEFAULT, "mock_cq_push");
	mock_sq_pop = dlsym(RTLD_DEFAULT, "mock_sq_pop");
	list = ibv_get_device_list(&n);
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "rroce0"))
			dev = list[i];
	if (!dev || !mock_cq_push) { printf("setup failed\n"); return 2; }
	ctx = ibv_open_device(dev);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	test_wr_session(ctx, pd, cq);
	test_poll_session(ctx);
	printf(failures ? "sessions=FAIL failures=%d\n" : "sessions=ok\n", failures);
	return failures != 0;
}
