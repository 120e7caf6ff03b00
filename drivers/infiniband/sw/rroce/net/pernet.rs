// SPDX-License-Identifier: GPL-2.0
//! A pernet subsystem with an exit hook (`register_pernet_subsys`).
//!
//! C header: [`include/net/net_namespace.h`](srctree/include/net/net_namespace.h)

use core::pin::Pin;
use kernel::bindings;
use kernel::prelude::*;
use kernel::types::Opaque;

/// What a namespace's end is reported to.
pub(crate) trait NetExit: 'static {
    /// `net` is being dismantled (identity only; process context).
    fn exit(net: *mut bindings::net);
}

/// A registered pernet subsystem, unregistered on drop (which runs the
/// exit hook for every namespace still alive).
///
/// # Invariants
///
/// `ops` is registered with exit hook [`exit_cb::<H>`] for some `H`.
pub(crate) struct Pernet {
    ops: Pin<KBox<Opaque<bindings::pernet_operations>>>,
}

// SAFETY: the pernet core synchronises registration and calls.
unsafe impl Send for Pernet {}
// SAFETY: no method works through `&self`.
unsafe impl Sync for Pernet {}

impl Pernet {
    /// Registers `H`'s exit hook.
    pub(crate) fn register<H: NetExit>() -> Result<Self> {
        let ops = KBox::pin(
            Opaque::new(bindings::pernet_operations { exit: Some(exit_cb::<H>), ..Default::default() }),
            GFP_KERNEL,
        )?;
        // SAFETY: `ops` is pinned in its box until unregistered in `drop`.
        kernel::error::to_result(unsafe { bindings::register_pernet_subsys(ops.get()) })?;
        // INVARIANT: registered just above.
        Ok(Self { ops })
    }
}

impl Drop for Pernet {
    fn drop(&mut self) {
        // SAFETY: registered (type invariant).
        unsafe { bindings::unregister_pernet_subsys(self.ops.get()) };
    }
}

/// The exit hook of [`Pernet::register::<H>`].
///
/// # Safety
///
/// Called by the netns core for a namespace being dismantled.
unsafe extern "C" fn exit_cb<H: NetExit>(net: *mut bindings::net) {
    H::exit(net);
}
