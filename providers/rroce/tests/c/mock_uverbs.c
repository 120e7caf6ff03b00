// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Test-only LD_PRELOAD shim: a pretend rroce kernel driver.
 *
 * The test makes /dev/infiniband/uverbs0 a character device that is really
 * /dev/null, so ioctl() fails with ENOTTY and libibverbs falls back to the
 * legacy write() command channel.  This shim interposes write() on that file
 * and answers the few uverbs commands the provider uses by filling the
 * response buffer the command points to, like ib_uverbs would.
 *
 * MOCK_RROCE_ABI overrides the driver ABI version reported by GET_CONTEXT.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rdma/ib_user_verbs.h>

#define MOCK_PATH "/dev/infiniband/uverbs0"
#define MOCK_PD_HANDLE 42u

/* Same layout as rroce_proto::abi::AllocUcontextResp. */
struct mock_ucontext_resp {
	uint32_t abi_version;
	uint32_t reserved;
	uint64_t features;
};

static int is_mock_fd(int fd)
{
	char link[64], path[256];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n < 0)
		return 0;
	path[n] = '\0';
	return strcmp(path, MOCK_PATH) == 0;
}

static void reply(uint64_t resp, size_t room, const void *data, size_t len)
{
	memcpy((void *)(uintptr_t)resp, data, len < room ? len : room);
}

static ssize_t mock_cmd(int fd, const void *buf, size_t count)
{
	struct ib_uverbs_cmd_hdr hdr;
	uint64_t resp = 0;
	size_t room;

	/* Every command has at least a 4-byte payload after the header. */
	if (count < sizeof(hdr) + 4) {
		errno = EINVAL;
		return -1;
	}
	memcpy(&hdr, buf, sizeof(hdr));
	if (hdr.command & IB_USER_VERBS_CMD_FLAG_EXTENDED) {
		errno = EOPNOTSUPP;
		return -1;
	}
	/* Commands with a response start their payload with its address. */
	if (count >= sizeof(hdr) + sizeof(resp))
		memcpy(&resp, (const char *)buf + sizeof(hdr), sizeof(resp));
	room = resp ? (size_t)hdr.out_words * 4 : 0;

	switch (hdr.command) {
	case IB_USER_VERBS_CMD_GET_CONTEXT: {
		struct {
			struct ib_uverbs_get_context_resp core;
			struct mock_ucontext_resp drv;
		} r = { 0 };
		const char *abi = getenv("MOCK_RROCE_ABI");

		r.core.async_fd = dup(fd);
		r.core.num_comp_vectors = 1;
		r.drv.abi_version = abi ? (uint32_t)atoi(abi) : 1;
		r.drv.features = 0;
		reply(resp, room, &r, sizeof(r));
		return count;
	}
	case IB_USER_VERBS_CMD_QUERY_DEVICE: {
		struct ib_uverbs_query_device_resp r = { 0 };

		r.fw_ver = (1ull << 32) | (2ull << 16) | 3;
		r.max_qp = 64;
		r.max_pd = 16;
		r.phys_port_cnt = 1;
		reply(resp, room, &r, sizeof(r));
		return count;
	}
	case IB_USER_VERBS_CMD_QUERY_PORT: {
		struct ib_uverbs_query_port_resp r = { 0 };

		r.state = 4;		/* IBV_PORT_ACTIVE */
		r.max_mtu = 3;		/* IBV_MTU_1024 */
		r.active_mtu = 3;
		r.gid_tbl_len = 1;
		r.pkey_tbl_len = 1;
		r.phys_state = 5;	/* LinkUp */
		r.link_layer = 2;	/* IBV_LINK_LAYER_ETHERNET */
		reply(resp, room, &r, sizeof(r));
		return count;
	}
	case IB_USER_VERBS_CMD_ALLOC_PD: {
		struct ib_uverbs_alloc_pd_resp r = { .pd_handle = MOCK_PD_HANDLE };

		reply(resp, room, &r, sizeof(r));
		return count;
	}
	case IB_USER_VERBS_CMD_DEALLOC_PD: {
		uint32_t handle;

		memcpy(&handle, (const char *)buf + sizeof(hdr), sizeof(handle));
		if (handle != MOCK_PD_HANDLE) {
			errno = EINVAL;
			return -1;
		}
		return count;
	}
	default:
		errno = EOPNOTSUPP;
		return -1;
	}
}

ssize_t write(int fd, const void *buf, size_t count)
{
	static ssize_t (*real_write)(int, const void *, size_t);

	if (is_mock_fd(fd))
		return mock_cmd(fd, buf, count);
	if (!real_write)
		real_write = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
	return real_write(fd, buf, count);
}
