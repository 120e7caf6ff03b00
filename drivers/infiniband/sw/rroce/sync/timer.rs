// SPDX-License-Identifier: GPL-2.0
//! Timers, work items and the clock, as the data path uses them.
//!
//! C header: [`include/linux/timer.h`](srctree/include/linux/timer.h),
//! [`include/linux/workqueue.h`](srctree/include/linux/workqueue.h)
//!
//! The timer and the work item of a QP are embedded in it and set up
//! before it is published; [`TimerRef`] and [`WorkRef`] are what the data
//! path holds while the QP is live.

use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use kernel::bindings;
use kernel::prelude::*;
use kernel::types::Opaque;

use crate::ffi;

/// Monotonic time in nanoseconds (`ktime_get_ns`).
pub(crate) fn ktime_ns() -> u64 {
    // SAFETY: a plain clock read, allowed in any context.
    unsafe { ffi::rroce_ktime_ns() }
}

/// A set-up kernel timer.
///
/// # Invariants
///
/// `self.0` was set up with `rroce_timer_setup` and is shut down only
/// after `'a` ends.
#[derive(Clone, Copy)]
pub(crate) struct TimerRef<'a>(&'a Opaque<bindings::timer_list>);

impl<'a> TimerRef<'a> {
    /// # Safety
    ///
    /// `t` was set up (`rroce_timer_setup`) and is shut down only after
    /// `'a`.
    pub(crate) unsafe fn new(t: &'a Opaque<bindings::timer_list>) -> Self {
        // INVARIANT: per the requirements.
        Self(t)
    }

    /// (Re)arms the timer to fire in `ns` nanoseconds (at least one
    /// jiffy).  Any context.
    pub(crate) fn arm(&self, ns: u64) {
        // SAFETY: set up and not shut down (type invariant).
        unsafe { ffi::rroce_timer_arm(self.0.get(), ns) };
    }
}

/// The driver's workqueue, where its process-context work items run:
/// high priority and bound to the CPU that queues them, as
/// `system_highpri_wq`, and with a rescuer thread (`WQ_MEM_RECLAIM`).
/// Storage protocols (NVMe-oF, iSER, SRP, NFS, SMB Direct) run over the
/// device's QPs while the kernel writes back memory: their I/O must not
/// wait for a new kworker that cannot be created until that I/O
/// completes, so the QPs' work items need a queue that always has a
/// thread (the rule of `Documentation/core-api/workqueue.rst`).
///
/// # Invariants
///
/// `QUEUE` is null or a workqueue allocated by [`WorkQueue::new`]; it is
/// destroyed only when `OPEN` is false and `CLAIMS` is zero, and `OPEN`
/// is never set again once cleared.  While `CLAIMS` counts a
/// [`QueueClaim`], `QUEUE` is not null.
static QUEUE: AtomicPtr<bindings::workqueue_struct> = AtomicPtr::new(core::ptr::null_mut());
/// Whether [`QueueClaim::new`] may take a claim.
static OPEN: AtomicBool = AtomicBool::new(false);
/// [`QueueClaim`]s alive, and claims being attempted.
static CLAIMS: AtomicUsize = AtomicUsize::new(0);

/// The owner of the driver's workqueue (the module holds it, dropped after
/// every device): allocates it, and destroys it once no work item can be
/// queued on it any more.
pub(crate) struct WorkQueue(());

impl WorkQueue {
    /// Allocates the workqueue; `EBUSY` if it exists already.
    pub(crate) fn new() -> Result<Self> {
        let flags = bindings::wq_flags_WQ_HIGHPRI | bindings::wq_flags_WQ_MEM_RECLAIM;
        // SAFETY: a format without conversions and valid flags; process
        // context (module load).
        let wq = unsafe { bindings::alloc_workqueue(kernel::c_str!("rroce").as_char_ptr(), flags, 0) };
        if wq.is_null() {
            return Err(ENOMEM);
        }
        if QUEUE.compare_exchange(core::ptr::null_mut(), wq, Ordering::SeqCst, Ordering::SeqCst).is_err() {
            // SAFETY: allocated just above and never published.
            unsafe { bindings::destroy_workqueue(wq) };
            return Err(EBUSY);
        }
        // INVARIANT: `QUEUE` is set before claims may be taken.
        OPEN.store(true, Ordering::SeqCst);
        Ok(Self(()))
    }
}

