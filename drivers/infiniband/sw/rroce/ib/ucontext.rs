// SPDX-License-Identifier: GPL-2.0
//! User contexts and the ring memory they map (`rdma_user_mmap_entry`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! A process opens a user context per device; the queues it creates offer
//! their rings through mmap entries of that context ([`RingMem`]), each
//! charged to the context up to the module parameter `max_ctx_ring_mb`
//! (on top of the memory cgroup charge of the pages themselves).  The
//! layer owns the whole object: the driver only says what `alloc_ucontext`
//! answers ([`UcontextOps`]).

use core::ptr::NonNull;
use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::bindings;
use kernel::error::from_result;
use kernel::ffi::c_int;
use kernel::prelude::*;

use crate::ffi;
use crate::ib::shm::SharedBuf;
use crate::ib::udata::UData;
use crate::proto::ring::SharedRegion;

/// What a driver answers to `alloc_ucontext`.
pub(crate) trait UcontextOps {
    /// Writes the driver's response (ABI version, …) into `udata`.
    fn alloc(udata: UData<'_>) -> Result;
}

/// A user context as ib_core allocates it (`size_ib_ucontext` bytes).
///
/// # Invariants
///
/// Only reached through pointers ib_core passes for a device whose
/// `size_ib_ucontext` is [`SIZE`] (zeroed, so `ring_bytes` starts at 0).
#[repr(C)]
struct Ucontext {
    ib: bindings::ib_ucontext,
    /// Bytes of ring memory of the context's queues.
    ring_bytes: AtomicUsize,
}

/// `ib_device_ops::size_ib_ucontext`.
pub(crate) const SIZE: usize = core::mem::size_of::<Ucontext>();

/// A user context that outlives what holds this reference.
///
/// # Invariants
///
/// Points to a live [`Ucontext`]; ib_core destroys every object created
/// through a context (and so every holder of a reference from
/// [`UData::ucontext`]) before it deallocates the context.
#[derive(Clone, Copy)]
pub(crate) struct UctxRef(NonNull<Ucontext>);

// SAFETY: only the context's atomic counter and its address are used.
unsafe impl Send for UctxRef {}
// SAFETY: as above.
unsafe impl Sync for UctxRef {}

impl UctxRef {
    /// The context of a user verb call.
    ///
    /// # Safety
    ///
    /// `uctx` is null or the live context of a verb call of this driver,
    /// and every holder of the result is an object created in that call.
    pub(crate) unsafe fn from_raw(uctx: *mut bindings::ib_ucontext) -> Option<Self> {
        // INVARIANT: per the requirements (ib_core's order of teardown).
        NonNull::new(uctx.cast::<Ucontext>()).map(Self)
    }

    fn as_raw(&self) -> *mut bindings::ib_ucontext {
        self.0.as_ptr().cast()
    }

    fn ring_bytes(&self) -> &AtomicUsize {
        // SAFETY: live by the type invariant; only the atomic is used.
        unsafe { &(*self.0.as_ptr()).ring_bytes }
    }

    /// Charges `len` bytes of ring memory; `ENOMEM` over the module's
    /// per-context limit.
    fn charge(&self, len: usize) -> Result {
        // SAFETY: reads a module parameter.
        let max = (unsafe { ffi::rroce_param_max_ctx_ring_mb() } as usize).saturating_mul(1 << 20);
        self.ring_bytes()
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_add(len).filter(|&t| t <= max))
            .map(|_| ())
            .map_err(|_| ENOMEM)
    }

    /// Gives back a charge of [`UctxRef::charge`].
    fn uncharge(&self, len: usize) {
        self.ring_bytes().fetch_sub(len, Ordering::Relaxed);
    }
}

/// A ring offered to user space through `rdma_user_mmap_entry`.
///
/// # Invariants
///
/// `rdma` is the first field.  Once inserted, ib_core owns the entry: it
/// stays alive while the queue that inserted it holds its initial reference
/// (given back on [`RingMem`]'s drop) or an `mmap` call is using it, and is
/// freed, ring memory included, through `mmap_free`.
#[repr(C)]
pub(crate) struct MmapEntry {
    rdma: bindings::rdma_user_mmap_entry,
    buf: SharedBuf,
}

/// The memory of a queue's ring: mapped into a user process (user queues)
/// or private to the kernel (queues of kernel consumers).
///
/// # Invariants
///
/// In `Mapped`, the entry was inserted into the context's mmap table and
/// is removed only by `Drop`; its length is charged to the context until
/// then.
pub(crate) enum RingMem {
    /// Offered to user space.
    Mapped(NonNull<MmapEntry>, UctxRef),
    /// Kernel-only.
    Kernel(SharedBuf),
}

// SAFETY: the entry pointer is only used to reach its `SharedBuf`, which is
// `Send + Sync`; ib_core keeps the entry alive while we hold it.
unsafe impl Send for RingMem {}
// SAFETY: as above.
unsafe impl Sync for RingMem {}

