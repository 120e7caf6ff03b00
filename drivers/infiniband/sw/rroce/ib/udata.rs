// SPDX-License-Identifier: GPL-2.0
//! A verb's user-space command and response buffers (`struct ib_udata`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use core::marker::PhantomData;
use core::ptr::NonNull;
use kernel::bindings;
use kernel::error::to_result;
use kernel::prelude::*;

use crate::ffi;
use crate::ib::ucontext::UctxRef;

/// The `udata` of a verb called from user space.
///
/// # Invariants
///
/// `self.0` is the valid `ib_udata` of the verb call that lasts `'a`.
#[derive(Clone, Copy)]
pub(crate) struct UData<'a>(NonNull<bindings::ib_udata>, PhantomData<&'a bindings::ib_udata>);

impl<'a> UData<'a> {
    /// The `udata` of a verb: `None` for a kernel caller (null).
    ///
    /// # Safety
    ///
    /// `udata` is null or the valid `ib_udata` of a call that lasts `'a`.
    pub(crate) unsafe fn from_raw(udata: *mut bindings::ib_udata) -> Option<Self> {
        // INVARIANT: per the requirements.
        NonNull::new(udata).map(|p| Self(p, PhantomData))
    }

    /// The user context of the call.  Objects created in the call may
    /// keep it: ib_core destroys them before the context.
    pub(crate) fn ucontext(&self) -> Option<UctxRef> {
        // SAFETY: a user call's `udata` is valid (type invariant); the
        // context it names is live for the call and outlives the objects
        // created in it.
        unsafe { UctxRef::from_raw(ffi::rroce_udata_ucontext(self.0.as_ptr())) }
    }

    /// Whether user space passed neither a command nor a response buffer.
    pub(crate) fn is_empty(&self) -> bool {
        // SAFETY: valid for the call (type invariant).
        let u = unsafe { &*self.0.as_ptr() };
        u.inlen == 0 && u.outlen == 0
    }

    /// Copies the command into `dst`; `EINVAL` if user space sent fewer
    /// bytes.
    pub(crate) fn read(&self, dst: &mut [u8]) -> Result {
        // SAFETY: valid for the call (type invariant).
        let inlen = unsafe { (*self.0.as_ptr()).inlen };
        if inlen < dst.len() {
            return Err(EINVAL);
        }
        // SAFETY: `dst` is writable for its length; `udata` is valid.
        to_result(unsafe { ffi::rroce_ib_copy_from_udata(dst.as_mut_ptr().cast(), self.0.as_ptr(), dst.len()) })
    }

    /// Copies `src` to the calling process's memory at `addr` (for a verb
    /// without a response buffer, whose command names where its answer
    /// goes: `modify_srq`); `EFAULT` if that memory is not writable.
    pub(crate) fn write_at(&self, addr: u64, src: &[u8]) -> Result {
        let addr = usize::try_from(addr).map_err(|_| EFAULT)?;
        kernel::uaccess::UserSlice::new(addr, src.len()).writer().write_slice(src)
    }

    /// Copies a response to user space, truncated to what it asked for.
    pub(crate) fn write(&self, src: &[u8]) -> Result {
        // SAFETY: valid for the call (type invariant).
        let outlen = unsafe { (*self.0.as_ptr()).outlen };
        let len = src.len().min(outlen);
        // SAFETY: `src` holds `len` readable bytes; `udata` is valid.
        to_result(unsafe { ffi::rroce_ib_copy_to_udata(self.0.as_ptr(), src.as_ptr().cast(), len) })
    }
}
