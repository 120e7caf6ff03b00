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

use crate::ib::mr::MrRef;

/// A post verb's return value for `result`, storing `at` (the first
/// request not posted) in `bad_wr` on failure.
///
/// # Safety
///
/// `bad_wr` is null or writable.
unsafe fn finish_post<T>(result: Result, bad_wr: *mut *const T, at: *const T) -> c_int {
    match result {
        Ok(()) => 0,
        Err(e) => {
            if !bad_wr.is_null() {
                // SAFETY: writable per the requirements.
                unsafe { *bad_wr = at };
            }
            e.to_errno()
        }
    }
}

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
        // SAFETY: forwarded.
        unsafe { finish_post(result, bad_wr, self.cur) }
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

/// What a kernel send request carries beyond the common fields: the
/// members of the container structure its opcode (and the QP type)
/// implies.
pub(crate) enum SendExt<'a, A, M> {
    /// Nothing more (SEND, LOCAL_INV, …).
    None,
    /// `ib_rdma_wr` (WRITE, WRITE_WITH_IMM, READ).
    Rdma { remote_addr: u64, rkey: u32 },
    /// `ib_atomic_wr`.
    Atomic { remote_addr: u64, rkey: u32, compare_add: u64, swap: u64 },
    /// `ib_ud_wr` (any other opcode on a UD or GSI QP); `ah` is `None` for
    /// a null AH.
    Ud { ah: Option<&'a A>, remote_qpn: u32, remote_qkey: u32 },
    /// `ib_reg_wr` (REG_MR): the MR (one of this device), its new key and
    /// access flags.
    Reg { mr: MrRef<'a, M>, key: u32, access: c_int },
}

/// One send request of a kernel consumer.
pub(crate) struct SendWr<'a, A, M> {
    /// The consumer's id (or `wr_cqe`).
    pub(crate) wr_id: u64,
    /// `IB_WR_*`.
    pub(crate) opcode: bindings::ib_wr_opcode,
    /// `IB_SEND_*`.
    pub(crate) send_flags: u32,
    /// Immediate data or the rkey to invalidate (per opcode).
    pub(crate) imm_or_inv: u32,
    /// The gather list (`num_sge` entries).
    pub(crate) sges: &'a [bindings::ib_sge],
    /// The opcode's own members.
    pub(crate) ext: SendExt<'a, A, M>,
}

impl<'a, A, M> SendWr<'a, A, M> {
    /// The bytes of SGE `i` of an `IB_SEND_INLINE` request: kernel
    /// consumers pass inline data by kernel virtual address.
    pub(crate) fn inline_bytes(&self, i: usize) -> Option<&'a [u8]> {
        let s = self.sges.get(i)?;
        if s.length == 0 {
            return Some(&[]);
        }
        let p = s.addr as usize as *const u8;
        if p.is_null() {
            return None;
        }
        // SAFETY: `RecvWrChain`/`SendWrChain::from_raw`'s contract: an
        // inline SGE is `length` readable bytes at a kernel virtual
        // address, valid for the post call (`'a`).
        Some(unsafe { core::slice::from_raw_parts(p, s.length as usize) })
    }
}

/// The chain of send requests of one post call on a QP whose AHs are `A`
/// and whose device's MRs are `M`.
///
/// # Invariants
///
/// As for [`RecvWrChain`]; in addition each request is the `wr` member of
/// the container its opcode implies (`ib_rdma_wr`, `ib_atomic_wr`,
/// `ib_reg_wr`, or `ib_ud_wr` on a UD QP, `ud`), its AH (if any) a live
/// AH of this device whose driver part is `A`, its MR (if any) a live MR
/// not mapped concurrently — one of this driver's, whose part is `M`, if
/// its device is `device` — and its inline SGEs readable kernel memory,
/// all for `'a`.
pub(crate) struct SendWrChain<'a, A, M> {
    cur: *const bindings::ib_send_wr,
    started: bool,
    ud: bool,
    device: *mut bindings::ib_device,
    _call: PhantomData<(&'a bindings::ib_send_wr, &'a A, &'a M)>,
}

impl<'a, A, M> SendWrChain<'a, A, M> {
    /// The chain starting at `wr`, posted to a UD/GSI QP if `ud` of
    /// `device`.
    ///
    /// # Safety
    ///
    /// `wr` is null or the first of a valid chain of kernel send requests
    /// as described in the type invariant, valid for `'a` (ib_core's and
    /// the consumer's contract for `ib_post_send`).
    pub(crate) unsafe fn from_raw(wr: *const bindings::ib_send_wr, ud: bool, device: *mut bindings::ib_device) -> Self {
        // INVARIANT: per the requirements; nothing yielded yet.
        Self { cur: wr, started: false, ud, device, _call: PhantomData }
    }