impl RingMem {
    /// A ring of `buf`: offered to the process of `uctx` if there is one
    /// (then with its mmap offset), kernel-private otherwise.
    pub(crate) fn new(uctx: Option<UctxRef>, buf: SharedBuf) -> Result<(RingMem, u64)> {
        let Some(uctx) = uctx else { return Ok((RingMem::Kernel(buf), 0)) };
        let len = SharedRegion::len(&buf);
        uctx.charge(len)?;
        let e = match KBox::new(MmapEntry { rdma: Default::default(), buf }, GFP_KERNEL_ACCOUNT) {
            Ok(e) => KBox::into_raw(e),
            Err(e) => {
                uctx.uncharge(len);
                return Err(e.into());
            }
        };
        // SAFETY: the context is live (type invariant) and `e` a valid
        // entry; on success ib_core keeps it and frees it via `mmap_free`.
        let err = unsafe { bindings::rdma_user_mmap_entry_insert(uctx.as_raw(), &mut (*e).rdma, len) };
        if err != 0 {
            // SAFETY: not inserted, so still ours.
            drop(unsafe { KBox::from_raw(e) });
            uctx.uncharge(len);
            return Err(Error::from_errno(err));
        }
        // SAFETY: inserted entries stay valid until removed.
        let off = (unsafe { (*e).rdma.start_pgoff } as u64) << bindings::PAGE_SHIFT;
        // SAFETY: `e` came from `KBox::into_raw`, so it is not null.
        let e = unsafe { NonNull::new_unchecked(e) };
        // INVARIANT: inserted and charged just now.
        Ok((RingMem::Mapped(e, uctx), off))
    }

    /// The ring memory.
    pub(crate) fn buf(&self) -> &SharedBuf {
        match self {
            // SAFETY: we hold the entry's initial reference until `drop`.
            RingMem::Mapped(e, _) => unsafe { &e.as_ref().buf },
            RingMem::Kernel(b) => b,
        }
    }

    /// Whether the ring belongs to a kernel consumer.
    pub(crate) fn is_kernel(&self) -> bool {
        matches!(self, RingMem::Kernel(_))
    }
}

impl Drop for RingMem {
    fn drop(&mut self) {
        if let RingMem::Mapped(e, uctx) = *self {
            let len = SharedRegion::len(self.buf());
            // Gives back the creator's reference: no new mappings; the
            // memory goes once existing ones are unmapped.
            // SAFETY: by the invariant the entry is inserted, removed once
            // here.
            unsafe { bindings::rdma_user_mmap_entry_remove(&mut (*e.as_ptr()).rdma) };
            uctx.uncharge(len);
        }
    }
}

/// `ib_device_ops::alloc_ucontext`.
///
/// # Safety
///
/// ib_core's contract: `udata` is the call's user data.
pub(in crate::ib) unsafe extern "C" fn alloc_ucontext<T: UcontextOps>(
    _uctx: *mut bindings::ib_ucontext,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: valid for the call per the contract.
        T::alloc(unsafe { UData::from_raw(udata) }.ok_or(EINVAL)?)?;
        Ok(0)
    })
}

/// `ib_device_ops::dealloc_ucontext`: the context holds nothing.
///
/// # Safety
///
/// ib_core's contract.
pub(in crate::ib) unsafe extern "C" fn dealloc_ucontext(_uctx: *mut bindings::ib_ucontext) {}

/// `ib_device_ops::query_ucontext` (`UVERBS_METHOD_QUERY_CONTEXT`, which
/// `ibv_import_device` sends for a context it imports): ib_core answers
/// the core part; the driver part of `alloc_ucontext`'s answer holds
/// nothing a second `ibv_context` on the same file needs (the ABI version
/// is matched through `uverbs_abi_ver`, and no feature bits are defined),
/// so there is nothing to add.
///
/// # Safety
///
/// ib_core's contract.
pub(in crate::ib) unsafe extern "C" fn query_ucontext(
    _uctx: *mut bindings::ib_ucontext,
    _attrs: *mut bindings::uverbs_attr_bundle,
) -> c_int {
    0
}

/// Cuts a process off a device that is going away (netdev deleted, `rdma
/// link delete`, `rmmod`) instead of making the unregistration wait until
/// the process closes it.  By the time ib_core calls this it has destroyed
/// every object of the context through the ordinary destroy verbs (which
/// removed their mmap entries) and queued `IB_EVENT_DEVICE_FATAL` for the
/// process; its later commands fail with EIO, which libibverbs' destroy
/// calls treat as done.  Nothing is left for the driver: the rings the
/// process still maps are `vmalloc_user` pages kept alive by the mapping's
/// own page references (see [`crate::ib::shm`]), and those VMAs carry no
/// `vm_operations` of this module, so they may outlive the module too.
///
/// # Safety
///
/// `ib_device_ops::disassociate_ucontext` contract.
pub(in crate::ib) unsafe extern "C" fn disassociate_ucontext(_uctx: *mut bindings::ib_ucontext) {}

/// `ib_device_ops::mmap`: maps a ring the context offered.
///
/// # Safety
///
/// ib_core's contract: valid context and VMA.
pub(in crate::ib) unsafe extern "C" fn mmap(uctx: *mut bindings::ib_ucontext, vma: *mut bindings::vm_area_struct) -> c_int {
    // SAFETY: valid context and VMA per the contract.
    let entry = unsafe { bindings::rdma_user_mmap_entry_get(uctx, vma) };
    if entry.is_null() {
        return -(bindings::EINVAL as c_int);
    }
    // SAFETY: every entry of our contexts is an `MmapEntry` (first field),
    // alive while we hold the reference from `rdma_user_mmap_entry_get`;
    // ib_core checked the VMA's length against the entry's.
    let ret = match unsafe { (*entry.cast::<MmapEntry>()).buf.map_into(vma) } {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    };
    // SAFETY: drops the reference taken by `rdma_user_mmap_entry_get`.
    unsafe { bindings::rdma_user_mmap_entry_put(entry) };
    ret
}

/// `ib_device_ops::mmap_free`: the last reference to an entry is gone.
///
/// # Safety
///
/// ib_core's contract: `entry` is one of ours, unused from now on.
pub(in crate::ib) unsafe extern "C" fn mmap_free(entry: *mut bindings::rdma_user_mmap_entry) {
    // SAFETY: the entry was inserted by `RingMem::new` from a `KBox`;
    // this is the last reference, so the ring memory goes with it.
    drop(unsafe { KBox::from_raw(entry.cast::<MmapEntry>()) });
}
