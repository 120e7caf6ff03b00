// SPDX-License-Identifier: GPL-2.0
//! Timers, work items and the clock, as the data path uses them.
//!
//! C header: [`include/linux/timer.h`](srctree/include/linux/timer.h),
//! [`include/linux/workqueue.h`](srctree/include/linux/workqueue.h)
//!
//! The timer and the work item of a QP are embedded in it and set up
//! before it is published; [`TimerRef`] and [`WorkRef`] are what the data
//! path holds while the QP is live.

use core::ptr::NonNull;
use kernel::bindings;
use kernel::prelude::*;
use kernel::types::Opaque;

use crate::ffi;
use crate::sync::global::{Global, GlobalOwner, GlobalRef, Teardown};

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
/// It is published in a [`Global`]: each work item's owner holds a
/// [`QueueClaim`] (a borrow of it) from before the item is initialised
/// until after it is disabled, and the module's [`GlobalOwner`] destroys
/// it once every claim is given back.
///
/// # Invariants
///
/// `self.0` was allocated by `alloc_workqueue` and is destroyed by `Drop`.
pub(crate) struct WorkQueue(NonNull<bindings::workqueue_struct>);

// SAFETY: the workqueue API may be called from any thread and context.
unsafe impl Send for WorkQueue {}
// SAFETY: as above; `&self` only queues.
unsafe impl Sync for WorkQueue {}

static QUEUE: Global<WorkQueue> = Global::new();

/// A claim on the driver's workqueue: it is not destroyed while one exists.
pub(crate) type QueueClaim = GlobalRef<'static, WorkQueue>;

impl WorkQueue {
    /// Allocates and publishes the workqueue (`EBUSY` if one is
    /// published); dropping the owner destroys it once no claim is left.
    pub(crate) fn publish() -> Result<GlobalOwner<Self>> {
        let flags = bindings::wq_flags_WQ_HIGHPRI | bindings::wq_flags_WQ_MEM_RECLAIM;
        // SAFETY: a format without conversions and valid flags; process
        // context (module load).
        let wq = unsafe { bindings::alloc_workqueue(kernel::c_str!("rroce").as_char_ptr(), flags, 0) };
        // INVARIANT: allocated just above; dropping `Self` destroys it.
        let wq = Self(NonNull::new(wq).ok_or(ENOMEM)?);
        QUEUE.publish(KBox::pin(wq, GFP_KERNEL)?)
    }

    /// A claim, for the owner of a work item that is about to be
    /// initialised; `ENODEV` if the workqueue is gone or going.
    pub(crate) fn claim() -> Result<QueueClaim> {
        QUEUE.get().ok_or(ENODEV)
    }

    /// Queues `w` (a no-op if it is queued already or disabled).  Any
    /// context.
    ///
    /// # Safety
    ///
    /// `w` was initialised with `rroce_work_init` and is not freed during
    /// the call.
    unsafe fn queue(&self, w: *mut bindings::work_struct) {
        // SAFETY: the workqueue is live (type invariant); `w` per the
        // requirements.
        unsafe { ffi::rroce_work_queue(self.0.as_ptr(), w) };
    }
}

impl Teardown for WorkQueue {
    fn teardown(&self) {}
}

impl Drop for WorkQueue {
    fn drop(&mut self) {
        // SAFETY: allocated by `publish` (type invariant); no claim is
        // left (the `Global` drops its value only then), so nothing can
        // queue on it any more.
        unsafe { bindings::destroy_workqueue(self.0.as_ptr()) };
    }
}

/// Queues process-context work item `w` on the driver's workqueue, for a
/// caller that has no claim at hand (the transmit destructor; a no-op once
/// the workqueue is going, when no work item is left).  Any context.
///
/// # Safety
///
/// `w` was initialised with `rroce_work_init` and is not freed during the
/// call.
pub(crate) unsafe fn queue_work(w: *mut bindings::work_struct) {
    if let Some(q) = QUEUE.get() {
        // SAFETY: per the requirements.
        unsafe { q.queue(w) };
    }
}

/// An initialised work item: one that runs in process context (the
/// driver's [`WorkQueue`]), or in softirq context (`system_bh_wq`), on the
/// CPU that queued it, once the softirq that queued it (e.g. the NAPI poll
/// of a receive batch) has finished.
///
/// # Invariants
///
/// `self.w` was initialised with `rroce_bh_work_init` if `self.q` is
/// `None`, with `rroce_work_init` for `self.q` if not, and is cancelled
/// (and its owner freed) only after `'a` ends.
#[derive(Clone, Copy)]
pub(crate) struct WorkRef<'a> {
    w: &'a Opaque<bindings::work_struct>,
    /// The workqueue of a process-context item; `None`: `system_bh_wq`.
    q: Option<&'a WorkQueue>,
}

impl<'a> WorkRef<'a> {
    /// # Safety
    ///
    /// `w` was initialised with `rroce_bh_work_init` if `q` is `None`,
    /// with `rroce_work_init` if not, and is cancelled only after `'a`.
    pub(crate) unsafe fn new(w: &'a Opaque<bindings::work_struct>, q: Option<&'a WorkQueue>) -> Self {
        // INVARIANT: per the requirements.
        Self { w, q }
    }

    /// Queues the work item on its workqueue (a no-op if it is queued
    /// already).  Any context.
    pub(crate) fn queue(&self) {
        // SAFETY: initialised and not cancelled (type invariant), for
        // the workqueue of its kind.
        unsafe {
            match self.q {
                Some(q) => q.queue(self.w.get()),
                None => ffi::rroce_bh_work_queue(self.w.get()),
            }
        };
    }
}
