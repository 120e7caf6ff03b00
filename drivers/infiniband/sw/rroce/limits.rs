// SPDX-License-Identifier: GPL-2.0
//! Device limits and attributes, and small helpers every verb uses (the
//! `EOPNOTSUPP` error, reading a create verb's user command).  A leaf:
//! imports no other driver module but the multicast table's limits.

#![forbid(unsafe_code)]

use kernel::bindings;
use kernel::ffi::c_int;
use kernel::prelude::*;

use crate::ib::ucontext::UctxRef;
use crate::ib::udata::UData;

// Device limits advertised in `query_device`.
pub(crate) const MAX_PD: u32 = 0x1_0000;
pub(crate) const MAX_QP: u32 = 0x1_0000;
pub(crate) const MAX_QP_WR: u32 = 0x4000;
pub(crate) const MAX_SGE: u32 = 32;
pub(crate) const MAX_SRQ: u32 = 0x1_0000;
pub(crate) const MAX_SRQ_WR: u32 = MAX_QP_WR;
pub(crate) const MAX_CQ: u32 = 0x1_0000;
/// 1 Mi - 1 entries (64 MiB of ring, charged to the caller's memcg and
/// the context's ring cap).  libfabric's ofi_rxm sizes its verbs CQ
/// for a whole universe of peers ((rx + tx size) x 256 by default,
/// ~200 000 entries) without clamping it to max_cqe: with 64 Ki it
/// failed with EINVAL (as on rxe, 32 Ki); mlx5 offers 4 Mi.
pub(crate) const MAX_CQE: u32 = 0x10_0000 - 1;
pub(crate) const MAX_MR: u32 = 0x1_0000;
pub(crate) const MAX_AH: u32 = 0x1_0000;
/// Outstanding READ/atomic requests per QP, either way (rdma_rxe: 128).
pub(crate) const MAX_RD_ATOM: u32 = 128;
/// The largest message (`max_msg_sz`): the IBA's 2^31 bytes, what the
/// WQE checks enforce (`proto::wqe::MAX_MSG_SIZE`; until 2026-12-07 the
/// port said 1 GiB while 2 GiB messages were taken).
pub(crate) const MAX_MSG_SZ: u32 = crate::proto::wqe::MAX_MSG_SIZE;
pub(crate) const GID_TABLE_LEN: u32 = 1024;
pub(crate) const PAGE_SIZE_CAP: u64 = 0xffff_f000;
pub(crate) const VENDOR_ID: u32 = 0x00ff_ffff;
pub(crate) const ACK_DELAY: u8 = 15;

/// Largest work-queue depth (`max_qp_wr`).
pub(crate) fn max_qp_wr() -> u32 {
    MAX_QP_WR
}

/// Largest page list of a fast-registration MR
/// (`max_fast_reg_page_list_len`).
pub(crate) const MAX_FAST_REG_PAGES: u32 = 512;

