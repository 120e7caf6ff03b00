// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * The provider's fast path in a loop, for instruction counting
 * (bench/icount/provider.sh runs it under valgrind --tool=callgrind).
 *
 * Run with providers/rroce/tests/c/mock_uverbs.so preloaded, which plays
 * the kernel: the doorbell is its write() hook, and this program moves
 * each WQE off the SQ/RQ ring (mock_sq_pop/mock_rq_pop) and writes the
 * CQE (mock_cq_push) where the kernel would.  So the count is that of
 * libibverbs + the provider + the mock's ring moves, no system call.
 *
 *   post_poll MODE N
 *     send1     N x { post_send 1 signaled 64 B inline SEND; poll 1 }
 *     send16    N x { post_send a list of 16 (the last signaled, the
 *               others unsignaled) 64 B SGE WRITEs; poll 1 }
 *     recv1     N x { post_recv 1 WR with 1 SGE; poll 1 (its RECV CQE) }
 *
 * Every WQE popped is checked (wr_id, opcode, length) and every
 * completion too; a mismatch exits 1.  Prints "MODE N ok".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

/* rroce_proto::wqe: the fields checked here */
struct swqe {
	uint64_t wr_id;
	uint8_t opcode;
	uint8_t flags;
	uint16_t num_sge;
	uint32_t inline_len;
};
struct rwqe {
	uint64_t wr_id;
	uint16_t num_sge;
};
struct cqe {
	uint64_t wr_id;
	uint8_t status;
	uint8_t opcode;
	uint8_t wc_flags;
	uint8_t sl;
	uint32_t byte_len;
	uint8_t rest[48];
};
_Static_assert(sizeof(struct cqe) == 64, "CQE");

static int (*cq_push)(uint32_t, const void *);
static int (*sq_pop)(uint32_t, void *, size_t);
static int (*rq_pop)(uint32_t, void *, size_t);

static void *hook(const char *name)
{
	void *p = dlsym(RTLD_DEFAULT, name);

	if (!p) {
		fprintf(stderr, "mock hook %s missing (LD_PRELOAD mock_uverbs.so)\n", name);
		exit(2);
	}
	return p;
}

static void fail(const char *what, long i)
{
	fprintf(stderr, "FAIL at %ld: %s\n", i, what);
	exit(1);
}

static void complete(struct ibv_cq *cq, uint64_t wr_id, int opcode, uint32_t len)
{
	struct cqe c;

	memset(&c, 0, sizeof(c));
	c.wr_id = wr_id;
	c.status = IBV_WC_SUCCESS;
	c.opcode = (uint8_t)opcode;
	c.byte_len = len;
	if (cq_push(cq->handle, &c))
		fail("CQ full", (long)wr_id);
}

static void poll_one(struct ibv_cq *cq, uint64_t wr_id, int opcode)
{
	struct ibv_wc wc;

	if (ibv_poll_cq(cq, 1, &wc) != 1)
		fail("no completion", (long)wr_id);
	if (wc.wr_id != wr_id || wc.status != IBV_WC_SUCCESS || (int)wc.opcode != opcode)
		fail("wrong completion", (long)wr_id);
}

