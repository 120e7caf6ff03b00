// SPDX-License-Identifier: GPL-2.0
//! Timers, work items and the clock, as the data path uses them.
//!
//! C header: [`include/linux/timer.h`](srctree/include/linux/timer.h),
//! [`include/linux/workqueue.h`](srctree/include/linux/workqueue.h)
//!
//! The timer and the work item of a QP are embedded in it and set up
//! before it is published; [`TimerRef`] and [`WorkRef`] are what the data
//! path holds while the QP is live.

use kernel::bindings;
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

/// An initialised work item: one that runs in process context
/// (`system_highpri_wq`), or in softirq context (`system_bh_wq`), on the
/// CPU that queued it, once the softirq that queued it (e.g. the NAPI poll
/// of a receive batch) has finished.
///
/// # Invariants
///
/// `self.w` was initialised with `rroce_bh_work_init` if `self.bh`, with
/// `rroce_work_init` if not, and is cancelled (and its owner freed) only
/// after `'a` ends.
#[derive(Clone, Copy)]
pub(crate) struct WorkRef<'a> {
    w: &'a Opaque<bindings::work_struct>,
    bh: bool,
}

impl<'a> WorkRef<'a> {
    /// # Safety
    ///
    /// `w` was initialised with `rroce_bh_work_init` if `bh`, with
    /// `rroce_work_init` if not, and is cancelled only after `'a`.
    pub(crate) unsafe fn new(w: &'a Opaque<bindings::work_struct>, bh: bool) -> Self {
        // INVARIANT: per the requirements.
        Self { w, bh }
    }

    /// Queues the work item on its workqueue (a no-op if it is queued
    /// already).  Any context.
    pub(crate) fn queue(&self) {
        // SAFETY: initialised and not cancelled (type invariant), for
        // the workqueue of its kind.
        unsafe {
            if self.bh {
                ffi::rroce_bh_work_queue(self.w.get())
            } else {
                ffi::rroce_work_queue(self.w.get())
            }
        };
    }
}
