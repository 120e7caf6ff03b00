// SPDX-License-Identifier: GPL-2.0
//! An `rdma link add NAME type TYPE netdev NDEV` link type
//! (`rdma_link_register`).
//!
//! C header: [`include/rdma/rdma_netlink.h`](srctree/include/rdma/rdma_netlink.h)

use core::pin::Pin;
use kernel::bindings;
use kernel::error::from_result;
use kernel::ffi::{c_char, c_int};
use kernel::prelude::*;
use kernel::types::Opaque;

use crate::net::netdev::NetDevRef;

/// What `rdma link add` of the type calls.
pub(crate) trait NewLink: 'static {
    /// Creates device `name` on `ndev` (process context, may sleep).
    fn newlink(name: &CStr, ndev: NetDevRef) -> Result;
}

/// A registered link type, unregistered on drop.
///
/// # Invariants
///
/// `ops` is registered with `newlink` [`newlink_cb::<H>`] for some `H` and
/// a `'static` type name.
pub(crate) struct LinkOps {
    ops: Pin<KBox<Opaque<bindings::rdma_link_ops>>>,
}

// SAFETY: nldev synchronises registration and calls.
unsafe impl Send for LinkOps {}
// SAFETY: no method works through `&self`.
unsafe impl Sync for LinkOps {}

impl LinkOps {
    /// Registers link type `name` handled by `H`.
    pub(crate) fn register<H: NewLink>(name: &'static CStr) -> Result<Self> {
        let ops = KBox::pin(
            Opaque::new(bindings::rdma_link_ops {
                type_: name.as_char_ptr(),
                newlink: Some(newlink_cb::<H>),
                ..Default::default()
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: `ops` is pinned in its box; its list head is initialised
        // so that a refused registration (a type registered twice: nldev
        // only warns) is seen, and `drop` never unlinks an unlinked entry.
        let registered = unsafe {
            let list = core::ptr::addr_of_mut!((*ops.get()).list);
            crate::ffi::rroce_list_init(list);
            bindings::rdma_link_register(ops.get());
            !crate::ffi::rroce_list_empty(list)
        };
        if !registered {
            return Err(EEXIST);
        }
        // INVARIANT: registered just above.
        Ok(Self { ops })
    }
}

impl Drop for LinkOps {
    fn drop(&mut self) {
        // SAFETY: registered (type invariant); waits for running `newlink`s.
        unsafe { bindings::rdma_link_unregister(self.ops.get()) };
    }
}

/// The `newlink` of [`LinkOps::register::<H>`].
///
/// # Safety
///
/// Called by nldev with a NUL-terminated name and a netdev it holds a
/// reference on for the call.
unsafe extern "C" fn newlink_cb<H: NewLink>(name: *const c_char, ndev: *mut bindings::net_device) -> c_int {
    from_result(|| {
        let ndev = core::ptr::NonNull::new(ndev).ok_or(EINVAL)?;
        if name.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: NUL-terminated and valid for the call (the contract).
        let name = unsafe { CStr::from_char_ptr(name) };
        // SAFETY: nldev holds a reference on `ndev` for the call.
        let ndev = unsafe { NetDevRef::hold(ndev) };
        H::newlink(name, ndev)?;
        Ok(0)
    })
}
