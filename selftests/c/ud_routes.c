// SPDX-License-Identifier: GPL-2.0
/*
 * One UD QP sends datagrams to a peer, to a multicast group and to the
 * peer again: each must take its own route.
 *
 * Usage: ud_routes DEV0 GID_INDEX0 DEV1 GID_INDEX1
 *
 * QP S and QP M (attached to ::ffff:239.77.2.3 with ibv_attach_mcast) are
 * on DEV0, QP R on DEV1.  S sends 256 bytes to R, to the group (QPN
 * 0xFFFFFF: M, through the IP stack's multicast loopback), to R; each
 * receive must complete with the bytes sent, and M must get exactly one
 * datagram.  (pyverbs 44 has no ibv_attach_mcast, hence C.)  A route
 * cached per QP and keyed by the source address only sent the group's
 * datagram on the peer's route, so M got nothing.
 *
 * Prints "# ..." lines; exits 0 if every datagram arrived intact.
 */
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define QKEY 0x11117777u
#define MSG 256
#define GRH 40

struct end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf;
	int gid_index;
	union ibv_gid gid;
};

static void die(const char *what)
{
	printf("# %s failed\n", what);
	exit(1);
}

static struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; l && l[i]; i++)
		if (!strcmp(ibv_get_device_name(l[i]), name))
			ctx = ibv_open_device(l[i]);
	if (l)
		ibv_free_device_list(l);
	if (!ctx)
		die(name);
	return ctx;
}

static void ud_qp(struct end *e)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = e->cq, .recv_cq = e->cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };

	e->qp = ibv_create_qp(e->pd, &ia);
	if (!e->qp)
		die("ibv_create_qp");
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		die("modify to INIT");
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE))
		die("modify to RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("modify to RTS");
}

static void setup(struct end *e, struct ibv_context *ctx, struct ibv_pd *pd, int gid_index)
{
	e->ctx = ctx;
	e->pd = pd;
	e->gid_index = gid_index;
	if (ibv_query_gid(ctx, 1, gid_index, &e->gid))
		die("ibv_query_gid");
	e->cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!e->cq)
		die("ibv_create_cq");
	e->buf = calloc(1, 4096);
	e->mr = e->buf ? ibv_reg_mr(pd, e->buf, 4096, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!e->mr)
		die("ibv_reg_mr");
	ud_qp(e);
}

/* One completion of @cq within 10 s: its status, or -1. */
static int poll1(struct ibv_cq *cq, struct ibv_wc *wc)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n < 0)
			return -1;
		if (n == 1)
			return wc->status;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec >= 10)
			return -1;
	}
}

int main(int argc, char **argv)
{
	struct end s = {}, m = {}, r = {};
	struct ibv_context *c0, *c1;
	struct ibv_pd *pd0;
	union ibv_gid mgid = {};
	struct ibv_ah *to_r, *to_g;
	int ok = 1;

	if (argc != 5) {
		fprintf(stderr, "usage: %s DEV0 GID_INDEX0 DEV1 GID_INDEX1\n", argv[0]);
		return 2;
	}
	c0 = open_dev(argv[1]);
	c1 = open_dev(argv[3]);
	pd0 = ibv_alloc_pd(c0);
	if (!pd0)
		die("ibv_alloc_pd");
	setup(&s, c0, pd0, atoi(argv[2]));
	setup(&m, c0, pd0, atoi(argv[2]));
	setup(&r, c1, ibv_alloc_pd(c1), atoi(argv[4]));
	/* ::ffff:239.77.2.3 */
	mgid.raw[10] = mgid.raw[11] = 0xff;
	mgid.raw[12] = 239;
	mgid.raw[13] = 77;
	mgid.raw[14] = 2;
	mgid.raw[15] = 3;
	if (ibv_attach_mcast(m.qp, &mgid, 0))
		die("ibv_attach_mcast");
	{
		struct ibv_ah_attr a = { .is_global = 1, .port_num = 1,
					 .grh = { .dgid = r.gid, .sgid_index = s.gid_index, .hop_limit = 64 } };

		to_r = ibv_create_ah(pd0, &a);
		a.grh.dgid = mgid;
		to_g = ibv_create_ah(pd0, &a);
		if (!to_r || !to_g)
			die("ibv_create_ah");
	}
	for (int i = 0; i < 3; i++) {
		struct end *dst = i == 1 ? &m : &r;
		struct ibv_ah *ah = i == 1 ? to_g : to_r;
		uint32_t qpn = i == 1 ? 0xFFFFFF : r.qp->qp_num;
		struct ibv_sge rs = { (uintptr_t)dst->buf, GRH + MSG, dst->mr->lkey };
		struct ibv_recv_wr rwr = { .wr_id = 20 + i, .sg_list = &rs, .num_sge = 1 }, *rbad;
		struct ibv_sge ss = { (uintptr_t)s.buf, MSG, s.mr->lkey };
		struct ibv_send_wr swr = { .wr_id = 30 + i, .sg_list = &ss, .num_sge = 1,
					   .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *sbad;
		const char *to = i == 1 ? "the group" : "the peer";
		struct ibv_wc wc;
		int st;

		memset(dst->buf, 0, GRH + MSG);
		for (int k = 0; k < MSG; k++)
			s.buf[k] = (char)(i * 7 + k);
		swr.wr.ud.ah = ah;
		swr.wr.ud.remote_qpn = qpn;
		swr.wr.ud.remote_qkey = QKEY;
		if (ibv_post_recv(dst->qp, &rwr, &rbad) || ibv_post_send(s.qp, &swr, &sbad))
			die("post");
		st = poll1(s.cq, &wc);
		if (st != IBV_WC_SUCCESS) {
			printf("# datagram %d to %s: send completion status %d\n", i, to, st);
			ok = 0;
			continue;
		}
		st = poll1(dst->cq, &wc);
		if (st != IBV_WC_SUCCESS || wc.wr_id != 20u + i || wc.byte_len != GRH + MSG ||
		    memcmp(dst->buf + GRH, s.buf, MSG)) {
			printf("# datagram %d to %s: not received intact (status %d, wr_id %llu, byte_len %u)\n",
			       i, to, st, (unsigned long long)wc.wr_id, wc.byte_len);
			ok = 0;
			continue;
		}
		printf("# datagram %d to %s: received intact\n", i, to);
	}
	{
		struct ibv_sge ms = { (uintptr_t)m.buf, GRH + MSG, m.mr->lkey };
		struct ibv_sge rs = { (uintptr_t)r.buf, GRH + MSG, r.mr->lkey };
		struct ibv_recv_wr mwr = { .wr_id = 40, .sg_list = &ms, .num_sge = 1 }, *bad;
		struct ibv_recv_wr rwr = { .wr_id = 41, .sg_list = &rs, .num_sge = 1 };
		struct ibv_wc wc;
		struct timespec d = { 0, 300 * 1000 * 1000 };

		if (ibv_post_recv(m.qp, &mwr, &bad) || ibv_post_recv(r.qp, &rwr, &bad))
			die("post");
		nanosleep(&d, NULL);
		if (ibv_poll_cq(m.cq, 1, &wc) != 0 || ibv_poll_cq(r.cq, 1, &wc) != 0) {
			printf("# an extra datagram arrived\n");
			ok = 0;
		}
	}
	ibv_detach_mcast(m.qp, &mgid, 0);
	return ok ? 0 : 1;
}
