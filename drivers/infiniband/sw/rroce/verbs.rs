// SPDX-License-Identifier: GPL-2.0
//! The verbs of an rroce device: the `ib_device_ops` table, the device's
//! limits and attributes, and the device-wide verbs ([`DeviceOps`]).
//!
//! The table names the abstraction layer's generic entry points (`ib::*`)
//! instantiated with the driver's types; the QP, MR and MW entry points are
//! still the driver's own (`qp`, `mr`, `mw`: not on the layer yet).

#![forbid(unsafe_code)]

use core::sync::atomic::Ordering;
use kernel::bindings;
use kernel::ffi::c_int;
use kernel::prelude::*;

use crate::ah;
use crate::cq;
use crate::mr;
use crate::qp;
use crate::device::{self, DevPriv, RroceDev};
use crate::ib::device::{self as ibdev, DeviceOps};
use crate::ib::udata::UData;
use crate::ib::ucontext::{self, UcontextOps, UctxRef};
use crate::proto::abi;
use crate::proto::link;

/// Device limits advertised in `query_device`.
mod limits {
    pub(super) const MAX_PD: u32 = 0x1_0000;
    pub(super) const MAX_QP: u32 = 0x1_0000;
    pub(super) const MAX_QP_WR: u32 = 0x4000;
    pub(crate) const MAX_SGE: u32 = 32;
    pub(super) const MAX_SRQ: u32 = 0x1_0000;
    pub(super) const MAX_SRQ_WR: u32 = MAX_QP_WR;
    pub(super) const MAX_CQ: u32 = 0x1_0000;
    /// 1 Mi - 1 entries (64 MiB of ring, charged to the caller's memcg and
    /// the context's ring cap).  libfabric's ofi_rxm sizes its verbs CQ
    /// for a whole universe of peers ((rx + tx size) x 256 by default,
    /// ~200 000 entries) without clamping it to max_cqe: with 64 Ki it
    /// failed with EINVAL (as on rxe, 32 Ki); mlx5 offers 4 Mi.
    pub(super) const MAX_CQE: u32 = 0x10_0000 - 1;
    pub(super) const MAX_MR: u32 = 0x1_0000;
    pub(super) const MAX_AH: u32 = 0x1_0000;
    pub(super) const MAX_RD_ATOM: u32 = 16;
    pub(super) const MAX_MSG_SZ: u32 = 1 << 30;
    pub(super) const GID_TABLE_LEN: u32 = 1024;
    pub(super) const PAGE_SIZE_CAP: u64 = 0xffff_f000;
    pub(super) const VENDOR_ID: u32 = 0x00ff_ffff;
    pub(super) const ACK_DELAY: u8 = 15;
}

/// Largest work-queue depth (`max_qp_wr`).
/// SGEs per work request (send and receive).
pub(crate) const MAX_SGE: u32 = limits::MAX_SGE;

pub(crate) fn max_qp_wr() -> u32 {
    limits::MAX_QP_WR
}

