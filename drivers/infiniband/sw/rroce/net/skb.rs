// SPDX-License-Identifier: GPL-2.0
//! Owned socket buffers holding one IP datagram, and a FIFO list of them.
//!
//! C header: [`include/linux/skbuff.h`](srctree/include/linux/skbuff.h)
//!
//! rroce builds every packet in the linear area of a fresh skb, so a
//! transmit skb's datagram (from the network header to the tail) is one
//! byte slice, written before anyone else can see it: its payload copied
//! straight in through a [`TxFill`], then the rest by the closure that
//! builds it.  A received skb is read where it lies: its first bytes in the
//! linear area and, as virtio-net and other NAPI drivers deliver most
//! packets, the rest in one page fragment ([`SkBuff::prepare_rx`]); an skb
//! of any other shape is made linear first.  Received skbs may share their
//! data with clones (packet taps), which only read it.

use core::ptr::NonNull;
use kernel::bindings;

use crate::ffi;
use crate::net::netdev::NetDevRef;

/// An owned `struct sk_buff`.
///
/// # Invariants
///
/// `self.0` points to an skb owned by this object (freed on drop unless
/// given away with [`SkBuff::into_raw`]); its network header is set and
/// lies in its linear area.  One built by [`SkBuff::build_tx`] is linear.
pub(crate) struct SkBuff(NonNull<bindings::sk_buff>);

// SAFETY: an owned skb may be freed or handed on from any context.
unsafe impl Send for SkBuff {}
// SAFETY: shared references only read the datagram bytes.
unsafe impl Sync for SkBuff {}