/// The device attributes of a new device whose node GUID is `guid`.
pub(crate) fn device_attrs(guid: u64) -> bindings::ib_device_attr {
    let mut a = bindings::ib_device_attr {
        vendor_id: VENDOR_ID,
        sys_image_guid: guid,
        max_mr_size: u64::MAX,
        page_size_cap: PAGE_SIZE_CAP,
        max_qp: MAX_QP as c_int,
        max_qp_wr: MAX_QP_WR as c_int,
        max_send_sge: MAX_SGE as c_int,
        max_recv_sge: MAX_SGE as c_int,
        max_sge_rd: MAX_SGE as c_int,
        max_srq: MAX_SRQ as c_int,
        max_srq_wr: MAX_SRQ_WR as c_int,
        max_srq_sge: MAX_SGE as c_int,
        max_cq: MAX_CQ as c_int,
        max_cqe: MAX_CQE as c_int,
        max_mr: MAX_MR as c_int,
        ..Default::default()
    };
    // Memory windows share the key table with the regions (`max_mr` keys).
    a.max_mw = MAX_MR as c_int;
    a.device_cap_flags |= (bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW
        | bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW_TYPE_2B) as u64;
    a.max_pd = MAX_PD as c_int;
    // XRC domains, XRC SRQs and XRC initiator/target QPs.
    a.device_cap_flags |= bindings::ib_device_cap_flags_IB_DEVICE_XRC as u64;
    a.max_qp_rd_atom = MAX_RD_ATOM as c_int;
    a.max_qp_init_rd_atom = MAX_RD_ATOM as c_int;
    a.max_res_rd_atom = (MAX_RD_ATOM * MAX_QP) as c_int;
    a.max_ah = MAX_AH as c_int;
    a.max_mcast_grp = crate::mcast::MAX_GROUPS as c_int;
    a.max_mcast_qp_attach = crate::mcast::MAX_QP_PER_GROUP as c_int;
    a.max_total_mcast_qp_attach = (crate::mcast::MAX_GROUPS * crate::mcast::MAX_QP_PER_GROUP) as c_int;
    let cap = crate::ib::device::max_objects_param();
    if cap != 0 {
        let cap = cap.min(i32::MAX as u32) as c_int;
        for m in [&mut a.max_qp, &mut a.max_srq, &mut a.max_cq, &mut a.max_mr, &mut a.max_pd, &mut a.max_ah] {
            *m = (*m).min(cap);
        }
        a.max_res_rd_atom = (MAX_RD_ATOM as c_int).saturating_mul(a.max_qp);
        // Windows take their keys from the regions' table.
        a.max_mw = a.max_mr;
    }
    a.max_pkeys = 1;
    // What the device does that ib_core and consumers ask about: RNR NAKs
    // for sends that find no receive, a system image GUID, port events
    // (PORT_ACTIVE/PORT_ERR follow the netdev), SRQ resize (`modify_srq`
    // with IB_SRQ_MAX_WR; the SGE count per receive stays the creation's).
    a.device_cap_flags |= (bindings::ib_device_cap_flags_IB_DEVICE_RC_RNR_NAK_GEN
        | bindings::ib_device_cap_flags_IB_DEVICE_SYS_IMAGE_GUID
        | bindings::ib_device_cap_flags_IB_DEVICE_PORT_ACTIVE_EVENT
        | bindings::ib_device_cap_flags_IB_DEVICE_SRQ_RESIZE) as u64;
    a.local_ca_ack_delay = ACK_DELAY;
    // The responder's atomics are the CPU's atomic instructions on the word
    // (`PageRef::atomic`), so they are atomic across all QPs of the device:
    // IB_ATOMIC_HCA (and with the CPUs' own atomics, which GLOB would also
    // promise for other HCAs' atomics, which are not ours to vouch for).
    a.atomic_cap = bindings::ib_atomic_cap_IB_ATOMIC_HCA;
    // Completion timestamps (CQs created with
    // IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION): CLOCK_MONOTONIC in ns, a
    // 64-bit "device clock" at 1 GHz.
    a.timestamp_mask = u64::MAX;
    a.hca_core_clock = 1_000_000; // kHz
    // IBTA 1.5 ATOMIC WRITE (RC user QPs), one atomic 8-byte store.
    a.device_cap_flags |= bindings::ib_device_cap_flags_IB_DEVICE_ATOMIC_WRITE as u64;
    // IBTA 1.5 FLUSH with the global placement type, as a responder (and
    // a requester of WQEs written to the ring: libibverbs 44 has no
    // ibv_wr_flush).  Not FLUSH_PERSISTENT: no memory of ours is
    // persistent, so no region may promise it (ib_check_mr_access then
    // refuses IB_ACCESS_FLUSH_PERSISTENT with EOPNOTSUPP).
    a.device_cap_flags |= bindings::ib_device_cap_flags_IB_DEVICE_FLUSH_GLOBAL as u64;
    a.kernel_cap_flags = bindings::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG as u64;
    // On-demand paging for user regions (IB_ACCESS_ON_DEMAND; implicit:
    // the whole address space): RC and UC in every role, UD
    // as the sender (a UD receive into a missing page drops the datagram
    // while the page is faulted in), SRQ receives.
    a.kernel_cap_flags |= bindings::ib_kernel_cap_flags_IBK_ON_DEMAND_PAGING as u64;
    a.odp_caps.general_caps = (bindings::ib_odp_general_cap_bits_IB_ODP_SUPPORT
        | bindings::ib_odp_general_cap_bits_IB_ODP_SUPPORT_IMPLICIT) as u64;
    let rc = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SEND
        | bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_RECV
        | bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_WRITE
        | bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_READ
        | bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_ATOMIC
        | bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SRQ_RECV;
    a.odp_caps.per_transport_caps.rc_odp_caps = rc;
    // XRC runs the RC engines: the same, its receives from XRC SRQs.
    a.odp_caps.per_transport_caps.xrc_odp_caps = rc;
    a.odp_caps.per_transport_caps.uc_odp_caps = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SEND
        | bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_RECV
        | bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_WRITE;
    a.odp_caps.per_transport_caps.ud_odp_caps = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SEND;
    // Fast registration (alloc_mr, map_mr_sg, REG_MR, LOCAL_INV, SEND with
    // invalidate) for kernel consumers.
    a.device_cap_flags |= bindings::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS as u64;
    a.max_fast_reg_page_list_len = MAX_FAST_REG_PAGES;
    a
}

/// `EOPNOTSUPP`, which the 6.12 `kernel::error::code` list lacks (its
/// `ENOTSUPP` is a kernel-internal code user space does not know).
pub(crate) fn eopnotsupp() -> Error {
    Error::from_errno(-(bindings::EOPNOTSUPP as c_int))
}

/// Copies the driver command of a verb into `dst`.  Fails unless user
/// space sent at least `dst.len()` bytes.
/// The caller of a create/resize verb: for a user call (`udata` set) its
/// driver command of `N` bytes is read and checked with `valid`, and its
/// live user context returned; a kernel call gives null.
pub(crate) fn user_call<const N: usize>(
    udata: Option<UData<'_>>,
    valid: impl FnOnce(&[u8; N]) -> bool,
) -> Result<Option<UctxRef>> {
    let Some(udata) = udata else { return Ok(None) };
    let mut cmd = [0u8; N];
    udata.read(&mut cmd)?;
    if !valid(&cmd) {
        return Err(EINVAL);
    }
    udata.ucontext().map(Some).ok_or(EINVAL)
}

