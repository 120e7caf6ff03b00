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
use core::ptr::NonNull;
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

/// What the UD data path reads of an AH, under RCU.  Owned by the driver,
/// not part of ib_core's `ib_ah` allocation: ib_core frees that right after
/// `destroy_ah` without a grace period unless the caller passed
/// `RDMA_DESTROY_AH_SLEEPABLE` (ib_cm does not), so the entry is freed with
/// `call_rcu` instead, whatever the flags.
///
/// # Invariants
///
/// Allocated by [`KBox`]; `rcu` is used once, by `destroy_ah`.
#[repr(C)]
struct AhEntry {
    /// First: `free_entry` finds the entry from it.
    rcu: bindings::callback_head,
    pd: *mut bindings::ib_pd,
    av: AddressVector,
}

struct AhPriv {
    num: u32,
    entry: NonNull<AhEntry>,
}

/// The address vector of AH number `num` of `dev`, if it belongs to `pd`.
///
/// Call with bottom halves disabled (the data path under a QP lock): the
/// entry is freed only after a grace period that starts once its number
/// is unpublished.
pub(crate) fn lookup(dev: &RroceDev, pd: *mut bindings::ib_pd, num: u32) -> Option<AddressVector> {
    let e = dev.p.ahs.load(num).cast::<AhEntry>();
    // SAFETY: the table holds published entries of this device's AHs,
    // valid during the read-side section (see above).
    let e = unsafe { e.as_ref() }?;
    (e.pd == pd).then_some(e.av)
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
    // Kernel consumers may create AHs in atomic context; a user's AH is
    // charged to its memory cgroup.
    let (gfp, flags) = if init.flags & bindings::rdma_create_ah_flags_RDMA_CREATE_AH_SLEEPABLE == 0 {
        (bindings::GFP_ATOMIC, GFP_ATOMIC)
    } else if udata.is_null() {
        (bindings::GFP_KERNEL, GFP_KERNEL)
    } else {
        (bindings::GFP_KERNEL_ACCOUNT, GFP_KERNEL_ACCOUNT)
    };
    let entry = KBox::new(AhEntry { rcu: Default::default(), pd: ah.ib.pd, av }, flags)?;
    let num = dev.p.ahs.reserve(AH_MIN, AH_MAX, max, gfp)?;
    if !udata.is_null() {
        let resp = CreateAhResp { ah_num: num, reserved: 0 };
        if let Err(e) = verbs::copy_to_udata(udata, &resp.to_bytes()) {
            // Never published: the entry goes with `entry`.
            dev.p.ahs.unreserve(num);
            return Err(e);
        }
    }
    // Committed: nothing fails from here on.
    let entry = NonNull::from(KBox::leak(entry));
    dev.p.ahs.publish(num, entry.as_ptr().cast());
    // INVARIANT: initialised on success only.
    ah.p.write(AhPriv { num, entry });
    Ok(())
}

/// Frees an [`AhEntry`] once its grace period is over.
///
/// # Safety
///
/// Called by RCU with the `rcu` of an entry handed over in `destroy_ah`.
unsafe extern "C" fn free_entry(head: *mut bindings::callback_head) {
    // SAFETY: `rcu` is the first field of a `repr(C)` `AhEntry` allocated
    // by `KBox` (type invariant); no reader is left.
    drop(unsafe { KBox::from_raw(head.cast::<AhEntry>()) });
}

/// Waits for every entry handed to `call_rcu` to be freed (module unload:
/// `free_entry` is our code).
pub(crate) fn wait_for_frees() {
    // SAFETY: process context.
    unsafe { bindings::rcu_barrier() };
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
pub(crate) unsafe extern "C" fn destroy_ah(ah: *mut bindings::ib_ah, _flags: u32) -> c_int {
    // SAFETY: by the invariant `p` is initialised; this is its one drop.
    let (p, dev) = unsafe {
        let a = &mut *ah.cast::<RroceAh>();
        (a.p.assume_init_read(), RroceDev::from_ib(a.ib.device))
    };
    dev.p.ahs.remove(p.num);
    // UD senders that found the entry before it was unpublished may still
    // read it: freed after a grace period (in any context, without
    // sleeping).
    // SAFETY: the entry is ours (published, now unpublished), and its
    // `rcu` is used only here.
    unsafe { bindings::call_rcu(core::ptr::addr_of_mut!((*p.entry.as_ptr()).rcu), Some(free_entry)) };
    0
}