    /// Whether the chain has no request (a user QP's doorbell).
    pub(crate) fn is_empty(&self) -> bool {
        !self.started && self.cur.is_null()
    }

    /// The verb's return value for `result`; stores the request the walk
    /// stopped at (the first not posted) in `bad_wr` on failure.
    ///
    /// # Safety
    ///
    /// `bad_wr` is null or writable (ib_core's contract).
    pub(crate) unsafe fn finish(self, result: Result, bad_wr: *mut *const bindings::ib_send_wr) -> c_int {
        // SAFETY: forwarded.
        unsafe { finish_post(result, bad_wr, self.cur) }
    }

    fn ext(&self, w: &'a bindings::ib_send_wr) -> SendExt<'a, A, M> {
        let wp = core::ptr::from_ref(w);
        match w.opcode {
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE
            | bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM
            | bindings::ib_wr_opcode_IB_WR_RDMA_READ => {
                // SAFETY: per the type invariant the request is the `wr`
                // member (first) of an `ib_rdma_wr`.
                let r = unsafe { &*wp.cast::<bindings::ib_rdma_wr>() };
                SendExt::Rdma { remote_addr: r.remote_addr, rkey: r.rkey }
            }
            bindings::ib_wr_opcode_IB_WR_REG_MR => {
                // SAFETY: as above, of an `ib_reg_wr`.
                let r = unsafe { &*wp.cast::<bindings::ib_reg_wr>() };
                match core::ptr::NonNull::new(r.mr) {
                    // SAFETY: a live MR (type invariant); its `device` is
                    // set at allocation and never changes.
                    Some(mr) if unsafe { (*mr.as_ptr()).device } == self.device => {
                        // SAFETY: an MR of this device is one of this
                        // driver's with part `M`, live and not mapped
                        // concurrently for `'a` (type invariant).
                        let mr = unsafe { MrRef::from_raw(mr) };
                        SendExt::Reg { mr, key: r.key, access: r.access }
                    }
                    // Another device's MR (or none): no registration.
                    _ => SendExt::None,
                }
            }
            _ if self.ud => {
                // SAFETY: as above, of an `ib_ud_wr`; its AH is null or a
                // live AH of this device with driver part `A`.
                let (u, ah) = unsafe {
                    let u = &*wp.cast::<bindings::ib_ud_wr>();
                    (u, crate::ib::ah::get::<A>(u.ah))
                };
                SendExt::Ud { ah, remote_qpn: u.remote_qpn, remote_qkey: u.remote_qkey }
            }
            bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP | bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => {
                // SAFETY: as above, of an `ib_atomic_wr`.
                let a = unsafe { &*wp.cast::<bindings::ib_atomic_wr>() };
                SendExt::Atomic { remote_addr: a.remote_addr, rkey: a.rkey, compare_add: a.compare_add, swap: a.swap }
            }
            _ => SendExt::None,
        }
    }
}

impl<'a, A, M> Iterator for SendWrChain<'a, A, M> {
    /// A request, or `EINVAL` for a malformed one (the walk stops there).
    type Item = Result<SendWr<'a, A, M>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.started && !self.cur.is_null() {
            // SAFETY: a request of the chain (type invariant).
            self.cur = unsafe { (*self.cur).next };
        }
        self.started = true;
        // SAFETY: null or a request of the chain, valid for `'a`.
        let w: &'a bindings::ib_send_wr = unsafe { self.cur.as_ref() }?;
        let sges = match usize::try_from(w.num_sge) {
            Ok(0) => &[][..],
            Ok(_) if w.sg_list.is_null() => return Some(Err(EINVAL)),
            // SAFETY: the request has `num_sge` SGEs at `sg_list`.
            Ok(n) => unsafe { core::slice::from_raw_parts(w.sg_list, n) },
            Err(_) => return Some(Err(EINVAL)),
        };
        // SAFETY: plain-data unions: `wr_id`/`wr_cqe` and `imm_data`/
        // `invalidate_rkey` share their bits.
        let (wr_id, imm_or_inv) = unsafe { (w.__bindgen_anon_1.wr_id, w.ex.imm_data) };
        Some(Ok(SendWr { wr_id, opcode: w.opcode, send_flags: w.send_flags as u32, imm_or_inv, sges, ext: self.ext(w) }))
    }
}