/// The ops table; ib_core copies it into each device.
pub(crate) fn device_ops(module: &'static ThisModule) -> bindings::ib_device_ops {
    bindings::ib_device_ops {
        owner: module.as_ptr(),
        driver_id: bindings::rdma_driver_id_RDMA_DRIVER_UNKNOWN,
        uverbs_abi_ver: abi::ABI_VERSION,
        dealloc_driver: Some(device::dealloc_driver),
        query_device: Some(ibdev::query_device::<DevPriv>),
        query_port: Some(ibdev::query_port::<DevPriv>),
        get_port_immutable: Some(ibdev::get_port_immutable::<DevPriv>),
        get_link_layer: Some(ibdev::get_link_layer),
        query_gid: Some(ibdev::query_gid),
        query_pkey: Some(ibdev::query_pkey::<DevPriv>),
        alloc_ucontext: Some(ucontext::alloc_ucontext::<UserAbi>),
        dealloc_ucontext: Some(ucontext::dealloc_ucontext),
        disassociate_ucontext: Some(ucontext::disassociate_ucontext),
        mmap: Some(ucontext::mmap),
        mmap_free: Some(ucontext::mmap_free),
        alloc_pd: Some(ibdev::alloc_pd::<DevPriv>),
        dealloc_pd: Some(ibdev::dealloc_pd::<DevPriv>),
        create_cq: Some(crate::ib::cq::create_cq::<cq::CqPriv>),
        destroy_cq: Some(crate::ib::cq::destroy_cq::<cq::CqPriv>),
        req_notify_cq: Some(crate::ib::cq::req_notify_cq::<cq::CqPriv>),
        resize_cq: Some(crate::ib::cq::resize_cq::<cq::CqPriv>),
        poll_cq: Some(crate::ib::cq::poll_cq::<cq::CqPriv>),
        post_send: Some(qp::post_send),
        post_recv: Some(qp::post_recv),
        alloc_hw_port_stats: Some(crate::ib::stats::alloc_hw_port_stats::<crate::stats::Stats>),
        get_hw_stats: Some(crate::ib::stats::get_hw_stats::<crate::stats::Stats>),
        size_ib_cq: crate::ib::cq::size::<cq::CqPriv>(),
        create_ah: Some(crate::ib::ah::create_ah::<ah::RroceAh>),
        create_user_ah: Some(crate::ib::ah::create_ah::<ah::RroceAh>),
        destroy_ah: Some(crate::ib::ah::destroy_ah::<ah::RroceAh>),
        size_ib_ah: crate::ib::ah::size::<ah::RroceAh>(),
        create_qp: Some(qp::create_qp),
        modify_qp: Some(qp::modify_qp),
        query_qp: Some(qp::query_qp),
        destroy_qp: Some(qp::destroy_qp),
        attach_mcast: Some(qp::attach_mcast),
        detach_mcast: Some(qp::detach_mcast),
        size_ib_qp: qp::QP_SIZE,
        create_srq: Some(crate::ib::srq::create_srq::<crate::srq::SrqPriv>),
        modify_srq: Some(crate::ib::srq::modify_srq::<crate::srq::SrqPriv>),
        query_srq: Some(crate::ib::srq::query_srq::<crate::srq::SrqPriv>),
        destroy_srq: Some(crate::ib::srq::destroy_srq::<crate::srq::SrqPriv>),
        post_srq_recv: Some(crate::ib::srq::post_srq_recv::<crate::srq::SrqPriv>),
        size_ib_srq: crate::ib::srq::size::<crate::srq::SrqPriv>(),
        reg_user_mr: Some(mr::reg_user_mr),
        rereg_user_mr: Some(mr::rereg_user_mr),
        get_dma_mr: Some(mr::get_dma_mr),
        dereg_mr: Some(mr::dereg_mr),
        alloc_mw: Some(crate::mw::alloc_mw),
        dealloc_mw: Some(crate::mw::dealloc_mw),
        size_ib_mw: crate::mw::MW_SIZE,
        alloc_mr: Some(mr::alloc_mr),
        map_mr_sg: Some(mr::map_mr_sg),
        size_ib_pd: ibdev::PD_SIZE,
        size_ib_ucontext: ucontext::SIZE,
        ..Default::default()
    }
}

/// The device attributes of a new device whose node GUID is `guid`.
pub(crate) fn device_attrs(guid: u64) -> bindings::ib_device_attr {
    use limits::*;
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
    a.max_qp_rd_atom = MAX_RD_ATOM as c_int;
    a.max_qp_init_rd_atom = MAX_RD_ATOM as c_int;
    a.max_res_rd_atom = (MAX_RD_ATOM * MAX_QP) as c_int;
    a.max_ah = MAX_AH as c_int;
    a.max_mcast_grp = crate::mcast::MAX_GROUPS as c_int;
    a.max_mcast_qp_attach = crate::mcast::MAX_QP_PER_GROUP as c_int;
    a.max_total_mcast_qp_attach = (crate::mcast::MAX_GROUPS * crate::mcast::MAX_QP_PER_GROUP) as c_int;
    let cap = ibdev::max_objects_param();
    if cap != 0 {
        let cap = cap.min(i32::MAX as u32) as c_int;
        for m in [&mut a.max_qp, &mut a.max_srq, &mut a.max_cq, &mut a.max_mr, &mut a.max_pd, &mut a.max_ah] {
            *m = (*m).min(cap);
        }
        a.max_res_rd_atom = (MAX_RD_ATOM as c_int).saturating_mul(a.max_qp);
    }
    a.max_pkeys = 1;
    a.local_ca_ack_delay = ACK_DELAY;
    // One module-wide lock serialises the responder's atomics (rroce_page_atomic),
    // so they are atomic across all QPs of the device: IB_ATOMIC_HCA.
    a.atomic_cap = bindings::ib_atomic_cap_IB_ATOMIC_HCA;
    a.kernel_cap_flags = bindings::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG as u64;
    // Fast registration (alloc_mr, map_mr_sg, REG_MR, LOCAL_INV, SEND with
    // invalidate) for kernel consumers.
    a.device_cap_flags |= bindings::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS as u64;
    a.max_fast_reg_page_list_len = mr::MAX_FAST_REG_PAGES;
    a
}

