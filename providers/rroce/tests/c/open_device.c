// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Test client: opens rroce0 through libibverbs and runs the control verbs
 * of the context (query device/port, PD, SRQ) plus one the provider does
 * not implement (alloc_dm), printing "key=value" lines.  The data-path
 * verbs are exercised by datapath.c, parent and thread domains by
 * parent_domain.c.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>

int main(void)
{
	struct ibv_device **list, *dev = NULL;
	struct ibv_device_attr_ex attr_ex;
	struct ibv_device_attr attr;
	struct ibv_port_attr port;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_srq_init_attr srq_attr;
	struct ibv_alloc_dm_attr dm_attr;
	struct ibv_srq *srq;
	struct ibv_dm *dm;
	int n, i, ret;

	list = ibv_get_device_list(&n);
	if (!list) {
		printf("device_list_errno=%d\n", errno);
		return 2;
	}
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "rroce0"))
			dev = list[i];
	if (!dev) {
		printf("rroce0=missing\n");
		return 3;
	}

	ctx = ibv_open_device(dev);
	if (!ctx) {
		printf("open_errno=%d\n", errno);
		ibv_free_device_list(list);
		return 0;
	}
	printf("open=ok\n");

	ret = ibv_query_device(ctx, &attr);
	printf("query_device=%d fw_ver=%s max_qp=%d phys_port_cnt=%u\n", ret,
	       attr.fw_ver, attr.max_qp, attr.phys_port_cnt);
	ret = ibv_query_device_ex(ctx, NULL, &attr_ex);
	printf("query_device_ex=%d fw_ver=%s\n", ret, attr_ex.orig_attr.fw_ver);
	ret = ibv_query_port(ctx, 1, &port);
	printf("query_port=%d state=%d link_layer=%u\n", ret, port.state,
	       port.link_layer);

	pd = ibv_alloc_pd(ctx);
	printf("alloc_pd=%s handle=%u same_ctx=%d\n", pd ? "ok" : "fail",
	       pd ? pd->handle : 0, pd ? pd->context == ctx : 0);

	memset(&srq_attr, 0, sizeof(srq_attr));
	srq_attr.attr.max_wr = 1;
	srq_attr.attr.max_sge = 1;
	srq = pd ? ibv_create_srq(pd, &srq_attr) : NULL;
	printf("create_srq=%s max_wr=%u max_sge=%u\n", srq ? "ok" : "null",
	       srq_attr.attr.max_wr, srq_attr.attr.max_sge);
	if (srq)
		printf("destroy_srq=%d\n", ibv_destroy_srq(srq));

	errno = 0;
	memset(&dm_attr, 0, sizeof(dm_attr));
	dm_attr.length = 64;
	dm = ibv_alloc_dm(ctx, &dm_attr);
	printf("alloc_dm=%s errno=%d\n", dm ? "ok" : "null", errno);

	if (pd)
		printf("dealloc_pd=%d\n", ibv_dealloc_pd(pd));
	printf("close=%d\n", ibv_close_device(ctx));
	ibv_free_device_list(list);
	return 0;
}
