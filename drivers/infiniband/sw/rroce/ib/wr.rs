// SPDX-License-Identifier: GPL-2.0
//! Work requests of kernel consumers (`ib_post_recv`, `ib_post_srq_recv`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! A post verb gets a chain of requests linked by `next` and reports the
//! first one it did not post through `bad_wr`.  [`RecvWrChain`] walks the
//! chain and remembers where it stopped; [`RecvWrChain::finish`] turns the
//! driver's result into the verb's return value and `bad_wr`.

use core::marker::PhantomData;
use kernel::bindings;
use kernel::ffi::c_int;
use kernel::prelude::*;

/// One receive work request.
pub(crate) struct RecvWr<'a> {
    /// The consumer's id (or `wr_cqe`: the same bits), returned in the
    /// completion.
    pub(crate) wr_id: u64,
    /// Where the message goes.
    pub(crate) sges: &'a [bindings::ib_sge],
}

/// The chain of receive requests of one post call.
///
/// # Invariants
///
/// `cur` is null or a request of a valid chain that lasts `'a` (the post
/// call); `started` says whether `cur` was yielded already.
pub(crate) struct RecvWrChain<'a> {
    cur: *const bindings::ib_recv_wr,
    started: bool,
    _call: PhantomData<&'a bindings::ib_recv_wr>,
}

impl<'a> RecvWrChain<'a> {
    /// The chain starting at `wr`.
    ///
    /// # Safety
    ///
    /// `wr` is null or the first of a valid chain of requests (each with
    /// `num_sge` SGEs at `sg_list`) that stays valid for `'a`.
    pub(crate) unsafe fn from_raw(wr: *const bindings::ib_recv_wr) -> Self {
        // INVARIANT: per the requirements; nothing yielded yet.
        Self { cur: wr, started: false, _call: PhantomData }
    }

    /// The verb's return value for the driver's `result`, storing the
    /// first request not posted (the one the walk stopped at) in `bad_wr`
    /// on failure.
    ///
    /// # Safety
    ///
    /// `bad_wr` is null or writable (ib_core's contract).
    pub(crate) unsafe fn finish(self, result: Result, bad_wr: *mut *const bindings::ib_recv_wr) -> c_int {
        match result {
            Ok(()) => 0,
            Err(e) => {
                if !bad_wr.is_null() {
                    // SAFETY: writable per the requirements.
                    unsafe { *bad_wr = self.cur };
                }
                e.to_errno()
            }
        }
    }
}

impl<'a> Iterator for RecvWrChain<'a> {
    /// A request, or `EINVAL` for a malformed one (the walk stops there).
    type Item = Result<RecvWr<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.started && !self.cur.is_null() {
            // SAFETY: a request of the chain (type invariant).
            self.cur = unsafe { (*self.cur).next };
        }
        self.started = true;
        // SAFETY: null or a request of the chain, valid for `'a`.
        let w = unsafe { self.cur.as_ref() }?;
        let sges = match usize::try_from(w.num_sge) {
            Ok(0) => &[][..],
            Ok(_) if w.sg_list.is_null() => return Some(Err(EINVAL)),
            // SAFETY: the request has `num_sge` SGEs at `sg_list`, valid
            // for the call.
            Ok(n) => unsafe { core::slice::from_raw_parts(w.sg_list, n) },
            Err(_) => return Some(Err(EINVAL)),
        };
        // SAFETY: a plain-data union; `wr_id` and `wr_cqe` share the bits.
        let wr_id = unsafe { w.__bindgen_anon_1.wr_id };
        Some(Ok(RecvWr { wr_id, sges }))
    }
}
