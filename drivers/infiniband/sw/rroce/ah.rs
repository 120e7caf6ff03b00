// SPDX-License-Identifier: GPL-2.0
//! Address handles: the destination of UD work requests.
//!
//! An AH is a resolved RoCEv2 address vector (the same checks as a
//! connected QP's, see [`address_vector`]) under a small number that
//! user space puts into UD send WQEs; the number is looked up (under RCU)
//! when the WQE is executed, so a WQE can never name another context's
//! memory, only an AH number that is checked then.

#![forbid(unsafe_code)]

use kernel::prelude::*;

use crate::device::{DevPriv, RroceDev};
use crate::ib::ah::{AhInit, AhOps};
use crate::ib::PdId;
use crate::proto::abi::CreateAhResp;
use crate::av::{address_vector, AddressVector, AhEntry};
use crate::sync::rcu::RcuBox;

/// AH numbers handed out (0 means "none" in the ABI).
const AH_MIN: u32 = 1;
const AH_MAX: u32 = 0x00ff_ffff;

/// Our part of an AH: its number in the device's AH table.
pub(crate) struct RroceAh {
    pub(crate) num: u32,
}

/// The address vector of AH number `num` of `dev`, if it belongs to `pd`.
pub(crate) fn lookup(dev: &RroceDev, pd: PdId, num: u32) -> Option<AddressVector> {
    dev.p.ahs.read(num, |e| (e.pd == pd).then_some(e.av)).flatten()
}

impl AhOps for RroceAh {
    type Dev = DevPriv;

    fn create(dev: &RroceDev, init: AhInit<'_>) -> Result<Self> {
        let av = address_vector(&init.attr)?;
        let max = dev.p.attrs.max_ah as u32;
        // Kernel consumers may create AHs in atomic context; a user's AH is
        // charged to its memory cgroup.
        let (gfp, flags) = match (init.sleepable, init.udata.is_some()) {
            (false, _) => (kernel::bindings::GFP_ATOMIC, GFP_ATOMIC),
            (true, false) => (kernel::bindings::GFP_KERNEL, GFP_KERNEL),
            (true, true) => (kernel::bindings::GFP_KERNEL_ACCOUNT, GFP_KERNEL_ACCOUNT),
        };
        let entry = RcuBox::new(AhEntry { pd: init.pd, av }, flags)?;
        let num = dev.p.ahs.reserve(AH_MIN, AH_MAX, max, gfp)?;
        if let Some(udata) = init.udata {
            let resp = CreateAhResp { ah_num: num, reserved: 0 };
            if let Err(e) = udata.write(&resp.to_bytes()) {
                // Never published: the entry goes with `entry`.
                dev.p.ahs.unreserve(num);
                return Err(e);
            }
        }
        // Committed: nothing fails from here on.
        dev.p.ahs.publish(num, entry);
        Ok(Self { num })
    }

    fn destroy(self, dev: &RroceDev) {
        // UD senders that found the entry before it was unpublished may
        // still read it: the table frees it after a grace period (in any
        // context, without sleeping).
        dev.p.ahs.remove(self.num);
    }
}
