// SPDX-License-Identifier: GPL-2.0
//! Address handles: the destination of UD work requests.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! An AH is a resolved RoCEv2 address vector (the same checks as a
//! connected QP's, see [`qp::address_vector`]) under a small number that
//! user space puts into UD send WQEs; the number is looked up (under RCU)
//! when the WQE is executed, so a WQE can never name another context's
//! memory, only an AH number that is checked then.

use core::mem::{size_of, MaybeUninit};
use kernel::bindings;
use kernel::error::from_result;
use kernel::ffi::c_int;
use kernel::prelude::*;

use crate::device::RroceDev;
use crate::proto::abi::CreateAhResp;
use crate::qp::{self, AddressVector};
use crate::verbs;

/// AH numbers handed out (0 means "none" in the ABI).
const AH_MIN: u32 = 1;
const AH_MAX: u32 = 0x00ff_ffff;

struct AhPriv {
    num: u32,
    av: AddressVector,
}

/// The address vector of AH number `num` of `dev`, if it belongs to `pd`.
///
/// Call with bottom halves disabled (the data path under a QP lock):
/// `destroy_ah` unpublishes the number and waits for a grace period.
pub(crate) fn lookup(dev: &RroceDev, pd: *mut bindings::ib_pd, num: u32) -> Option<AddressVector> {
    let a = dev.p.ahs.load(num).cast::<RroceAh>();
    // SAFETY: the table only holds created AHs of this device, valid
    // during the read-side section (see above).
    let a = unsafe { a.as_ref() }?;
    if a.ib.pd != pd {
        return None;
    }
    // SAFETY: published only after `p` was written.
    Some(unsafe { a.p.assume_init_ref() }.av)
}

/// The number of AH `ah` (a kernel consumer's work request).
///
/// # Safety
///
/// `ah` must be null or a created AH of ours.
pub(crate) unsafe fn num_of(ah: *mut bindings::ib_ah) -> Option<u32> {
    // SAFETY: per the requirements.
    let a = unsafe { ah.cast::<RroceAh>().as_ref() }?;
    // SAFETY: created, so `p` is initialised.
    Some(unsafe { a.p.assume_init_ref() }.num)
}

/// Our part of an AH (allocated by ib_core, `ib` first).
///
/// # Invariants
///
/// `p` is initialised exactly when `create_ah` succeeded, until
/// `destroy_ah` drops it.
#[repr(C)]
pub(crate) struct RroceAh {
    ib: bindings::ib_ah,
    p: MaybeUninit<AhPriv>,
}

/// Size ib_core allocates for an AH.
pub(crate) const AH_SIZE: usize = size_of::<RroceAh>();

fn create(ah: &mut RroceAh, init: &bindings::rdma_ah_init_attr, udata: *mut bindings::ib_udata) -> Result {
    // SAFETY: ib_core set `device` to one of our devices.
    let dev = unsafe { RroceDev::from_ib(ah.ib.device) };
    // SAFETY: `ah_attr` is valid for the duration of the call.
    let attr = unsafe { init.ah_attr.as_ref() }.ok_or(EINVAL)?;
    let av = qp::address_vector(attr)?;
    let max = dev.p.attrs.max_ah as u32;
    // Written before the number is published, so that `lookup` never
    // sees it uninitialised (plain data: nothing to undo on failure).
    ah.p.write(AhPriv { num: 0, av });
    // Kernel consumers may create AHs in atomic context.
    let gfp = if init.flags & bindings::rdma_create_ah_flags_RDMA_CREATE_AH_SLEEPABLE != 0 {
        bindings::GFP_KERNEL
    } else {
        bindings::GFP_ATOMIC
    };
    let self_ptr: *mut RroceAh = ah;
    let num = dev.p.ahs.insert_gfp(self_ptr.cast(), AH_MIN, AH_MAX, max, gfp)?;
    if !udata.is_null() {
        let resp = CreateAhResp { ah_num: num, reserved: 0 };
        if let Err(e) = verbs::copy_to_udata(udata, &resp.to_bytes()) {
            dev.p.ahs.remove(num);
            return Err(e);
        }
    }
    // SAFETY: written above; `lookup` only reads `av`.
    unsafe { (*self_ptr).p.assume_init_mut() }.num = num;
    // INVARIANT: initialised on success (and harmlessly on failure).
    Ok(())
}

/// # Safety
///
/// `ib_device_ops::create_ah`/`create_user_ah` contract.
pub(crate) unsafe extern "C" fn create_ah(
    ah: *mut bindings::ib_ah,
    init: *mut bindings::rdma_ah_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: ib_core passes a zeroed AH of `AH_SIZE` bytes and valid
        // init attributes.
        let (ah, init) = unsafe { (&mut *ah.cast::<RroceAh>(), &*init) };
        create(ah, init, udata)?;
        Ok(0)
    })
}

/// # Safety
///
/// `ib_device_ops::destroy_ah` contract: `ah` was created successfully.
pub(crate) unsafe extern "C" fn destroy_ah(ah: *mut bindings::ib_ah, flags: u32) -> c_int {
    // SAFETY: by the invariant `p` is initialised; this is its one drop.
    let (p, dev) = unsafe {
        let a = &mut *ah.cast::<RroceAh>();
        (a.p.assume_init_read(), RroceDev::from_ib(a.ib.device))
    };
    dev.p.ahs.remove(p.num);
    // UD senders look AHs up under RCU.
    if flags & bindings::rdma_destroy_ah_flags_RDMA_DESTROY_AH_SLEEPABLE != 0 {
        // SAFETY: the caller may sleep.
        unsafe { bindings::synchronize_rcu() };
    }
    0
}
