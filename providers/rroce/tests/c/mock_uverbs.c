// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Test-only LD_PRELOAD shim: a pretend rroce kernel driver.
 *
 * The test makes /dev/infiniband/uverbs0 a character device that is really
 * /dev/null, so ioctl() fails with ENOTTY and libibverbs falls back to the
 * legacy write() command channel.  This shim interposes write() on that file
 * and answers the uverbs commands the provider uses by filling the response
 * buffer the command points to, like ib_uverbs would.
 *
 * Queues: CQ, SQ and RQ rings live in one memfd ("device memory"); the mmap
 * offset the mock returns for a ring is its offset in that memfd, and an
 * interposed mmap() on the command fd maps exactly one ring (offset and
 * length must match, like rdma_user_mmap_entry would check).  The ring
 * format is rroce_proto::ring's: u32 producer index at 0, u32 consumer index
 * at 64, entries from 128.  The mock plays the kernel's side of each ring
 * (producer of CQs, consumer of SQs/RQs) through the mock_* functions below,
 * which test programs find with dlsym(RTLD_DEFAULT, ...).
 *
 * PDs all get handle MOCK_PD_HANDLE; the mock counts the live ones, and
 * every command that names a PD must name that handle.
 *
 * XRC: XRC domains are objects of their own (OPEN_XRCD/CLOSE_XRCD, EBUSY
 * while an SRQ or QP uses one); CREATE_XSRQ makes an XRC SRQ like
 * CREATE_SRQ (same driver data, srqn in the core response); CREATE_QP of
 * an XRC_INI QP has no RQ, and of an XRC_TGT QP (its "PD" handle is the
 * XRCD's) is answered like ib_core does it: without udata, so the driver
 * response is not written and there are no rings; OPEN_QP gives another
 * handle to an XRC_TGT QP.
 *
 * MOCK_RROCE_ABI overrides the driver ABI version reported by GET_CONTEXT.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <rdma/ib_user_verbs.h>

#define MOCK_PATH "/dev/infiniband/uverbs0"
#define MOCK_PD_HANDLE 42u
#define MAX_OBJS 64
#define MAX_MAPS 64
#define RING_HDR 128u
#define PAGE 4096u

/* Same layout as rroce_proto::abi::AllocUcontextResp. */
struct mock_ucontext_resp {
	uint32_t abi_version;
	uint32_t reserved;
	uint64_t features;
};

/* rroce_proto::abi::CreateQueueCmd */
struct mock_queue_cmd {
	uint32_t flags;
	uint32_t reserved;
};

/* rroce_proto::abi::CreateCqResp */
struct mock_cq_resp {
	uint64_t mmap_offset;
	uint32_t ring_bytes;
	uint32_t entries;
	uint32_t entry_size;
	uint32_t cqn;
};

/* rroce_proto::abi::ResizeCqResp */
struct mock_resize_cq_resp {
	uint64_t mmap_offset;
	uint32_t ring_bytes;
	uint32_t entries;
	uint32_t entry_size;
	uint32_t reserved;
};

/* rroce_proto::abi::CreateQpResp */
struct mock_qp_resp {
	uint64_t sq_offset;
	uint64_t rq_offset;
	uint32_t sq_bytes;
	uint32_t rq_bytes;
	uint32_t sq_entries;
	uint32_t rq_entries;
	uint32_t sq_entry_size;
	uint32_t rq_entry_size;
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_inline;
	uint32_t qpn;
	uint32_t flags;
	uint32_t reserved;
};

/* rroce_proto::abi::CreateSrqResp */
struct mock_srq_resp {
	uint64_t mmap_offset;
	uint32_t ring_bytes;
	uint32_t entries;
	uint32_t entry_size;
	uint32_t max_sge;
	uint32_t srqn;
	uint32_t reserved;
};

/* rroce_proto::abi::CreateAhResp */
struct mock_ah_resp {
	uint32_t ah_num;
	uint32_t reserved;
};

struct ring {
	uint64_t off;		/* in the memfd == mmap offset */
	uint32_t bytes;
	uint32_t entries;
	uint32_t entry_size;
	uint8_t *kva;		/* the mock's own view */
	uint32_t idx;		/* the mock's private index (prod or cons) */
};

enum obj_kind { OBJ_FREE, OBJ_CQ, OBJ_QP, OBJ_MR, OBJ_AH, OBJ_SRQ, OBJ_XRCD };

/* enum ib_qp_type / ib_srq_type values of the XRC objects */
#define MOCK_QPT_XRC_INI 9
#define MOCK_QPT_XRC_TGT 10
#define MOCK_SRQT_XRC 1

struct obj {
	enum obj_kind kind;
	uint32_t handle;
	struct ring r1;		/* CQ ring, SQ, or SRQ ring */
	struct ring r2;		/* RQ (entries == 0: none) */
	uint32_t qpn;
	uint32_t xrcd;		/* XRC SRQ or XRC_TGT QP: its XRCD's handle */
	int state;
	int doorbells;
	int notifies;
	int last_solicited;
	int resizes;
};

static struct obj objs[MAX_OBJS];
static uint32_t next_handle = 1;
static int live_pds;
static int memfd = -1;
static uint64_t next_off = PAGE;
static uint32_t ring_start;
static char fault[64];
static unsigned char last_db[32];
static struct { void *addr; size_t len; } user_maps[MAX_MAPS];

static ssize_t (*real_write)(int, const void *, size_t);
static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
static int (*real_munmap)(void *, size_t);

__attribute__((constructor)) static void mock_init(void)
{
	if (real_write && real_mmap && real_munmap)
		return;
	real_write = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
	real_mmap = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
	real_munmap = (int (*)(void *, size_t))dlsym(RTLD_NEXT, "munmap");
}

static int is_mock_fd(int fd)
{
	char link[64], path[256];
	ssize_t n;

	if (fd < 0)
		return 0;
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

static int take_fault(const char *name)
{
	if (strcmp(fault, name))
		return 0;
	fault[0] = '\0';
	return 1;
}

static uint32_t pow2(uint32_t v)
{
	uint32_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

static uint32_t round_up(uint32_t v, uint32_t a)
{
	return (v + a - 1) / a * a;
}

static struct obj *new_obj(enum obj_kind kind)
{
	for (int i = 0; i < MAX_OBJS; i++)
		if (objs[i].kind == OBJ_FREE) {
			memset(&objs[i], 0, sizeof(objs[i]));
			objs[i].kind = kind;
			objs[i].handle = next_handle++;
			return &objs[i];
		}
	return NULL;
}

static struct obj *find_obj(enum obj_kind kind, uint32_t handle)
{
	for (int i = 0; i < MAX_OBJS; i++)
		if (objs[i].kind == kind && objs[i].handle == handle)
			return &objs[i];
	return NULL;
}

static void free_obj(struct obj *o)
{
	/* The mock's views stay mapped (like a kernel whose vma outlives the
	 * object); the memfd range is never reused. */
	o->kind = OBJ_FREE;
}

/* Allocates a zeroed ring with both indices at ring_start. */
static int ring_alloc(struct ring *r, uint32_t entries, uint32_t entry_size)
{
	r->entries = entries;
	r->entry_size = entry_size;
	r->bytes = round_up(RING_HDR + entries * entry_size, PAGE);
	if (memfd < 0)
		memfd = memfd_create("mock-rroce-rings", 0);
	if (memfd < 0)
		return -1;
	r->off = next_off;
	next_off += r->bytes;
	if (ftruncate(memfd, (off_t)next_off))
		return -1;
	r->kva = real_mmap(NULL, r->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd,
			   (off_t)r->off);
	if (r->kva == MAP_FAILED)
		return -1;
	__atomic_store_n((uint32_t *)r->kva, ring_start, __ATOMIC_RELEASE);
	__atomic_store_n((uint32_t *)(r->kva + 64), ring_start, __ATOMIC_RELEASE);
	r->idx = ring_start;
	return 0;
}

static uint32_t *prod_of(struct ring *r)
{
	return (uint32_t *)r->kva;
}

static uint32_t *cons_of(struct ring *r)
{
	return (uint32_t *)(r->kva + 64);
}

static const void *payload(const void *buf)
{
	return (const char *)buf + sizeof(struct ib_uverbs_cmd_hdr);
}

/* The driver's answer for the new CQ @o. */
static void cq_resp(const struct obj *o, struct mock_cq_resp *d)
{
	d->mmap_offset = o->r1.off;
	d->ring_bytes = o->r1.bytes;
	d->entries = o->r1.entries;
	d->entry_size = o->r1.entry_size;
	d->cqn = 1000 + o->handle;
}

/* The core flags of the last EX_CREATE_CQ (mock_last_cq_flags). */
static uint32_t last_cq_flags = ~0u;

/*
 * EX_CREATE_CQ (the write fallback of ibv_cmd_create_cq_ex when creation
 * flags are set, e.g. IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION): the same
 * CQ as CREATE_CQ; the flags are recorded.
 */
static int ex_create_cq(const void *buf, size_t count)
{
	struct ib_uverbs_ex_cmd_hdr ex;
	struct ib_uverbs_ex_create_cq c;
	struct mock_queue_cmd drv;
	struct {
		struct ib_uverbs_ex_create_cq_resp core;
		struct mock_cq_resp drv;
	} r = { 0 };
	const char *p = payload(buf);
	struct obj *o;

	if (count != sizeof(struct ib_uverbs_cmd_hdr) + sizeof(ex) + sizeof(c) + sizeof(drv))
		return EINVAL;
	memcpy(&ex, p, sizeof(ex));
	memcpy(&c, p + sizeof(ex), sizeof(c));
	memcpy(&drv, p + sizeof(ex) + sizeof(c), sizeof(drv));
	if (drv.flags || drv.reserved || c.cqe < 1 || c.cqe > 4096 || c.comp_mask ||
	    c.flags & ~(uint32_t)IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION)
		return EINVAL;
	last_cq_flags = c.flags;
	o = new_obj(OBJ_CQ);
	if (!o || ring_alloc(&o->r1, pow2(c.cqe), 64))
		return ENOMEM;
	r.core.base.cq_handle = o->handle;
	r.core.base.cqe = o->r1.entries;
	r.core.response_length = sizeof(r.core);
	cq_resp(o, &r.drv);
	reply(ex.response, ((size_t)ex.provider_out_words + ((const struct ib_uverbs_cmd_hdr *)buf)->out_words) * 8,
	      &r, sizeof(r));
	return 0;
}

static int create_cq(const void *buf, size_t count, uint64_t resp, size_t room)
{
	struct ib_uverbs_create_cq c;
	struct mock_queue_cmd drv;
	struct {
		struct ib_uverbs_create_cq_resp core;
		struct mock_cq_resp drv;
	} r = { 0 };
	struct obj *o;

	if (count != sizeof(struct ib_uverbs_cmd_hdr) + sizeof(c) + sizeof(drv) ||
	    room < sizeof(r))
		return EINVAL;
	memcpy(&c, payload(buf), sizeof(c));
	memcpy(&drv, (const char *)payload(buf) + sizeof(c), sizeof(drv));
	if (drv.flags || drv.reserved || c.cqe < 1 || c.cqe > 4096)
		return EINVAL;
	o = new_obj(OBJ_CQ);
	if (!o || ring_alloc(&o->r1, pow2(c.cqe), 64))
		return ENOMEM;
	r.core.cq_handle = o->handle;
	r.core.cqe = o->r1.entries;
	cq_resp(o, &r.drv);

	if (take_fault("cq_entries_not_pow2"))
		r.drv.entries = 3;
	else if (take_fault("cq_ring_small"))
		r.drv.ring_bytes = 64;
	else if (take_fault("cq_entry_small"))
		r.drv.entry_size = 16;
	else if (take_fault("cq_bad_offset"))
		r.drv.mmap_offset += 1ull << 40;
	else if (take_fault("cq_cqe_exceeds"))
		r.core.cqe = o->r1.entries + 1;
	else if (take_fault("cq_huge_entries"))
		r.drv.entries = 1u << 31;
	else if (take_fault("cq_bad_header"))
		__atomic_store_n(prod_of(&o->r1), ring_start + o->r1.entries + 1,
				 __ATOMIC_RELEASE);
	reply(resp, room, &r, sizeof(r));
	return 0;
}

/*
 * RESIZE_CQ as the driver does it: a new ring that continues the old one's
 * indices, holding the CQEs between the consumer index the provider
 * published and the producer index; the old ring can no longer be mapped.
 */
static int resize_cq(const void *buf, size_t count, uint64_t resp, size_t room)
{
	struct ib_uverbs_resize_cq c;
	struct mock_queue_cmd drv;
	struct {
		struct ib_uverbs_resize_cq_resp core;
		struct mock_resize_cq_resp drv;
	} r = { 0 };
	struct ring old, nr;
	uint32_t cons, n, saved_start = ring_start;
	struct obj *o;

	if (count != sizeof(struct ib_uverbs_cmd_hdr) + sizeof(c) + sizeof(drv) ||
	    room < sizeof(r))
		return EINVAL;
	memcpy(&c, payload(buf), sizeof(c));
	memcpy(&drv, (const char *)payload(buf) + sizeof(c), sizeof(drv));
	o = find_obj(OBJ_CQ, c.cq_handle);
	if (!o || drv.flags || drv.reserved || c.cqe < 1 || c.cqe > 4096)
		return EINVAL;
	old = o->r1;
	cons = __atomic_load_n(cons_of(&old), __ATOMIC_ACQUIRE);
	n = old.idx - cons;
	if (n > old.entries)
		return EIO;
	if (c.cqe < n)
		return EINVAL;
	ring_start = cons;
	if (ring_alloc(&nr, pow2(c.cqe), 64)) {
		ring_start = saved_start;
		return ENOMEM;
	}
	ring_start = saved_start;
	for (uint32_t i = cons; i != old.idx; i++)
		memcpy(nr.kva + RING_HDR + (size_t)(i & (nr.entries - 1)) * 64,
		       old.kva + RING_HDR + (size_t)(i & (old.entries - 1)) * 64, 64);
	nr.idx = old.idx;
	__atomic_store_n(prod_of(&nr), nr.idx, __ATOMIC_RELEASE);
	o->r1 = nr;
	o->resizes++;
	r.core.cqe = nr.entries;
	r.drv.mmap_offset = nr.off;
	r.drv.ring_bytes = nr.bytes;
	r.drv.entries = nr.entries;
	r.drv.entry_size = nr.entry_size;

	if (take_fault("resize_bad_offset"))
		r.drv.mmap_offset += 1ull << 40;
	else if (take_fault("resize_discontinuous"))
		__atomic_store_n(cons_of(&nr), cons - 1, __ATOMIC_RELEASE);
	else if (take_fault("resize_entry_small"))
		r.drv.entry_size = 16;
	reply(resp, room, &r, sizeof(r));
	return 0;
}

static struct obj *find_xrcd(uint32_t handle)
{
	return find_obj(OBJ_XRCD, handle);
}

static uint32_t next_qpn(const struct obj *o)
{
	return 0x100 + o->handle;
}

/*
 * A handle to an XRC_TGT QP of XRCD @xrcd: QP @qpn, or a new QP if 0;
 * only the core response is written (ib_core makes these QPs without
 * udata); no rings.
 */
static int xrc_tgt_handle(uint32_t qpn, uint32_t xrcd, uint64_t resp, size_t room)
{
	struct ib_uverbs_create_qp_resp r = { 0 };
	struct obj *o = new_obj(OBJ_QP);

	if (!o)
		return ENOMEM;
	o->qpn = qpn ? qpn : next_qpn(o);
	o->xrcd = xrcd;
	r.qp_handle = o->handle;
	r.qpn = o->qpn;
	reply(resp, room, &r, sizeof(r));
	return 0;
}

/* CREATE_QP of an XRC_TGT QP: the driver data sent is not looked at. */
static int create_xrc_tgt(const struct ib_uverbs_create_qp *c, uint64_t resp, size_t room)
{
	if (!find_xrcd(c->pd_handle) || c->send_cq_handle || c->recv_cq_handle || c->is_srq)
		return EINVAL;
	return xrc_tgt_handle(0, c->pd_handle, resp, room);
}

/* OPEN_QP: a new handle to the XRC_TGT QP qpn of the XRCD. */
static int open_qp(const void *buf, size_t count, uint64_t resp, size_t room)
{
	struct ib_uverbs_open_qp c;
	struct obj *tgt = NULL;

	if (count != sizeof(struct ib_uverbs_cmd_hdr) + sizeof(c) ||
	    room < sizeof(struct ib_uverbs_create_qp_resp))
		return EINVAL;
	memcpy(&c, payload(buf), sizeof(c));
	if (c.qp_type != MOCK_QPT_XRC_TGT || !find_xrcd(c.pd_handle))
		return EINVAL;
	for (int i = 0; i < MAX_OBJS; i++)
		if (objs[i].kind == OBJ_QP && objs[i].qpn == c.qpn && objs[i].xrcd == c.pd_handle)
			tgt = &objs[i];
	if (!tgt)
		return EINVAL;
	return xrc_tgt_handle(tgt->qpn, tgt->xrcd, resp, room);
}

static int create_qp(const void *buf, size_t count, uint64_t resp, size_t room)
{
	struct ib_uverbs_create_qp c;
	struct mock_queue_cmd drv;
	struct {
		struct ib_uverbs_create_qp_resp core;
		struct mock_qp_resp drv;
	} r = { 0 };
	uint32_t data, sq_esz, rq_esz;
	struct obj *o;

	if (count != sizeof(struct ib_uverbs_cmd_hdr) + sizeof(c) + sizeof(drv) ||
	    room < sizeof(r))
		return EINVAL;
	memcpy(&c, payload(buf), sizeof(c));
	memcpy(&drv, (const char *)payload(buf) + sizeof(c), sizeof(drv));
	if (c.qp_type == MOCK_QPT_XRC_TGT)
		return create_xrc_tgt(&c, resp, room);
	if (c.pd_handle != MOCK_PD_HANDLE)
		return EINVAL;
	if (drv.flags || drv.reserved || c.max_send_wr > 1024 || c.max_recv_wr > 1024 ||
	    c.max_send_sge > 32 || c.max_recv_sge > 32 || c.max_inline_data > 1024)
		return EINVAL;
	if (c.qp_type != 2 && c.qp_type != 3 && c.qp_type != 4 && c.qp_type != MOCK_QPT_XRC_INI)
		return EOPNOTSUPP;
	/* ib_core: an XRC_INI QP has no receive side (like is_srq here). */
	if (c.qp_type == MOCK_QPT_XRC_INI) {
		c.is_srq = 1;
		c.max_recv_wr = c.max_recv_sge = 0;
	}
	o = new_obj(OBJ_QP);
	if (!o)
		return ENOMEM;
	/* wqe::send_entry_size / recv_entry_size */
	data = c.max_send_sge * 16;
	if (round_up(c.max_inline_data, 16) > data)
		data = round_up(c.max_inline_data, 16);
	sq_esz = round_up(64 + data, 64);
	rq_esz = round_up(16 + 16 * c.max_recv_sge, 64);
	if (ring_alloc(&o->r1, pow2(c.max_send_wr ? c.max_send_wr : 1), sq_esz))
		return ENOMEM;
	if (!c.is_srq && ring_alloc(&o->r2, pow2(c.max_recv_wr ? c.max_recv_wr : 1), rq_esz))
		return ENOMEM;
	o->qpn = next_qpn(o);
	r.core.qp_handle = o->handle;
	r.core.qpn = o->qpn;
	r.core.max_send_wr = o->r1.entries;
	r.core.max_recv_wr = o->r2.entries;
	r.core.max_send_sge = (sq_esz - 64) / 16;
	r.core.max_recv_sge = c.is_srq ? 0 : (rq_esz - 16) / 16;
	r.core.max_inline_data = sq_esz - 64;
	r.drv.sq_offset = o->r1.off;
	r.drv.sq_bytes = o->r1.bytes;
	r.drv.sq_entries = o->r1.entries;
	r.drv.sq_entry_size = sq_esz;
	if (!c.is_srq) {
		r.drv.rq_offset = o->r2.off;
		r.drv.rq_bytes = o->r2.bytes;
		r.drv.rq_entries = o->r2.entries;
		r.drv.rq_entry_size = rq_esz;
	}
	r.drv.max_send_sge = r.core.max_send_sge;
	r.drv.max_recv_sge = r.core.max_recv_sge;
	r.drv.max_inline = r.core.max_inline_data;
	r.drv.qpn = o->qpn;

	if (take_fault("qp_sge_overclaim"))
		r.drv.max_send_sge = r.drv.max_send_sge + 1;
	else if (take_fault("qp_inline_overclaim"))
		r.drv.max_inline = sq_esz;
	else if (take_fault("qp_no_rq"))
		r.drv.rq_entries = 0;
	else if (take_fault("qp_fewer_wr"))
		r.drv.sq_entries = 1;
	else if (take_fault("qp_rq_entry_odd"))
		r.drv.rq_entry_size = 80;
	else if (take_fault("qp_qpn_mismatch"))
		r.drv.qpn = o->qpn + 1;
	else if (take_fault("qp_bad_header"))
		__atomic_store_n(cons_of(&o->r1), ring_start + 1, __ATOMIC_RELEASE);
	reply(resp, room, &r, sizeof(r));
	return 0;
}

struct srq_req {
	uint32_t pd_handle, max_wr, max_sge, xrcd;
};

/*
 * CREATE_SRQ (core command `core_len` bytes, e.g. struct
 * ib_uverbs_create_srq, whose fields @req carries) and CREATE_XSRQ: both
 * take the same driver data and give the same answer.
 */
static int make_srq(const void *buf, size_t count, size_t core_len, const struct srq_req *c,
		    uint64_t resp, size_t room)
{
	struct mock_queue_cmd drv;
	struct {
		struct ib_uverbs_create_srq_resp core;
		struct mock_srq_resp drv;
	} r = { 0 };
	uint32_t esz;
	struct obj *o;

	if (count != sizeof(struct ib_uverbs_cmd_hdr) + core_len + sizeof(drv) ||
	    room < sizeof(r))
		return EINVAL;
	memcpy(&drv, (const char *)payload(buf) + core_len, sizeof(drv));
	if (c->pd_handle != MOCK_PD_HANDLE || drv.flags || drv.reserved || !c->max_wr ||
	    c->max_wr > 1024 || c->max_sge > 32)
		return EINVAL;
	o = new_obj(OBJ_SRQ);
	if (!o)
		return ENOMEM;
	o->xrcd = c->xrcd;
	esz = round_up(16 + 16 * (c->max_sge ? c->max_sge : 1), 64);
	if (ring_alloc(&o->r1, pow2(c->max_wr), esz))
		return ENOMEM;
	r.core.srq_handle = o->handle;
	r.core.max_wr = o->r1.entries;
	r.core.max_sge = (esz - 16) / 16;
	r.core.srqn = 2000 + o->handle;
	r.drv.mmap_offset = o->r1.off;
	r.drv.ring_bytes = o->r1.bytes;
	r.drv.entries = o->r1.entries;
	r.drv.entry_size = esz;
	r.drv.max_sge = r.core.max_sge;
	r.drv.srqn = r.core.srqn;
	if (take_fault("srq_srqn_mismatch"))
		r.drv.srqn++;
	reply(resp, room, &r, sizeof(r));
	return 0;
}

static int create_srq(const void *buf, size_t count, uint64_t resp, size_t room)
{
	struct ib_uverbs_create_srq c;
	struct srq_req q;

	if (count < sizeof(struct ib_uverbs_cmd_hdr) + sizeof(c))
		return EINVAL;
	memcpy(&c, payload(buf), sizeof(c));
	q = (struct srq_req){ c.pd_handle, c.max_wr, c.max_sge, 0 };
	return make_srq(buf, count, sizeof(c), &q, resp, room);
}

/* CREATE_XSRQ of an XRC SRQ: a live XRCD and CQ. */
static int create_xsrq(const void *buf, size_t count, uint64_t resp, size_t room)
{
	struct ib_uverbs_create_xsrq c;
	struct srq_req q;

	if (count < sizeof(struct ib_uverbs_cmd_hdr) + sizeof(c))
		return EINVAL;
	memcpy(&c, payload(buf), sizeof(c));
	if (c.srq_type != MOCK_SRQT_XRC || !find_xrcd(c.xrcd_handle) ||
	    !find_obj(OBJ_CQ, c.cq_handle))
		return EINVAL;
	q = (struct srq_req){ c.pd_handle, c.max_wr, c.max_sge, c.xrcd_handle };
	return make_srq(buf, count, sizeof(c), &q, resp, room);
}

/* OPEN_XRCD (no inode: fd -1, O_CREAT) and CLOSE_XRCD (EBUSY in use). */
static int open_xrcd(const void *buf, size_t count, uint64_t resp, size_t room)
{
	struct ib_uverbs_open_xrcd c;
	struct ib_uverbs_open_xrcd_resp r = { 0 };
	struct obj *o;

	if (count != sizeof(struct ib_uverbs_cmd_hdr) + sizeof(c) || room < sizeof(r))
		return EINVAL;
	memcpy(&c, payload(buf), sizeof(c));
	if (c.fd != (uint32_t)-1 || !(c.oflags & O_CREAT))
		return EINVAL;
	o = new_obj(OBJ_XRCD);
	if (!o)
		return ENOMEM;
	r.xrcd_handle = o->handle;
	reply(resp, room, &r, sizeof(r));
	return 0;
}

static int close_xrcd(const void *buf)
{
	struct ib_uverbs_close_xrcd c;
	struct obj *o;

	memcpy(&c, payload(buf), sizeof(c));
	o = find_xrcd(c.xrcd_handle);
	if (!o)
		return EINVAL;
	for (int i = 0; i < MAX_OBJS; i++)
		if (objs[i].kind != OBJ_FREE && objs[i].xrcd == c.xrcd_handle)
			return EBUSY;
	free_obj(o);
	return 0;
}

static int post_send(const void *buf, size_t count, uint64_t resp, size_t room)
{
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_post_send c;
	struct ib_uverbs_post_send_resp r = { 0 };
	struct obj *o;

	if (count != sizeof(hdr) + sizeof(c))
		return EINVAL;
	memcpy(&hdr, buf, sizeof(hdr));
	memcpy(&c, payload(buf), sizeof(c));
	if (hdr.in_words * 4 != count || hdr.out_words * 4 != sizeof(r) ||
	    c.wr_count || c.sge_count || c.wqe_size < sizeof(struct ib_uverbs_send_wr) ||
	    !resp)
		return EINVAL;
	o = find_obj(OBJ_QP, c.qp_handle);
	if (!o)
		return EINVAL;
	o->doorbells++;
	memcpy(last_db, buf, sizeof(last_db));
	reply(resp, room, &r, sizeof(r));
	return 0;
}

static ssize_t mock_cmd(int fd, const void *buf, size_t count)
{
	struct ib_uverbs_cmd_hdr hdr;
	uint64_t resp = 0;
	size_t room;
	int err = 0;

	/* Every command has at least a 4-byte payload after the header. */
	if (count < sizeof(hdr) + 4) {
		errno = EINVAL;
		return -1;
	}
	memcpy(&hdr, buf, sizeof(hdr));
	if (hdr.command == (IB_USER_VERBS_CMD_FLAG_EXTENDED | IB_USER_VERBS_EX_CMD_CREATE_CQ)) {
		err = ex_create_cq(buf, count);
		if (err) {
			errno = err;
			return -1;
		}
		return (ssize_t)count;
	}
	if (hdr.command & IB_USER_VERBS_CMD_FLAG_EXTENDED) {
		errno = EOPNOTSUPP;
		return -1;
	}
	/* Commands with a response start their payload with its address. */
	if (count >= sizeof(hdr) + sizeof(resp))
		memcpy(&resp, payload(buf), sizeof(resp));
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
		break;
	}
	case IB_USER_VERBS_CMD_QUERY_DEVICE: {
		struct ib_uverbs_query_device_resp r = { 0 };

		r.fw_ver = (1ull << 32) | (2ull << 16) | 3;
		r.max_qp = 64;
		r.max_pd = 16;
		r.phys_port_cnt = 1;
		reply(resp, room, &r, sizeof(r));
		break;
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
		break;
	}
	case IB_USER_VERBS_CMD_ALLOC_PD: {
		struct ib_uverbs_alloc_pd_resp r = { .pd_handle = MOCK_PD_HANDLE };

		live_pds++;
		reply(resp, room, &r, sizeof(r));
		break;
	}
	case IB_USER_VERBS_CMD_DEALLOC_PD: {
		uint32_t handle;

		memcpy(&handle, payload(buf), sizeof(handle));
		if (handle != MOCK_PD_HANDLE || !live_pds)
			err = EINVAL;
		else
			live_pds--;
		break;
	}
	case IB_USER_VERBS_CMD_CREATE_SRQ:
		err = create_srq(buf, count, resp, room);
		break;
	case IB_USER_VERBS_CMD_CREATE_XSRQ:
		err = create_xsrq(buf, count, resp, room);
		break;
	case IB_USER_VERBS_CMD_OPEN_XRCD:
		err = open_xrcd(buf, count, resp, room);
		break;
	case IB_USER_VERBS_CMD_CLOSE_XRCD:
		err = close_xrcd(buf);
		break;
	case IB_USER_VERBS_CMD_OPEN_QP:
		err = open_qp(buf, count, resp, room);
		break;
	case IB_USER_VERBS_CMD_DESTROY_SRQ: {
		struct ib_uverbs_destroy_srq c;
		struct ib_uverbs_destroy_srq_resp r = { 0 };
		struct obj *o;

		memcpy(&c, payload(buf), sizeof(c));
		o = find_obj(OBJ_SRQ, c.srq_handle);
		if (!o) {
			err = EINVAL;
			break;
		}
		free_obj(o);
		reply(resp, room, &r, sizeof(r));
		break;
	}
	case IB_USER_VERBS_CMD_CREATE_CQ:
		err = create_cq(buf, count, resp, room);
		break;
	case IB_USER_VERBS_CMD_DESTROY_CQ: {
		struct ib_uverbs_destroy_cq c;
		struct ib_uverbs_destroy_cq_resp r = { 0 };
		struct obj *o;

		memcpy(&c, payload(buf), sizeof(c));
		o = find_obj(OBJ_CQ, c.cq_handle);
		if (!o) {
			err = EINVAL;
			break;
		}
		free_obj(o);
		reply(resp, room, &r, sizeof(r));
		break;
	}
	case IB_USER_VERBS_CMD_RESIZE_CQ:
		err = resize_cq(buf, count, resp, room);
		break;
	case IB_USER_VERBS_CMD_REQ_NOTIFY_CQ: {
		struct ib_uverbs_req_notify_cq c;
		struct obj *o;

		memcpy(&c, payload(buf), sizeof(c));
		o = find_obj(OBJ_CQ, c.cq_handle);
		if (!o) {
			err = EINVAL;
			break;
		}
		o->notifies++;
		o->last_solicited = (int)c.solicited_only;
		break;
	}
	case IB_USER_VERBS_CMD_CREATE_QP:
		err = create_qp(buf, count, resp, room);
		break;
	case IB_USER_VERBS_CMD_MODIFY_QP: {
		struct ib_uverbs_modify_qp c;
		struct obj *o;

		memcpy(&c, payload(buf), sizeof(c));
		o = find_obj(OBJ_QP, c.qp_handle);
		if (!o) {
			err = EINVAL;
			break;
		}
		if (c.attr_mask & 1)	/* IBV_QP_STATE */
			o->state = c.qp_state;
		break;
	}
	case IB_USER_VERBS_CMD_QUERY_QP: {
		struct ib_uverbs_query_qp c;
		struct ib_uverbs_query_qp_resp r = { 0 };
		struct obj *o;

		memcpy(&c, payload(buf), sizeof(c));
		o = find_obj(OBJ_QP, c.qp_handle);
		if (!o) {
			err = EINVAL;
			break;
		}
		r.qp_state = (uint8_t)o->state;
		/* Deliberately not the real capacities: the provider reports
		 * those it enforces. */
		r.max_send_wr = r.max_recv_wr = r.max_send_sge = 1;
		r.max_recv_sge = r.max_inline_data = 1;
		reply(resp, room, &r, sizeof(r));
		break;
	}
	case IB_USER_VERBS_CMD_DESTROY_QP: {
		struct ib_uverbs_destroy_qp c;
		struct ib_uverbs_destroy_qp_resp r = { 0 };
		struct obj *o;

		memcpy(&c, payload(buf), sizeof(c));
		o = find_obj(OBJ_QP, c.qp_handle);
		if (!o) {
			err = EINVAL;
			break;
		}
		free_obj(o);
		reply(resp, room, &r, sizeof(r));
		break;
	}
	case IB_USER_VERBS_CMD_POST_SEND:
		err = post_send(buf, count, resp, room);
		break;
	case IB_USER_VERBS_CMD_REG_MR: {
		struct ib_uverbs_reg_mr c;
		struct ib_uverbs_reg_mr_resp r = { 0 };
		struct obj *o;

		memcpy(&c, payload(buf), sizeof(c));
		if (c.pd_handle != MOCK_PD_HANDLE || !c.length) {
			err = EINVAL;
			break;
		}
		o = new_obj(OBJ_MR);
		if (!o) {
			err = ENOMEM;
			break;
		}
		r.mr_handle = o->handle;
		r.lkey = 0x1000 + o->handle;
		r.rkey = 0x2000 + o->handle;
		reply(resp, room, &r, sizeof(r));
		break;
	}
	case IB_USER_VERBS_CMD_DEREG_MR: {
		struct ib_uverbs_dereg_mr c;
		struct obj *o;

		memcpy(&c, payload(buf), sizeof(c));
		o = find_obj(OBJ_MR, c.mr_handle);
		if (!o) {
			err = EINVAL;
			break;
		}
		free_obj(o);
		break;
	}
	case IB_USER_VERBS_CMD_CREATE_AH: {
		struct {
			struct ib_uverbs_create_ah_resp core;
			struct mock_ah_resp drv;
		} r = { 0 };
		struct ib_uverbs_create_ah c;
		struct obj *o;

		memcpy(&c, payload(buf), sizeof(c));
		if (c.pd_handle != MOCK_PD_HANDLE) {
			err = EINVAL;
			break;
		}
		o = new_obj(OBJ_AH);
		if (!o) {
			err = ENOMEM;
			break;
		}
		r.core.ah_handle = o->handle;
		r.drv.ah_num = take_fault("ah_zero") ? 0 : 500 + o->handle;
		reply(resp, room, &r, sizeof(r));
		break;
	}
	case IB_USER_VERBS_CMD_DESTROY_AH: {
		struct ib_uverbs_destroy_ah c;
		struct obj *o;

		memcpy(&c, payload(buf), sizeof(c));
		o = find_obj(OBJ_AH, c.ah_handle);
		if (!o) {
			err = EINVAL;
			break;
		}
		free_obj(o);
		break;
	}
	default:
		err = EOPNOTSUPP;
		break;
	}
	if (err) {
		errno = err;
		return -1;
	}
	return count;
}

ssize_t write(int fd, const void *buf, size_t count)
{
	mock_init();
	if (is_mock_fd(fd))
		return mock_cmd(fd, buf, count);
	return real_write(fd, buf, count);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	void *p;

	mock_init();
	if (!is_mock_fd(fd))
		return real_mmap(addr, len, prot, flags, fd, off);
	for (int i = 0; i < MAX_OBJS; i++) {
		struct ring *rings[2] = { &objs[i].r1, &objs[i].r2 };

		if (objs[i].kind != OBJ_CQ && objs[i].kind != OBJ_QP && objs[i].kind != OBJ_SRQ)
			continue;
		for (int j = 0; j < 2; j++) {
			if (!rings[j]->entries || rings[j]->off != (uint64_t)off)
				continue;
			if (len != rings[j]->bytes || !(flags & MAP_SHARED))
				goto inval;
			p = real_mmap(addr, len, prot, flags, memfd, off);
			if (p == MAP_FAILED)
				return p;
			for (int k = 0; k < MAX_MAPS; k++)
				if (!user_maps[k].addr) {
					user_maps[k].addr = p;
					user_maps[k].len = len;
					break;
				}
			return p;
		}
	}
inval:
	errno = EINVAL;
	return MAP_FAILED;
}

int munmap(void *addr, size_t len)
{
	mock_init();
	for (int k = 0; k < MAX_MAPS; k++)
		if (user_maps[k].addr == addr && user_maps[k].len == len)
			user_maps[k].addr = NULL;
	return real_munmap(addr, len);
}

/* ---- Test hooks: the kernel's side of the rings ---------------------- */

/* Makes the next create command of the named kind return a broken response. */
void mock_set_fault(const char *name)
{
	snprintf(fault, sizeof(fault), "%s", name);
}

/* Initial producer/consumer index of rings created from now on. */
void mock_set_ring_start(uint32_t start)
{
	ring_start = start;
}

/* Writes a 64-byte CQE into the CQ and publishes it; -1 if full/unknown. */
int mock_cq_push(uint32_t cq_handle, const void *cqe)
{
	struct obj *o = find_obj(OBJ_CQ, cq_handle);
	struct ring *r;
	uint32_t cons;

	if (!o)
		return -1;
	r = &o->r1;
	cons = __atomic_load_n(cons_of(r), __ATOMIC_ACQUIRE);
	if (r->idx - cons >= r->entries)
		return -1;
	memcpy(r->kva + RING_HDR + (size_t)(r->idx & (r->entries - 1)) * r->entry_size, cqe, 64);
	r->idx++;
	__atomic_store_n(prod_of(r), r->idx, __ATOMIC_RELEASE);
	return 0;
}

/* Stores a raw (possibly impossible) producer index into a CQ. */
int mock_cq_poke_prod(uint32_t cq_handle, uint32_t value)
{
	struct obj *o = find_obj(OBJ_CQ, cq_handle);

	if (!o)
		return -1;
	__atomic_store_n(prod_of(&o->r1), value, __ATOMIC_RELEASE);
	return 0;
}

/* The consumer index the provider last published for a CQ. */
int64_t mock_cq_cons(uint32_t cq_handle)
{
	struct obj *o = find_obj(OBJ_CQ, cq_handle);

	return o ? (int64_t)__atomic_load_n(cons_of(&o->r1), __ATOMIC_ACQUIRE) : -1;
}

static int pop(struct ring *r, void *out, size_t len)
{
	uint32_t prod;

	if (!r->entries || len > r->entry_size)
		return -1;
	prod = __atomic_load_n(prod_of(r), __ATOMIC_ACQUIRE);
	if (prod == r->idx)
		return 0;
	if (prod - r->idx > r->entries)
		return -1;
	memcpy(out, r->kva + RING_HDR + (size_t)(r->idx & (r->entries - 1)) * r->entry_size, len);
	r->idx++;
	__atomic_store_n(cons_of(r), r->idx, __ATOMIC_RELEASE);
	return 1;
}

/* Copies the next published SQ/RQ entry (len bytes) and consumes it:
 * 1 copied, 0 empty, -1 error. */
int mock_sq_pop(uint32_t qp_handle, void *out, size_t len)
{
	struct obj *o = find_obj(OBJ_QP, qp_handle);

	return o ? pop(&o->r1, out, len) : -1;
}

int mock_rq_pop(uint32_t qp_handle, void *out, size_t len)
{
	struct obj *o = find_obj(OBJ_QP, qp_handle);

	return o ? pop(&o->r2, out, len) : -1;
}

int mock_srq_pop(uint32_t srq_handle, void *out, size_t len)
{
	struct obj *o = find_obj(OBJ_SRQ, srq_handle);

	return o ? pop(&o->r1, out, len) : -1;
}

/* Stores a raw (possibly impossible) consumer index into an SQ. */
int mock_sq_poke_cons(uint32_t qp_handle, uint32_t value)
{
	struct obj *o = find_obj(OBJ_QP, qp_handle);

	if (!o)
		return -1;
	__atomic_store_n(cons_of(&o->r1), value, __ATOMIC_RELEASE);
	return 0;
}

int mock_doorbells(uint32_t qp_handle)
{
	struct obj *o = find_obj(OBJ_QP, qp_handle);

	return o ? o->doorbells : -1;
}

/* The 32 bytes of the last doorbell command. */
void mock_last_doorbell(void *out)
{
	memcpy(out, last_db, sizeof(last_db));
}

int mock_qp_state(uint32_t qp_handle)
{
	struct obj *o = find_obj(OBJ_QP, qp_handle);

	return o ? o->state : -1;
}

int mock_notifies(uint32_t cq_handle, int *last_solicited)
{
	struct obj *o = find_obj(OBJ_CQ, cq_handle);

	if (!o)
		return -1;
	*last_solicited = o->last_solicited;
	return o->notifies;
}

/* RESIZE_CQ commands the CQ accepted. */
int mock_cq_resizes(uint32_t cq_handle)
{
	struct obj *o = find_obj(OBJ_CQ, cq_handle);

	return o ? o->resizes : -1;
}

/* PDs allocated and not deallocated. */
uint32_t mock_last_cq_flags(void)
{
	return last_cq_flags;
}

int mock_live_pds(void)
{
	return live_pds;
}

/* Kernel objects (CQ, QP, MR, AH, SRQ, XRCD) alive. */
int mock_live_objects(void)
{
	int n = 0;

	for (int i = 0; i < MAX_OBJS; i++)
		n += objs[i].kind != OBJ_FREE;
	return n;
}

/* Rings the provider has mapped and not unmapped. */
int mock_user_maps(void)
{
	int n = 0;

	for (int k = 0; k < MAX_MAPS; k++)
		n += user_maps[k].addr != NULL;
	return n;
}
