// SPDX-License-Identifier: GPL-2.0
//! A driver's `ib_device_ops` table, built from its object types.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! The layer's entry points are generic over the driver's part of each
//! object, and they cast what ib_core hands them accordingly: a QP's
//! `send_cq` to the driver's CQ part, a kernel work request's `ib_ah` and
//! `ib_mr` to its AH and MR parts, an `ib_qp` found by number to its QP
//! part.  Every entry point and every object size in one table must
//! therefore name the same types.  [`Driver`] names them once, with the
//! equalities the entry points rely on as bounds, and [`ops`] fills the
//! table from it: a driver cannot build a table whose parts disagree.

use kernel::bindings;
use kernel::prelude::*;

use crate::ib::ah::{self, AhOps};
use crate::ib::cq::{self, CqOps};
use crate::ib::device::{self, DeviceOps};
use crate::ib::mr::{self, MrOps};
use crate::ib::mw::{self, MwOps};
use crate::ib::qp::{self, HasQps, QpOps};
use crate::ib::srq::{self, HasSrqs, SrqOps};
use crate::ib::stats::{self, HwStats};
use crate::ib::ucontext::{self, UcontextOps};

/// A driver's types: its device data and its part of each object.
pub(crate) trait Driver: 'static {
    /// The device data, naming the QP and SRQ types its tables hold.
    type Dev: DeviceOps + HasQps<Qp = Self::Qp> + HasSrqs<Srq = Self::Srq>;
    /// What `alloc_ucontext` answers.
    type Ucontext: UcontextOps;
    /// The driver's part of each object.
    type Cq: CqOps<Dev = Self::Dev>;
    type Qp: QpOps<Dev = Self::Dev, Cq = Self::Cq, Srq = Self::Srq, Ah = Self::Ah, Mr = Self::Mr>;
    type Srq: SrqOps<Dev = Self::Dev, Cq = Self::Cq>;
    type Ah: AhOps<Dev = Self::Dev>;
    type Mr: MrOps<Dev = Self::Dev>;
    type Mw: MwOps<Dev = Self::Dev>;
    /// The port's counters.
    type Stats: HwStats<Dev = Self::Dev>;
    /// The user ABI's version (`uverbs_abi_ver`).
    const ABI_VERSION: u32;
}

/// The ops table of driver `D`; ib_core copies it into each device.
pub(crate) fn ops<D: Driver>(module: &'static ThisModule) -> bindings::ib_device_ops {
    bindings::ib_device_ops {
        owner: module.as_ptr(),
        driver_id: bindings::rdma_driver_id_RDMA_DRIVER_UNKNOWN,
        uverbs_abi_ver: D::ABI_VERSION,
        dealloc_driver: Some(device::dealloc_driver::<D::Dev>),
        query_device: Some(device::query_device::<D::Dev>),
        query_port: Some(device::query_port::<D::Dev>),
        get_port_immutable: Some(device::get_port_immutable::<D::Dev>),
        get_link_layer: Some(device::get_link_layer),
        query_gid: Some(device::query_gid),
        query_pkey: Some(device::query_pkey::<D::Dev>),
        alloc_ucontext: Some(ucontext::alloc_ucontext::<D::Ucontext>),
        dealloc_ucontext: Some(ucontext::dealloc_ucontext),
        query_ucontext: Some(ucontext::query_ucontext),
        disassociate_ucontext: Some(ucontext::disassociate_ucontext),
        mmap: Some(ucontext::mmap),
        mmap_free: Some(ucontext::mmap_free),
        alloc_pd: Some(device::alloc_pd::<D::Dev>),
        dealloc_pd: Some(device::dealloc_pd::<D::Dev>),
        alloc_xrcd: Some(device::alloc_xrcd::<D::Dev>),
        dealloc_xrcd: Some(device::dealloc_xrcd::<D::Dev>),
        size_ib_pd: device::PD_SIZE,
        size_ib_xrcd: device::XRCD_SIZE,
        size_ib_ucontext: ucontext::SIZE,
        create_cq: Some(cq::create_cq::<D::Cq>),
        destroy_cq: Some(cq::destroy_cq::<D::Cq>),
        req_notify_cq: Some(cq::req_notify_cq::<D::Cq>),
        resize_cq: Some(cq::resize_cq::<D::Cq>),
        poll_cq: Some(cq::poll_cq::<D::Cq>),
        size_ib_cq: cq::size::<D::Cq>(),
        create_ah: Some(ah::create_ah::<D::Ah>),
        create_user_ah: Some(ah::create_ah::<D::Ah>),
        destroy_ah: Some(ah::destroy_ah::<D::Ah>),
        size_ib_ah: ah::size::<D::Ah>(),
        create_qp: Some(qp::create_qp::<D::Qp>),
        modify_qp: Some(qp::modify_qp::<D::Qp>),
        query_qp: Some(qp::query_qp::<D::Qp>),
        destroy_qp: Some(qp::destroy_qp::<D::Qp>),
        post_send: Some(qp::post_send::<D::Qp>),
        post_recv: Some(qp::post_recv::<D::Qp>),
        attach_mcast: Some(qp::attach_mcast::<D::Qp>),
        detach_mcast: Some(qp::detach_mcast::<D::Qp>),
        size_ib_qp: qp::size::<D::Qp>(),
        create_srq: Some(srq::create_srq::<D::Srq>),
        modify_srq: Some(srq::modify_srq::<D::Srq>),
        query_srq: Some(srq::query_srq::<D::Srq>),
        destroy_srq: Some(srq::destroy_srq::<D::Srq>),
        post_srq_recv: Some(srq::post_srq_recv::<D::Srq>),
        size_ib_srq: srq::size::<D::Srq>(),
        reg_user_mr: Some(mr::reg_user_mr::<D::Mr>),
        rereg_user_mr: Some(mr::rereg_user_mr::<D::Mr>),
        get_dma_mr: Some(mr::get_dma_mr::<D::Mr>),
        alloc_mr: Some(mr::alloc_mr::<D::Mr>),
        map_mr_sg: Some(mr::map_mr_sg::<D::Mr>),
        dereg_mr: Some(mr::dereg_mr::<D::Mr>),
        advise_mr: Some(mr::advise_mr::<D::Mr>),
        alloc_mw: Some(mw::alloc_mw::<D::Mw>),
        dealloc_mw: Some(mw::dealloc_mw::<D::Mw>),
        size_ib_mw: mw::size::<D::Mw>(),
        alloc_hw_port_stats: Some(stats::alloc_hw_port_stats::<D::Stats>),
        get_hw_stats: Some(stats::get_hw_stats::<D::Stats>),
        ..Default::default()
    }
}
