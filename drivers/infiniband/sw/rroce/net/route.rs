// SPDX-License-Identifier: GPL-2.0
//! A route cache for the packets of one flow (`struct dst_cache`), and
//! transmission of a finished datagram through it.
//!
//! C header: [`include/net/dst_cache.h`](srctree/include/net/dst_cache.h)

use core::ptr::NonNull;
use kernel::bindings;

use crate::ffi;
use crate::net::netdev::NetDevRef;
use crate::net::skb::SkBuff;

/// An owned per-CPU route cache.
///
/// # Invariants
///
/// `self.0` comes from `rroce_dst_cache_new` and is freed on drop.
pub(crate) struct DstCache(NonNull<bindings::dst_cache>);

// SAFETY: the cache is per-CPU and used with bottom halves disabled
// (`rroce_tx_send` disables them around its use, whatever its caller did);
// it may be freed from any process context.
unsafe impl Send for DstCache {}
// SAFETY: lookups and fills touch this CPU's slot only, with bottom halves
// disabled; `reset` is a single timestamp store.
unsafe impl Sync for DstCache {}

impl DstCache {
    /// A new, empty cache; `None` without memory (then routes are looked up
    /// for every packet).
    pub(crate) fn new() -> Option<Self> {
        // SAFETY: a plain allocation.
        // INVARIANT: freed on drop.
        NonNull::new(unsafe { ffi::rroce_dst_cache_new() }).map(Self)
    }

    /// Forgets the cached routes (the flow's addresses changed).
    pub(crate) fn reset(&self) {
        // SAFETY: live (type invariant); `dst_cache_reset` only stores the
        // reset time, which lookups compare against.
        unsafe { ffi::rroce_dst_cache_reset(self.0.as_ptr()) };
    }
}

impl Drop for DstCache {
    fn drop(&mut self) {
        // SAFETY: allocated in `new`, freed once here.
        unsafe { ffi::rroce_dst_cache_free(self.0.as_ptr()) };
    }
}

impl SkBuff {
    /// Routes the datagram (IP and UDP headers included) out of `ndev`'s
    /// namespace, through `cache` if there is one, and transmits it.
    /// Whether it was handed to the IP stack.  Bottom halves may be
    /// disabled (the cache is used with them disabled in any case);
    /// interrupts must not be.
    pub(crate) fn transmit(self, ndev: &NetDevRef, ipv6: bool, cache: Option<&DstCache>) -> bool {
        let cache = cache.map_or(core::ptr::null_mut(), |c| c.0.as_ptr());
        // SAFETY: a complete datagram in an skb we own, which the call
        // consumes; `ndev` is held; `cache` is null or live.
        unsafe { ffi::rroce_tx_send(ndev.as_ptr(), self.into_raw(), ipv6, cache) == 0 }
    }
}