impl SkBuff {
    /// Allocates (GFP_ATOMIC) an skb for a datagram of `len` bytes to be
    /// sent on `ndev`, with the link layer's headroom in front.  First
    /// `fill` appends the bytes of `payload` (a range of the datagram)
    /// through a [`TxFill`], straight into the skb; then `build` gets the
    /// whole datagram to write the rest (headers, pad, checksums).  The
    /// payload is not zeroed first (every other byte is, and payload bytes
    /// `fill` leaves unwritten too).  `None` if the allocation fails, the
    /// range is not inside the datagram, or `fill` or `build` returns
    /// `false` (the skb is then freed).
    pub(crate) fn build_tx(
        ndev: &NetDevRef,
        len: u32,
        payload: core::ops::Range<usize>,
        fill: impl FnOnce(&mut TxFill<'_>) -> bool,
        build: impl FnOnce(&mut [u8]) -> bool,
    ) -> Option<Self> {
        let total = len as usize;
        if payload.start > payload.end || payload.end > total {
            return None;
        }
        let mut data: *mut u8 = core::ptr::null_mut();
        // SAFETY: `ndev` is a held device.
        let skb = NonNull::new(unsafe { ffi::rroce_tx_alloc(ndev.as_ptr(), len, &mut data) })?;
        // INVARIANT: `rroce_tx_alloc` made a linear skb and set its network
        // header; it is ours.
        let s = Self(skb);
        let data = NonNull::new(data)?;
        // SAFETY: `payload.start <= len`: inside the area or at its end.
        let at = NonNull::new(unsafe { data.as_ptr().add(payload.start) })?;
        // SAFETY: `data` is the `len` bytes from the network header to the
        // tail of an skb nobody else can see yet, so they are exclusively
        // ours until `s` is dropped or handed on, after this function's
        // writes; `payload` lies inside them (checked above).
        let mut f = unsafe { TxFill::new(at, payload.len()) };
        if !fill(&mut f) {
            return None;
        }
        let filled = payload.start + f.filled;
        // SAFETY: as above; the bytes outside `payload.start..filled` are
        // zeroed here, those inside were written through `f` (its
        // invariant), so the whole area is initialised before the slice is
        // formed, and it is the only reference to it.
        let buf = unsafe {
            core::ptr::write_bytes(data.as_ptr(), 0, payload.start);
            core::ptr::write_bytes(data.as_ptr().add(filled), 0, total - filled);
            core::slice::from_raw_parts_mut(data.as_ptr(), total)
        };
        build(buf).then_some(s)
    }

    /// Takes ownership of a received skb, as it is (see
    /// [`SkBuff::prepare_rx`]).
    ///
    /// # Safety
    ///
    /// `skb` must be a valid skb owned by the caller, its network header
    /// set (as it is on the receive path above IP).
    pub(crate) unsafe fn from_rx(skb: NonNull<bindings::sk_buff>) -> Self {
        // INVARIANT: ours per the requirements; the IP layer has made the
        // network header linear.
        Self(skb)
    }

    /// The datagram's bytes in the linear area, from the network header to
    /// the tail: the whole datagram for an skb built by
    /// [`SkBuff::build_tx`].
    pub(crate) fn datagram(&self) -> &[u8] {
        let skb = self.0.as_ptr();
        // SAFETY: the skb is valid and ours by the type invariant, its
        // network header inside the linear area, so the bytes from there to
        // the tail are one readable area that lives as long as the skb (and
        // is not moved while `self` is borrowed: only `&mut self` methods
        // pull or linearise); a transmit skb is no longer written once
        // built, and the clones of a received one only read.
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

    /// Readies a received datagram (network header to the end) to be read
    /// where it lies, in at most two pieces ([`SkBuff::pieces`]): `hdrs`
    /// tells, from the bytes in the linear area, how many first bytes must
    /// be there (`Ok(n)`), or that it needs `n` bytes to tell (`Err(n)`);
    /// either way they are pulled into the linear area (at most four
    /// pulls).  If the
    /// linear area then holds exactly those `n` bytes and the rest is one
    /// page fragment the skb alone may write (not spliced from user space
    /// or the page cache, not zero-copy, mapped in the kernel), the skb
    /// stays so; otherwise it is made linear.  `Some(true)` if that took a
    /// copy (the skb was not linear), `None` if the copy failed (no
    /// memory): drop the skb.
    pub(crate) fn prepare_rx(&mut self, hdrs: impl Fn(&[u8]) -> Result<usize, usize>) -> Option<bool> {
        if self.is_linear() {
            return Some(false);
        }
        let mut want = None;
        for _ in 0..4 {
            let have = self.datagram().len();
            let (n, known) = match hdrs(self.datagram()) {
                Ok(n) => (n, true),
                Err(n) => (n, false),
            };
            if n > have && !self.pull(n) {
                // Shorter than its headers: copied whole, and refused.
                break;
            }
            if known {
                want = Some(n);
                break;
            }
            if n <= have {
                break;
            }
        }
        if want.is_some_and(|n| n == self.datagram().len()) && self.lone_frag().is_some() {
            return Some(false);
        }
        self.linearize().then_some(true)
    }

    /// The whole datagram: its bytes in the linear area and those of its
    /// one page fragment (empty if linear); `None` if the skb has another
    /// shape (see [`SkBuff::prepare_rx`]).
    pub(crate) fn pieces(&self) -> Option<(&[u8], &[u8])> {
        if self.is_linear() {
            return Some((self.datagram(), &[]));
        }
        self.lone_frag().map(|tail| (self.datagram(), tail))
    }

    /// Whether all of the skb's data is in its linear area.
    fn is_linear(&self) -> bool {
        // SAFETY: `data_len` is a plain field of the valid skb.
        unsafe { (*self.0.as_ptr()).data_len == 0 }
    }

    /// Makes the first `n` bytes of the datagram linear (`pskb_may_pull`);
    /// `false` if the datagram is shorter or memory ran out.
    fn pull(&mut self, n: usize) -> bool {
        let skb = self.0.as_ptr();
        // SAFETY: the skb is valid and ours; `data` and the network header
        // are pointers into its linear area, only compared as addresses.
        let (data, nh) = unsafe { ((*skb).data as usize, ffi::rroce_skb_network_header(skb) as usize) };
        // Bytes needed from `data` on: `n` less the network header's
        // distance before `data`.
        let Some(len) = n.checked_add(nh).and_then(|x| x.checked_sub(data)) else { return true };
        let Ok(len) = u32::try_from(len) else { return false };
        // SAFETY: the skb is valid and ours, exclusively through `&mut
        // self`: pulling may reallocate its head, which no borrow of `self`
        // outlives.
        unsafe { ffi::rroce_pskb_may_pull(skb, len) }
    }

    /// Makes the skb linear; `false` if memory ran out.
    fn linearize(&mut self) -> bool {
        // SAFETY: the skb is valid and ours, exclusively through `&mut
        // self` (the head may be reallocated).
        unsafe { ffi::rroce_skb_linearize(self.0.as_ptr()) == 0 }
    }

    /// The bytes of the skb's only page fragment if everything after the
    /// linear area is that one fragment, which no one else may write and
    /// which is mapped in the kernel; `None` otherwise (or if the skb is
    /// linear).
    fn lone_frag(&self) -> Option<&[u8]> {
        let skb = self.0.as_ptr();
        // SAFETY: the skb is valid and ours; its shared info follows its
        // head, readable while it lives.
        let shinfo = unsafe { &*ffi::rroce_skb_shinfo(skb) };
        let not_ours = (bindings::SKBFL_SHARED_FRAG | bindings::SKBFL_ZEROCOPY_ENABLE) as u8;
        if shinfo.nr_frags != 1 || !shinfo.frag_list.is_null() || shinfo.flags & not_ours != 0 {
            return None;
        }
        let frag = shinfo.frags.first()?;
        // SAFETY: `data_len` is a plain field of the valid skb.
        let data_len = unsafe { (*skb).data_len };
        if frag.len != data_len || data_len == 0 {
            return None;
        }
        // SAFETY: `frag` is the skb's valid fragment descriptor.
        let addr = unsafe { ffi::rroce_skb_frag_address_safe(frag) }.cast::<u8>();
        if addr.is_null() {
            return None;
        }
        // SAFETY: the fragment's `len` bytes at its kernel address are
        // one mapped area (a page, or part of a compound page, of the
        // direct map) held by the skb while it lives.  It is neither
        // spliced from user space or the page cache (SKBFL_SHARED_FRAG)
        // nor a zero-copy user buffer (SKBFL_ZEROCOPY_ENABLE), so nothing
        // writes it: the driver that filled it handed it over with the skb,
        // and clones only read.  Nothing frees or moves it while `self` is
        // borrowed.
        Some(unsafe { core::slice::from_raw_parts(addr, data_len as usize) })
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

/// The payload of a transmit skb being built ([`SkBuff::build_tx`]): an
/// area not yet written, filled from its start by appending, so that no
/// byte is read or zeroed before it is written.
///
/// # Invariants
///
/// `ptr` is valid for writes of `len` bytes, exclusively ours for `'a`;
/// its first `filled <= len` bytes are initialised.
pub(crate) struct TxFill<'a> {
    ptr: NonNull<u8>,
    len: usize,
    filled: usize,
    _area: core::marker::PhantomData<&'a mut [u8]>,
}

impl TxFill<'_> {
    /// # Safety
    ///
    /// `ptr` must be valid for writes of `len` bytes and nothing else may
    /// access them while the result lives.
    unsafe fn new(ptr: NonNull<u8>, len: usize) -> Self {
        // INVARIANT: per the requirements; nothing is initialised yet.
        Self { ptr, len, filled: 0, _area: core::marker::PhantomData }
    }

    /// How many bytes were appended.
    pub(crate) fn filled(&self) -> usize {
        self.filled
    }

    /// How many bytes are still to be appended.
    pub(crate) fn remaining(&self) -> usize {
        self.len - self.filled
    }

    /// Appends `src`; `false` (nothing written) if it does not fit.
    pub(crate) fn put(&mut self, src: &[u8]) -> bool {
        // SAFETY: `put_with` writes exactly `src.len()` bytes at the
        // pointer, from `src`, which cannot overlap the area (it is ours
        // alone).
        unsafe { self.put_with(src.len(), |dst| core::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len())) }
    }

    /// Appends `n` bytes that `write` stores at the pointer it is given;
    /// `false` (`write` not called) if they do not fit.
    ///
    /// # Safety
    ///
    /// `write` must initialise all `n` bytes at its argument and write
    /// nothing else.
    pub(crate) unsafe fn put_with(&mut self, n: usize, write: impl FnOnce(*mut u8)) -> bool {
        if n > self.len - self.filled {
            return false;
        }
        // `filled + n <= len`: inside the area (type invariant).
        write(self.ptr.as_ptr().wrapping_add(self.filled));
        // INVARIANT: `write` initialised the next `n` bytes.
        self.filled += n;
        true
    }
}