/// The user ABI: what `alloc_ucontext` answers.
pub(crate) struct UserAbi;

impl UcontextOps for UserAbi {
    fn alloc(udata: UData<'_>) -> Result {
        let resp = abi::AllocUcontextResp { abi_version: abi::ABI_VERSION, ..Default::default() };
        udata.write(&resp.to_bytes())
    }
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

impl DeviceOps for DevPriv {
    fn attrs(dev: &RroceDev) -> bindings::ib_device_attr {
        // ib_core zeroes `ib.attrs` before asking, so the attributes live
        // with us.
        dev.p.attrs
    }

    fn query_port(dev: &RroceDev, port: u32, a: &mut bindings::ib_port_attr) -> Result {
        if port != 1 {
            return Err(EINVAL);
        }
        let active = dev.link_active();
        a.state = if active {
            bindings::ib_port_state_IB_PORT_ACTIVE
        } else {
            bindings::ib_port_state_IB_PORT_DOWN
        };
        // Administratively up without carrier: still training, in IB terms.
        a.phys_state = if active {
            bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP
        } else if dev.p.ndev.is_running() {
            bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_POLLING
        } else {
            bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED
        } as u8;
        let eth_mtu = dev.p.ndev.mtu();
        a.max_mtu = link::IbMtu::Mtu4096.code();
        a.active_mtu = link::active_mtu(eth_mtu).map_or(link::IbMtu::Mtu256.code(), |m| m.code());
        a.phys_mtu = eth_mtu;
        a.gid_tbl_len = limits::GID_TABLE_LEN as c_int;
        a.set_ip_gids(1);
        a.max_msg_sz = limits::MAX_MSG_SZ;
        a.pkey_tbl_len = 1;
        a.max_vl_num = 1;
        // The netdev is going away (or hides its speed): the port query
        // itself still succeeds, with the slowest rate.
        (a.active_speed, a.active_width) = dev.eth_speed(port).unwrap_or((
            bindings::ib_port_speed_IB_SPEED_SDR as u16,
            bindings::ib_port_width_IB_WIDTH_1X as u8,
        ));
        Ok(())
    }

    fn port_immutable(dev: &RroceDev, port: u32, imm: &mut bindings::ib_port_immutable) -> Result {
        let attr = dev.query_port_core(port)?;
        imm.pkey_tbl_len = attr.pkey_tbl_len.into();
        imm.gid_tbl_len = attr.gid_tbl_len;
        // RoCEv2 with the GSI QP: ib_core's MAD layer opens QP1 on the port
        // and the CM (and so rdma_cm) runs over it.
        imm.core_cap_flags = bindings::RDMA_CORE_CAP_PROT_ROCE_UDP_ENCAP
            | bindings::RDMA_CORE_CAP_IB_MAD
            | bindings::RDMA_CORE_CAP_IB_CM
            | bindings::RDMA_CORE_CAP_AF_IB
            | bindings::RDMA_CORE_CAP_ETH_AH;
        // IB_MGMT_MAD_SIZE
        imm.max_mad_size = 256;
        Ok(())
    }

    fn query_pkey(_dev: &RroceDev, _port: u32, index: u16) -> Result<u16> {
        if index != 0 {
            return Err(EINVAL);
        }
        Ok(0xffff)
    }

    fn alloc_pd(dev: &RroceDev) -> Result {
        let max = dev.p.attrs.max_pd as u32;
        dev.p
            .pds
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < max).then_some(n + 1))
            .map(|_| ())
            .map_err(|_| ENOMEM)
    }

    fn dealloc_pd(dev: &RroceDev) {
        dev.p.pds.fetch_sub(1, Ordering::Relaxed);
    }
}