impl Drop for WorkQueue {
    fn drop(&mut self) {
        OPEN.store(false, Ordering::SeqCst);
        // Every work item's owner gives its claim back once the item is
        // disabled: at module unload they are all gone already.
        crate::sync::wait_for_zero(&CLAIMS, "work items to be disabled");
        let wq = QUEUE.swap(core::ptr::null_mut(), Ordering::SeqCst);
        if !wq.is_null() {
            // INVARIANT: closed and unclaimed: nothing can queue on it.
            // SAFETY: allocated by `new`; destroyed once (swapped out).
            unsafe { bindings::destroy_workqueue(wq) };
        }
    }
}

/// A claim on the driver's workqueue, held by the owner of a work item
/// that runs there from before the item is initialised until after it is
/// disabled: the workqueue is not destroyed while a claim exists.
///
/// # Invariants
///
/// Counted in `CLAIMS`, taken while `OPEN` was set.
pub(crate) struct QueueClaim(());

impl QueueClaim {
    /// A claim; `ENODEV` once the workqueue is being destroyed (or before
    /// it exists).
    pub(crate) fn new() -> Result<Self> {
        // Counted before looking: the owner clears `OPEN` first and then
        // waits for the count, so a claim that saw it set is waited for.
        CLAIMS.fetch_add(1, Ordering::SeqCst);
        if !OPEN.load(Ordering::SeqCst) {
            CLAIMS.fetch_sub(1, Ordering::SeqCst);
            return Err(ENODEV);
        }
        // INVARIANT: counted, and `OPEN` was set.
        Ok(Self(()))
    }
}

impl Drop for QueueClaim {
    fn drop(&mut self) {
        CLAIMS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Queues process-context work item `w` on the driver's workqueue (a
/// no-op if it is queued already or disabled).  Any context.
///
/// # Safety
///
/// `w` was initialised with `rroce_work_init` and is not freed during the
/// call, and its owner holds a [`QueueClaim`].
pub(crate) unsafe fn queue_work(w: *mut bindings::work_struct) {
    // Not null: a claim is held (invariant of `QUEUE`).
    let wq = QUEUE.load(Ordering::Acquire);
    // SAFETY: `wq` is live while the caller's claim lasts; `w` per the
    // requirements.
    unsafe { ffi::rroce_work_queue(wq, w) };
}

/// An initialised work item: one that runs in process context (the
/// driver's [`WorkQueue`]), or in softirq context (`system_bh_wq`), on the
/// CPU that queued it, once the softirq that queued it (e.g. the NAPI poll
/// of a receive batch) has finished.
///
/// # Invariants
///
/// `self.w` was initialised with `rroce_bh_work_init` if `self.bh`, with
/// `rroce_work_init` if not (and then its owner holds a [`QueueClaim`]
/// for `'a`), and is cancelled (and its owner freed) only after `'a`
/// ends.
#[derive(Clone, Copy)]
pub(crate) struct WorkRef<'a> {
    w: &'a Opaque<bindings::work_struct>,
    bh: bool,
}

impl<'a> WorkRef<'a> {
    /// # Safety
    ///
    /// `w` was initialised with `rroce_bh_work_init` if `bh`, with
    /// `rroce_work_init` if not (and its owner holds a [`QueueClaim`] for
    /// `'a`), and is cancelled only after `'a`.
    pub(crate) unsafe fn new(w: &'a Opaque<bindings::work_struct>, bh: bool) -> Self {
        // INVARIANT: per the requirements.
        Self { w, bh }
    }

    /// Queues the work item on its workqueue (a no-op if it is queued
    /// already).  Any context.
    pub(crate) fn queue(&self) {
        // SAFETY: initialised and not cancelled (type invariant), for
        // the workqueue of its kind, whose claim its owner holds.
        unsafe {
            if self.bh {
                ffi::rroce_bh_work_queue(self.w.get())
            } else {
                queue_work(self.w.get())
            }
        };
    }
}
