// SPDX-License-Identifier: GPL-2.0
//! Owned socket buffers holding one IP datagram, and a FIFO list of them.
//!
//! C header: [`include/linux/skbuff.h`](srctree/include/linux/skbuff.h)
//!
//! rroce builds every packet in the linear area of a fresh skb and makes
//! every received skb linear before parsing it, so an [`SkBuff`] is always
//! linear: its datagram (from the network header to the tail) is one byte
//! slice.  Received skbs may share their data with clones (packet taps),
//! so the datagram is only readable once the skb exists; a transmit skb is
//! written by the closure that builds it, before anyone else can see it.

use core::ptr::NonNull;
use kernel::bindings;

use crate::ffi;
use crate::net::netdev::NetDevRef;

/// An owned, linear `struct sk_buff`.
///
/// # Invariants
///
/// `self.0` points to an skb owned by this object (freed on drop unless
/// given away with [`SkBuff::into_raw`]); its data is linear and its
/// network header set.
pub(crate) struct SkBuff(NonNull<bindings::sk_buff>);

// SAFETY: an owned skb may be freed or handed on from any context.
unsafe impl Send for SkBuff {}
// SAFETY: shared references only read the datagram bytes.
unsafe impl Sync for SkBuff {}

impl SkBuff {
    /// Allocates (GFP_ATOMIC) an skb for a datagram of `len` bytes to be
    /// sent on `ndev`, with the link layer's headroom in front, and lets
    /// `build` write the datagram (zeroed first).  `None` if the allocation
    /// fails or `build` returns `false` (the skb is then freed).
    pub(crate) fn build_tx(ndev: &NetDevRef, len: u32, build: impl FnOnce(&mut [u8]) -> bool) -> Option<Self> {
        let mut data: *mut u8 = core::ptr::null_mut();
        // SAFETY: `ndev` is a held device.
        let skb = NonNull::new(unsafe { ffi::rroce_tx_alloc(ndev.as_ptr(), len, &mut data) })?;
        // INVARIANT: `rroce_tx_alloc` made a linear skb and set its network
        // header; it is ours.
        let s = Self(skb);
        if data.is_null() {
            return None;
        }
        // SAFETY: `data` is the `len` bytes from the network header to the
        // tail of an skb nobody else can see yet, so they are exclusively
        // ours; they are initialised before the slice is formed.
        let buf = unsafe {
            core::ptr::write_bytes(data, 0, len as usize);
            core::slice::from_raw_parts_mut(data, len as usize)
        };
        build(buf).then_some(s)
    }

    /// Takes ownership of a received skb and makes it linear.  `None` (the
    /// skb freed) if linearising fails.
    ///
    /// # Safety
    ///
    /// `skb` must be a valid skb owned by the caller, its network header
    /// set (as it is on the receive path above IP).
    pub(crate) unsafe fn from_rx(skb: NonNull<bindings::sk_buff>) -> Option<Self> {
        // INVARIANT: ours per the requirements; linear once the call below
        // succeeded (dropped, so freed, if not).
        let s = Self(skb);
        // SAFETY: the skb is valid and ours.
        (unsafe { ffi::rroce_skb_linearize(skb.as_ptr()) } == 0).then_some(s)
    }

    /// The datagram: IP header, UDP header, RoCE packet (network header to
    /// tail).
    pub(crate) fn datagram(&self) -> &[u8] {
        let skb = self.0.as_ptr();
        // SAFETY: the skb is valid and linear by the type invariant, so the
        // bytes from its network header to its tail are one readable area
        // that lives as long as the skb; nothing writes it any more.
        unsafe {
            let start = ffi::rroce_skb_network_header(skb);
            let end = ffi::rroce_skb_tail_pointer(skb);
            let len = (end as usize).saturating_sub(start as usize);
            if start.is_null() {
                return &[];
            }
            core::slice::from_raw_parts(start, len)
        }
    }

    /// The device a received skb arrived on (`None` for a transmit skb),
    /// alive while the skb is.
    pub(crate) fn in_dev(&self) -> Option<crate::net::netdev::NetDevView<'_>> {
        // SAFETY: the skb is valid by the type invariant; the ingress
        // device of a received skb outlives it (the receive path holds it).
        unsafe { crate::net::netdev::NetDevView::from_raw(ffi::rroce_skb_dev(self.0.as_ptr())) }
    }

    /// Gives up ownership (to a C function that consumes the skb).
    pub(crate) fn into_raw(self) -> *mut bindings::sk_buff {
        let p = self.0.as_ptr();
        core::mem::forget(self);
        p
    }

    /// The skb, still owned by `self` (for this layer's `impl`s).
    pub(super) fn as_raw(&self) -> *mut bindings::sk_buff {
        self.0.as_ptr()
    }

    /// The skb's list link.
    fn next(&self) -> *mut *mut bindings::sk_buff {
        // SAFETY: the skb is valid; this only computes a field address.
        unsafe { core::ptr::addr_of_mut!((*self.0.as_ptr()).__bindgen_anon_1.__bindgen_anon_1.next) }
    }
}

impl Drop for SkBuff {
    fn drop(&mut self) {
        // SAFETY: by the type invariant we own the skb.
        unsafe { ffi::rroce_kfree_skb(self.0.as_ptr()) };
    }
}

/// A FIFO of owned skbs linked through their own `next` pointers (no
/// allocation per entry): an `sk_buff_head` without its lock, for use
/// inside one of ours.
///
/// # Invariants
///
/// `head` is null and `len` 0, or `head` starts a chain of `len` skbs
/// linked by `next`, each owned by the list and satisfying [`SkBuff`]'s
/// invariants, the last one `tail` with a null `next`.
pub(crate) struct SkbList {
    head: *mut bindings::sk_buff,
    tail: *mut bindings::sk_buff,
    len: u32,
}

// SAFETY: the list owns its skbs, which may move between contexts.
unsafe impl Send for SkbList {}

impl SkbList {
    /// An empty list.
    pub(crate) const fn new() -> Self {
        Self { head: core::ptr::null_mut(), tail: core::ptr::null_mut(), len: 0 }
    }

    /// Number of skbs queued.
    pub(crate) fn len(&self) -> u32 {
        self.len
    }

    /// Whether the list is empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.head.is_null()
    }

    /// Appends `skb`.
    pub(crate) fn push_back(&mut self, skb: SkBuff) {
        // SAFETY: the skb is ours (and on no other list); a null link ends
        // the chain.
        unsafe { *skb.next() = core::ptr::null_mut() };
        let raw = skb.into_raw();
        if self.head.is_null() {
            self.head = raw;
        } else {
            // SAFETY: by the invariant `tail` is the last skb of the chain,
            // owned by the list.
            unsafe { (*self.tail).__bindgen_anon_1.__bindgen_anon_1.next = raw };
        }
        // INVARIANT: `raw` (owned, linear) is linked at the end.
        self.tail = raw;
        self.len = self.len.saturating_add(1);
    }

    /// Removes and returns the first skb.
    pub(crate) fn pop_front(&mut self) -> Option<SkBuff> {
        // INVARIANT: the first skb of the chain leaves the list with its
        // ownership.
        let first = SkBuff(NonNull::new(self.head)?);
        // SAFETY: we own the skb and its link.
        self.head = unsafe { core::ptr::replace(first.next(), core::ptr::null_mut()) };
        if self.head.is_null() {
            self.tail = core::ptr::null_mut();
        }
        self.len = self.len.saturating_sub(1);
        Some(first)
    }
}

impl Drop for SkbList {
    fn drop(&mut self) {
        while self.pop_front().is_some() {}
    }
}
