// SPDX-License-Identifier: GPL-2.0
//! Address vectors: where a connected QP, or a UD work request through an
//! address handle, sends to.  A leaf below the objects that use them.

#![forbid(unsafe_code)]

use kernel::prelude::*;

use crate::ib::ah::RoceAttr;
use crate::ib::PdId;
use crate::proto::net::IpAddr;

/// Where a connected QP sends to, resolved at `modify_qp(AV)`.
#[derive(Clone, Copy, Default)]
pub(crate) struct AddressVector {
    pub(crate) dgid: [u8; 16],
    pub(crate) sgid: [u8; 16],
    pub(crate) sgid_index: u8,
    pub(crate) hop_limit: u8,
    pub(crate) traffic_class: u8,
    pub(crate) flow_label: u32,
    pub(crate) dmac: [u8; 6],
}

/// The address vector of a `modify_qp(AV)` or `create_ah`: RoCEv2 with a
/// GRH only, both GIDs of one IP family.
pub(crate) fn address_vector(a: &RoceAttr) -> Result<AddressVector> {
    if !a.roce || !a.grh || a.port_num != 1 || !a.sgid_roce_v2 {
        return Err(EINVAL);
    }
    if core::mem::discriminant(&IpAddr::from_gid(&a.dgid)) != core::mem::discriminant(&IpAddr::from_gid(&a.sgid)) {
        return Err(EINVAL);
    }
    Ok(AddressVector {
        dgid: a.dgid,
        sgid: a.sgid,
        sgid_index: a.sgid_index,
        hop_limit: a.hop_limit,
        traffic_class: a.traffic_class,
        flow_label: a.flow_label,
        dmac: a.dmac,
    })
}

/// What the UD data path reads of an address handle, under RCU: kept in
/// the device's AH table, not in ib_core's `ib_ah` allocation (ib_core
/// frees that right after `destroy_ah` without a grace period unless the
/// caller passed `RDMA_DESTROY_AH_SLEEPABLE`, which ib_cm does not); the
/// table frees it after a grace period whatever the flags.
pub(crate) struct AhEntry {
    pub(crate) pd: PdId,
    pub(crate) av: AddressVector,
}