int main(int argc, char **argv)
{
	static uint8_t buf[4096] __attribute__((aligned(4096)));
	struct ibv_device **list, *dev = NULL;
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	struct ibv_send_wr wr[16], *bad;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_sge sge[16];
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	uint8_t e[128];
	const char *mode;
	long n;
	int num;

	if (argc != 3) {
		fprintf(stderr, "usage: %s send1|send16|recv1 N\n", argv[0]);
		return 2;
	}
	mode = argv[1];
	n = atol(argv[2]);
	cq_push = hook("mock_cq_push");
	sq_pop = hook("mock_sq_pop");
	rq_pop = hook("mock_rq_pop");

	list = ibv_get_device_list(&num);
	for (int i = 0; list && i < num; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "rroce0"))
			dev = list[i];
	if (!dev)
		fail("no rroce0", 0);
	ctx = ibv_open_device(dev);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	cq = ctx ? ibv_create_cq(ctx, 64, NULL, NULL, 0) : NULL;
	mr = pd ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!mr || !cq)
		fail("setup", 0);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 32;
	ia.cap.max_recv_wr = 32;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = 64;
	qp = ibv_create_qp(pd, &ia);
	if (!qp)
		fail("create_qp", 0);
	for (int s = IBV_QPS_INIT; s <= IBV_QPS_RTS; s++) {
		memset(&a, 0, sizeof(a));
		a.qp_state = s;
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
			fail("modify_qp", s);
	}
	memset(buf, 0x5a, sizeof(buf));
	memset(wr, 0, sizeof(wr));
	for (int k = 0; k < 16; k++) {
		sge[k] = (struct ibv_sge){ (uintptr_t)buf + 64 * k, 64, mr->lkey };
		wr[k].sg_list = &sge[k];
		wr[k].num_sge = 1;
		wr[k].next = k < 15 ? &wr[k + 1] : NULL;
	}

	for (long i = 0; i < n; i++) {
		struct swqe *h = (struct swqe *)e;
		struct rwqe *r = (struct rwqe *)e;

		if (!strcmp(mode, "send1")) {
			wr[0].wr_id = (uint64_t)i;
			wr[0].opcode = IBV_WR_SEND;
			wr[0].send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
			wr[0].next = NULL;
			if (ibv_post_send(qp, &wr[0], &bad))
				fail("post_send", i);
			if (sq_pop(qp->handle, e, sizeof(e)) != 1 || h->wr_id != (uint64_t)i ||
			    h->opcode != IBV_WR_SEND || h->inline_len != 64 ||
			    memcmp(e + 64, buf, 64))
				fail("send WQE", i);
			complete(cq, (uint64_t)i, IBV_WC_SEND, 64);
			poll_one(cq, (uint64_t)i, IBV_WC_SEND);
		} else if (!strcmp(mode, "send16")) {
			for (int k = 0; k < 16; k++) {
				wr[k].wr_id = (uint64_t)(16 * i + k);
				wr[k].opcode = IBV_WR_RDMA_WRITE;
				wr[k].send_flags = k == 15 ? IBV_SEND_SIGNALED : 0;
				wr[k].wr.rdma.remote_addr = 0x10000;
				wr[k].wr.rdma.rkey = 0x77;
			}
			if (ibv_post_send(qp, &wr[0], &bad))
				fail("post_send", i);
			for (int k = 0; k < 16; k++)
				if (sq_pop(qp->handle, e, sizeof(e)) != 1 ||
				    h->wr_id != (uint64_t)(16 * i + k) ||
				    h->opcode != IBV_WR_RDMA_WRITE || h->num_sge != 1)
					fail("write WQE", i);
			complete(cq, (uint64_t)(16 * i + 15), IBV_WC_RDMA_WRITE, 0);
			poll_one(cq, (uint64_t)(16 * i + 15), IBV_WC_RDMA_WRITE);
		} else if (!strcmp(mode, "recv1")) {
			rwr.wr_id = (uint64_t)i;
			rwr.sg_list = &sge[0];
			rwr.num_sge = 1;
			rwr.next = NULL;
			if (ibv_post_recv(qp, &rwr, &rbad))
				fail("post_recv", i);
			if (rq_pop(qp->handle, e, 32) != 1 || r->wr_id != (uint64_t)i || r->num_sge != 1)
				fail("recv WQE", i);
			complete(cq, (uint64_t)i, IBV_WC_RECV, 64);
			poll_one(cq, (uint64_t)i, IBV_WC_RECV);
		} else {
			fail("unknown mode", 0);
		}
	}

	if (ibv_destroy_qp(qp) || ibv_dereg_mr(mr) || ibv_destroy_cq(cq) ||
	    ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		fail("teardown", n);
	ibv_free_device_list(list);
	printf("%s %ld ok\n", mode, n);
	return 0;
}
