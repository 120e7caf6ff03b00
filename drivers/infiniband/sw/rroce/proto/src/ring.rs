// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Single-producer/single-consumer rings shared between `rroce.ko` and the
//! provider through `mmap`.
//!
//! # Memory layout
//!
//! A ring is one virtually contiguous, zero-filled buffer that the kernel
//! allocates (`vmalloc_user`) and the provider maps read/write:
//!
//! ```text
//! offset 0                 u32 producer index   (cache line 0)
//! offset 4                 u32 producer flags   (cache line 0, rest reserved)
//! offset 64                u32 consumer index   (cache line 1)
//! offset 68                u32 consumer flags   (cache line 1, rest reserved)
//! offset 128 + i*entry_size  entry i, 0 <= i < entries
//! ... zero padding up to a multiple of 4096 bytes (RingLayout::bytes_total)
//! ```
//!
//! `entries` is a power of two, `entry_size` a multiple of 16 (the WQE and
//! CQE formats of `wqe` use multiples of 64, so no two entries share a
//! cache line).  The reserved bytes of the two header lines are zero and
//! are neither read nor written by this version.
//!
//! # Doorbell suppression
//!
//! The consumer flags word is written only by the consumer and is a hint
//! for the producer, never read by the consumer.  [`CONS_POLLING`] set
//! means "I am busy with this ring and will look at it again without being
//! told" (for an SQ: the kernel has sends in flight whose ACKs or timer
//! will make it take new WQEs), so the producer may skip its doorbell
//! system call.  The race is closed Dekker-style: the producer publishes
//! `p`, issues a full fence and reads the flags; the consumer clears the
//! flag, issues a full fence and re-reads `p`.  At least one of them sees
//! the other's store, so a WQE is never left without a doorbell.  Zero
//! (what a consumer unaware of this word leaves there) means "ring".
//!
//! [`CONS_FLUSHING`] is the opposite hint, on an RQ ring: "the QP is in the
//! error state; I complete new entries with flush errors only when told",
//! so a producer that finds it set after publishing rings the doorbell,
//! which a receive queue otherwise never needs.  The consumer sets it,
//! issues a full fence and then flushes what the ring holds, so the same
//! Dekker argument covers it: an entry published while the flag was being
//! set is flushed by one side or the other, never left behind.
//!
//! # Closing
//!
//! The producer flags word is written only by the producer.  [`PROD_CLOSED`]
//! says that the producer has stopped for good: the kernel sets it on a CQ
//! ring when it destroys the CQ, which a process sees only when the CQ was
//! destroyed under it (its device was removed and ib_core cut it off).  The
//! producer release-stores the flag after its last producer index, so a
//! consumer that acquire-loads the flag and then finds the ring empty knows
//! that nothing more will come, and reports an error instead of polling an
//! empty ring forever.
//!
//! # Indices
//!
//! Both indices are free-running `u32` counters: they are never masked in
//! shared memory and wrap at 2^32.  Entry `n` lives in slot
//! `n & (entries - 1)`.  With `p` the producer and `c` the consumer index,
//! the ring holds `p - c (mod 2^32)` entries; it is empty when `p == c` and
//! full when `p - c == entries` (all `entries` slots are usable).  A fresh
//! ring starts with `p == c == start` (normally 0, see
//! [`RingLayout::init_header`]).
//!
//! # Who writes what
//!
//! | ring            | producer (owns `p`, writes entries) | consumer (owns `c`) |
//! |-----------------|-------------------------------------|---------------------|
//! | SQ, RQ, SRQ     | provider                            | kernel              |
//! | CQ              | kernel                              | provider            |
//!
//! Each side writes only its own index and only the entries it owns (the
//! producer owns slots `c .. c+entries`, minus the filled ones, i.e. the
//! free slots; the consumer owns the filled slots `c .. p`).  Each side
//! keeps its **own index in private memory** ([`Producer`], [`Consumer`]) and
//! only *publishes* it into the shared header; it never reads its own index
//! back, so scribbles by the other side on it are ignored.  The only shared
//! value a side reads is the peer's index, and that is validated on every
//! load:
//!
//! * a consumer accepts a producer index `p'` only if
//!   `p' in [last accepted p, c + entries]` (modulo 2^32), i.e. the producer
//!   neither moved backwards nor filled more than `entries` slots;
//! * a producer accepts a consumer index `c'` only if
//!   `c' in [last accepted c, last published p]`, i.e. the consumer neither
//!   moved backwards nor consumed entries that were never published.
//!
//! Anything else is [`RingError::InvalidIndex`]: the ring is broken for
//! good (every later call returns the same error) and the owner moves the
//! QP or CQ to the error state.  Nothing is ever read or written outside the
//! slot range whatever the peer does.
//!
//! # Memory ordering
//!
//! * Producer: write the entry bytes (plain / relaxed stores), then
//!   **release**-store `p`.  Consumer: **acquire**-load `p`, then read the
//!   entry bytes.  So a consumer that sees `p` also sees the entries below it.
//! * Consumer: read (copy out) the entry, then **release**-store `c`.
//!   Producer: **acquire**-load `c`, then overwrite the freed slots.  So the
//!   producer never overwrites an entry that is still being read.
//!
//! The kernel implements [`SharedRegion`] with `smp_load_acquire` /
//! `smp_store_release` on the indices and `memcpy`-style copies of entries;
//! the provider with C11/Rust atomics.  The consumer of an untrusted ring
//! (the kernel for SQ/RQ/SRQ) **copies each entry into private memory and
//! validates the copy** (`wqe::decode_send`, `wqe::decode_recv`); it never
//! keeps references into the shared buffer, never reads a field twice, and
//! never stores its own state into a shared entry.  Bytes that the user
//! changes while they are copied just make the copy garbage, which the
//! validation turns into an error completion.
//!
//! # Deferred release
//!
//! A [`Consumer`] distinguishes *consumed* entries (read, `head`) from
//! *released* ones (published `c`).  The kernel SQ consumer may copy a WQE
//! and release its slot only when the WQE completes, so user space can
//! never have more than `entries` send WQEs outstanding; the CQ consumer of
//! the provider releases right after copying (or at `end_poll`).
//!
//! # Resizing
//!
//! A CQ is resized by moving its ring: [`Producer::transfer`] copies the
//! entries between the (validated) consumer index and the producer index
//! into a fresh ring at the same free-running indices and hands back the
//! producer of the new ring.  The consumer then attaches to the new ring
//! ([`Consumer::attach`]) and picks up exactly where it stopped; the old
//! ring gets no new entries.

use core::cell::Cell;
use core::sync::atomic::{AtomicU32, Ordering};

/// Bytes before the first entry: two 64-byte index lines.
pub const HEADER_BYTES: u32 = 128;

/// Offset of the producer index in the ring header.
pub const PROD_OFFSET: usize = 0;

/// Offset of the producer's flags word in the ring header.
pub const PROD_FLAGS_OFFSET: usize = 4;
/// Producer flag: no entry will be produced any more (see the module
/// documentation).
pub const PROD_CLOSED: u32 = 1;

/// Offset of the consumer index in the ring header.
pub const CONS_OFFSET: usize = 64;
/// Offset of the consumer's flags word in the ring header.
pub const CONS_FLAGS_OFFSET: usize = 68;
/// Consumer flag: the consumer will look at the ring again by itself; the
/// producer need not ring the doorbell (see the module documentation).
pub const CONS_POLLING: u32 = 1;
/// Consumer flag on an RQ ring: the QP is in the error state; the producer
/// rings the doorbell after publishing so that its new entries are flushed
/// (see the module documentation).
pub const CONS_FLUSHING: u32 = 2;

/// Granularity of ring buffers (and of `mmap`).
pub const RING_ALIGN: u32 = 4096;

/// Entry sizes are multiples of this.
pub const ENTRY_ALIGN: u32 = 16;

/// Errors of ring set-up and ring operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingError {
    /// Zero entries requested, more than the limit after rounding up to a
    /// power of two, or (for [`RingLayout::from_raw`]) not a power of two.
    BadEntries,
    /// Entry size zero or not a multiple of [`ENTRY_ALIGN`].
    BadEntrySize,
    /// The ring would not fit in `u32` bytes, or a size given by the peer
    /// is smaller than the layout needs.
    TooLarge,
    /// The peer published an impossible index.  Sticky.
    InvalidIndex,
    /// The shared region refused an access (too small or misaligned).
    /// Sticky.
    Access,
    /// No free slot.
    Full,
    /// Nothing to consume (no entry was made available by a refresh/peek).
    Empty,
    /// A buffer longer than an entry, or a release of more entries than
    /// were consumed.
    BadLength,
}

/// Shared memory as seen by the safe core: never borrowed as `&[u8]`,
/// because the other side may change it at any time.
///
/// All methods are bounds-checked and fail (`None`/`false`) instead of
/// accessing outside `0..len()`.
pub trait SharedRegion {
    /// Length of the region in bytes.
    fn len(&self) -> usize;

    /// Whether the region is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Acquire-load of the `u32` at `off`; `None` if out of range or not
    /// 4-byte aligned.
    fn load_u32_acquire(&self, off: usize) -> Option<u32>;

    /// Release-store of `v` at `off`; `false` if out of range or not
    /// 4-byte aligned.
    fn store_u32_release(&self, off: usize, v: u32) -> bool;

    /// Copy `dst.len()` bytes starting at `off` out of the region.  The
    /// bytes may be torn by concurrent writers; callers validate the copy.
    fn read(&self, off: usize, dst: &mut [u8]) -> bool;

    /// Copy `src` into the region at `off`.
    fn write(&self, off: usize, src: &[u8]) -> bool;
}

/// Geometry of one ring.  Fields are private so the invariants
/// (power-of-two `entries`, aligned `entry_size`, total size fits `u32`)
/// always hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingLayout {
    entries: u32,
    entry_size: u32,
    bytes_total: u32,
}

impl RingLayout {
    /// Layout for at least `requested` entries of `entry_size` bytes.
    ///
    /// `requested` is rounded up to a power of two, which must be at most
    /// `max_entries`.  `requested == 0` is an error (callers that want an
    /// unused minimal ring ask for 1).
    pub fn new(requested: u32, entry_size: u32, max_entries: u32) -> Result<Self, RingError> {
        if requested == 0 {
            return Err(RingError::BadEntries);
        }
        let entries = requested
            .checked_next_power_of_two()
            .ok_or(RingError::BadEntries)?;
        if entries > max_entries {
            return Err(RingError::BadEntries);
        }
        Self::from_raw(entries, entry_size)
    }

    /// Layout with exactly `entries` (a power of two) entries.
    pub fn from_raw(entries: u32, entry_size: u32) -> Result<Self, RingError> {
        if !entries.is_power_of_two() {
            return Err(RingError::BadEntries);
        }
        if entry_size == 0 || entry_size & (ENTRY_ALIGN - 1) != 0 {
            return Err(RingError::BadEntrySize);
        }
        let align = u64::from(RING_ALIGN);
        let total = u64::from(entries)
            .checked_mul(u64::from(entry_size))
            .and_then(|d| d.checked_add(u64::from(HEADER_BYTES)))
            .and_then(|d| d.checked_add(align - 1))
            .map(|d| d & !(align - 1))
            .ok_or(RingError::TooLarge)?;
        let bytes_total = u32::try_from(total).map_err(|_| RingError::TooLarge)?;
        // The usize conversions below rely on this (always true on the 32-
        // and 64-bit targets Linux supports).
        if usize::try_from(bytes_total).is_err() {
            return Err(RingError::TooLarge);
        }
        Ok(Self {
            entries,
            entry_size,
            bytes_total,
        })
    }

    /// Validate the geometry the kernel returned in a create response
    /// (provider side): `ring_bytes` is what will be mapped and must cover
    /// the layout.
    pub fn from_resp(entries: u32, entry_size: u32, ring_bytes: u32) -> Result<Self, RingError> {
        let l = Self::from_raw(entries, entry_size)?;
        if ring_bytes < l.bytes_total {
            return Err(RingError::TooLarge);
        }
        Ok(l)
    }

    /// Number of slots (a power of two).
    pub const fn entries(&self) -> u32 {
        self.entries
    }

    /// Bytes per slot.
    pub const fn entry_size(&self) -> u32 {
        self.entry_size
    }

    /// `entries - 1`.
    pub const fn mask(&self) -> u32 {
        self.entries.wrapping_sub(1)
    }

    /// Total size of the buffer, header included, rounded up to 4096.
    pub const fn bytes_total(&self) -> usize {
        self.bytes_total as usize
    }

    /// [`Self::bytes_total`] as `u32` (for create responses).
    pub const fn bytes_total_u32(&self) -> u32 {
        self.bytes_total
    }

    /// Byte offset of the slot of free-running index `index`.
    pub const fn slot_offset(&self, index: u32) -> usize {
        // slot * entry_size + 128 < bytes_total <= u32::MAX: no overflow.
        let slot = (index & self.mask()) as u64;
        let off = slot * self.entry_size as u64 + HEADER_BYTES as u64;
        off as usize
    }

    /// Write the initial indices (`prod = cons = start`) of a fresh ring.
    /// Done by the kernel before the ring is handed out.
    pub fn init_header<R: SharedRegion + ?Sized>(
        &self,
        region: &R,
        start: u32,
    ) -> Result<(), RingError> {
        if region.len() < self.bytes_total()
            || !region.store_u32_release(PROD_OFFSET, start)
            || !region.store_u32_release(CONS_OFFSET, start)
        {
            return Err(RingError::Access);
        }
        Ok(())
    }
}

/// The producing side of a ring: the provider for SQ/RQ/SRQ, the kernel
/// for a CQ.
///
/// `prod` counts written entries, `published` the value last stored into
/// the shared producer index, `seen_cons` the last accepted consumer index.
/// Invariant (mod 2^32): `seen_cons <= published <= prod <= seen_cons +
/// entries`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Producer {
    layout: RingLayout,
    prod: u32,
    published: u32,
    seen_cons: u32,
    fault: Option<RingError>,
}

impl Producer {
    /// A producer for a fresh ring whose indices are both `start`.
    pub const fn new(layout: RingLayout, start: u32) -> Self {
        Self {
            layout,
            prod: start,
            published: start,
            seen_cons: start,
            fault: None,
        }
    }

    /// Take over a ring that the peer initialised: read both indices once.
    /// For the provider (the kernel initialises rings and never calls this).
    pub fn attach<R: SharedRegion + ?Sized>(
        layout: RingLayout,
        region: &R,
    ) -> Result<Self, RingError> {
        if region.len() < layout.bytes_total() {
            return Err(RingError::Access);
        }
        let p = region
            .load_u32_acquire(PROD_OFFSET)
            .ok_or(RingError::Access)?;
        let c = region
            .load_u32_acquire(CONS_OFFSET)
            .ok_or(RingError::Access)?;
        if p.wrapping_sub(c) > layout.entries {
            return Err(RingError::InvalidIndex);
        }
        Ok(Self {
            layout,
            prod: p,
            published: p,
            seen_cons: c,
            fault: None,
        })
    }

    /// The ring geometry.
    pub const fn layout(&self) -> &RingLayout {
        &self.layout
    }

    /// Private producer index (written entries, published or not).
    pub const fn index(&self) -> u32 {
        self.prod
    }

    /// Entries written but not yet published.
    pub const fn pending(&self) -> u32 {
        self.prod.wrapping_sub(self.published)
    }

    /// The sticky error, if the ring is broken.
    pub const fn fault(&self) -> Option<RingError> {
        self.fault
    }

    fn check(&self) -> Result<(), RingError> {
        match self.fault {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn fail(&mut self, e: RingError) -> RingError {
        self.fault = Some(e);
        e
    }

    /// Free slots according to the last accepted consumer index (a lower
    /// bound of the true value).
    fn cached_free(&self) -> u32 {
        self.layout
            .entries
            .saturating_sub(self.prod.wrapping_sub(self.seen_cons))
    }

    /// Acquire-load and validate the consumer index; return the free slots.
    pub fn refresh<R: SharedRegion + ?Sized>(&mut self, region: &R) -> Result<u32, RingError> {
        self.check()?;
        let Some(c) = region.load_u32_acquire(CONS_OFFSET) else {
            return Err(self.fail(RingError::Access));
        };
        if c.wrapping_sub(self.seen_cons) > self.published.wrapping_sub(self.seen_cons) {
            return Err(self.fail(RingError::InvalidIndex));
        }
        self.seen_cons = c;
        Ok(self.cached_free())
    }

    /// Free slots (refreshes the consumer index).
    pub fn free_slots<R: SharedRegion + ?Sized>(&mut self, region: &R) -> Result<u32, RingError> {
        self.refresh(region)
    }

    /// Whether no slot is free; loads the consumer index only when the
    /// cached value says full.
    pub fn is_full<R: SharedRegion + ?Sized>(&mut self, region: &R) -> Result<bool, RingError> {
        self.check()?;
        if self.cached_free() > 0 {
            return Ok(false);
        }
        Ok(self.refresh(region)? == 0)
    }

    /// Offset of the next free slot, `None` if the ring is full.  The
    /// caller may build the entry in place there and then call
    /// [`Self::advance`].
    pub fn next_slot<R: SharedRegion + ?Sized>(
        &mut self,
        region: &R,
    ) -> Result<Option<usize>, RingError> {
        if self.is_full(region)? {
            return Ok(None);
        }
        Ok(Some(self.layout.slot_offset(self.prod)))
    }

    /// Count the entry at [`Self::next_slot`] as written (not published).
    pub fn advance(&mut self) -> Result<(), RingError> {
        self.check()?;
        if self.cached_free() == 0 {
            return Err(RingError::Full);
        }
        self.prod = self.prod.wrapping_add(1);
        Ok(())
    }

    /// Copy `bytes` (at most one entry) into the next free slot without
    /// publishing it.  The rest of the slot is left as it was.
    pub fn write_next<R: SharedRegion + ?Sized>(
        &mut self,
        region: &R,
        bytes: &[u8],
    ) -> Result<(), RingError> {
        if bytes.len() > self.layout.entry_size as usize {
            return Err(RingError::BadLength);
        }
        let off = self.next_slot(region)?.ok_or(RingError::Full)?;
        if !region.write(off, bytes) {
            return Err(self.fail(RingError::Access));
        }
        self.advance()
    }

    /// Release-store the private producer index into the ring.
    pub fn publish<R: SharedRegion + ?Sized>(&mut self, region: &R) -> Result<(), RingError> {
        self.check()?;
        if !region.store_u32_release(PROD_OFFSET, self.prod) {
            return Err(self.fail(RingError::Access));
        }
        self.published = self.prod;
        Ok(())
    }

    /// Mark the ring closed ([`PROD_CLOSED`]): nothing will be produced
    /// into it any more.  Call after the last [`Self::publish`].  Works on a
    /// broken ring too (the consumer should stop waiting either way).
    pub fn close<R: SharedRegion + ?Sized>(&self, region: &R) -> Result<(), RingError> {
        if region.store_u32_release(PROD_FLAGS_OFFSET, PROD_CLOSED) {
            Ok(())
        } else {
            Err(RingError::Access)
        }
    }

    /// [`Self::write_next`] followed by [`Self::publish`].
    pub fn push<R: SharedRegion + ?Sized>(
        &mut self,
        region: &R,
        bytes: &[u8],
    ) -> Result<(), RingError> {
        self.write_next(region, bytes)?;
        self.publish(region)
    }

    /// Copies the entries the consumer still has to read into a fresh ring
    /// `dst` of geometry `layout` (a CQ resize; this side produces).
    ///
    /// The consumer index is loaded from `src` once and validated as
    /// [`Self::refresh`] does (between the last accepted one and the
    /// published index).  Entries `c .. prod` are copied slot by slot to the
    /// same free-running indices in `dst`, whose header then gets `c` and
    /// the published index: the indices simply continue in the new ring.
    /// `self` is left unchanged whatever happens, so the caller swaps in
    /// [`Transferred::producer`] only on success; `src` is only read.
    ///
    /// Errors: the sticky fault of `self`; [`RingError::BadEntrySize`] if
    /// the entry sizes differ; [`RingError::Access`] if a region refuses an
    /// access or `dst` is smaller than `layout`; [`RingError::InvalidIndex`]
    /// for an impossible consumer index; [`RingError::Full`] if the entries
    /// do not fit into `layout`.
    pub fn transfer<S, D>(
        &self,
        src: &S,
        layout: RingLayout,
        dst: &D,
    ) -> Result<Transferred, RingError>
    where
        S: SharedRegion + ?Sized,
        D: SharedRegion + ?Sized,
    {
        self.check()?;
        if layout.entry_size != self.layout.entry_size {
            return Err(RingError::BadEntrySize);
        }
        if dst.len() < layout.bytes_total() {
            return Err(RingError::Access);
        }
        let c = src.load_u32_acquire(CONS_OFFSET).ok_or(RingError::Access)?;
        if c.wrapping_sub(self.seen_cons) > self.published.wrapping_sub(self.seen_cons) {
            return Err(RingError::InvalidIndex);
        }
        let count = self.prod.wrapping_sub(c);
        if count > layout.entries {
            return Err(RingError::Full);
        }
        copy_slots(src, self.layout, dst, layout, c, count)?;
        // Entries first, then the indices (release): a consumer that
        // attaches to `dst` sees every entry below the producer index.
        if !dst.store_u32_release(CONS_OFFSET, c)
            || !dst.store_u32_release(PROD_OFFSET, self.published)
        {
            return Err(RingError::Access);
        }
        Ok(Transferred {
            producer: Producer {
                layout,
                prod: self.prod,
                published: self.published,
                seen_cons: c,
                fault: None,
            },
            cons: c,
            count,
        })
    }
}

/// A ring moved by [`Producer::transfer`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transferred {
    /// The producer of the new ring (same private and published indices).
    pub producer: Producer,
    /// The new ring's consumer index (the old ring's, validated): where a
    /// [`Consumer`] of the new ring starts ([`Consumer::new`]).
    pub cons: u32,
    /// Entries copied: written and not yet released by the consumer.
    pub count: u32,
}

/// Copies the `count` entries from free-running index `first` of ring
/// `src` (geometry `from`) to the same indices of ring `dst` (geometry
/// `to`, the same entry size), 64 bytes at a time.
fn copy_slots<S, D>(
    src: &S,
    from: RingLayout,
    dst: &D,
    to: RingLayout,
    first: u32,
    count: u32,
) -> Result<(), RingError>
where
    S: SharedRegion + ?Sized,
    D: SharedRegion + ?Sized,
{
    let esz = from.entry_size as usize;
    let mut chunk = [0u8; 64];
    for i in 0..count {
        let idx = first.wrapping_add(i);
        let (a, b) = (from.slot_offset(idx), to.slot_offset(idx));
        let mut done = 0usize;
        while done < esz {
            let n = esz.wrapping_sub(done).min(chunk.len());
            let buf = chunk.get_mut(..n).ok_or(RingError::BadLength)?;
            if !src.read(a.wrapping_add(done), buf) || !dst.write(b.wrapping_add(done), buf) {
                return Err(RingError::Access);
            }
            done = done.wrapping_add(n);
        }
    }
    Ok(())
}

/// What [`Consumer::transfer`] made of the new ring.
#[derive(Clone, Debug)]
pub struct ConsumerTransferred {
    /// The consumer of the new ring.
    pub consumer: Consumer,
    /// The producer index copied (the new ring's header has it).
    pub prod: u32,
    /// Entries copied: published and not yet consumed.
    pub count: u32,
}

/// The consuming side of a ring: the kernel for SQ/RQ/SRQ, the provider
/// for a CQ.
///
/// `head` counts consumed (read) entries, `cons` released ones (the value
/// last stored into the shared consumer index), `seen_prod` the last
/// accepted producer index.  Invariant (mod 2^32): `cons <= head <=
/// seen_prod <= cons + entries`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Consumer {
    layout: RingLayout,
    head: u32,
    cons: u32,
    seen_prod: u32,
    fault: Option<RingError>,
}

impl Consumer {
    /// A consumer for a fresh ring whose indices are both `start`.
    pub const fn new(layout: RingLayout, start: u32) -> Self {
        Self {
            layout,
            head: start,
            cons: start,
            seen_prod: start,
            fault: None,
        }
    }

    /// Take over a ring that the peer initialised: read both indices once.
    /// For the provider (the kernel initialises rings and never calls this).
    pub fn attach<R: SharedRegion + ?Sized>(
        layout: RingLayout,
        region: &R,
    ) -> Result<Self, RingError> {
        if region.len() < layout.bytes_total() {
            return Err(RingError::Access);
        }
        let p = region
            .load_u32_acquire(PROD_OFFSET)
            .ok_or(RingError::Access)?;
        let c = region
            .load_u32_acquire(CONS_OFFSET)
            .ok_or(RingError::Access)?;
        if p.wrapping_sub(c) > layout.entries {
            return Err(RingError::InvalidIndex);
        }
        Ok(Self {
            layout,
            head: c,
            cons: c,
            seen_prod: p,
            fault: None,
        })
    }

    /// The ring geometry.
    pub const fn layout(&self) -> &RingLayout {
        &self.layout
    }

    /// Private index of the next entry to consume.
    pub const fn index(&self) -> u32 {
        self.head
    }

    /// Released (published) consumer index.
    pub const fn released(&self) -> u32 {
        self.cons
    }

    /// Entries consumed but not yet released.
    pub const fn unreleased(&self) -> u32 {
        self.head.wrapping_sub(self.cons)
    }

    /// The sticky error, if the ring is broken.
    pub const fn fault(&self) -> Option<RingError> {
        self.fault
    }

    fn check(&self) -> Result<(), RingError> {
        match self.fault {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn fail(&mut self, e: RingError) -> RingError {
        self.fault = Some(e);
        e
    }

    /// Entries available according to the last accepted producer index.
    fn cached_avail(&self) -> u32 {
        self.seen_prod.wrapping_sub(self.head)
    }

    /// Acquire-load and validate the producer index; return the number of
    /// entries available to consume.
    pub fn refresh<R: SharedRegion + ?Sized>(&mut self, region: &R) -> Result<u32, RingError> {
        self.check()?;
        let Some(p) = region.load_u32_acquire(PROD_OFFSET) else {
            return Err(self.fail(RingError::Access));
        };
        let limit = self
            .cons
            .wrapping_add(self.layout.entries)
            .wrapping_sub(self.seen_prod);
        if p.wrapping_sub(self.seen_prod) > limit {
            return Err(self.fail(RingError::InvalidIndex));
        }
        self.seen_prod = p;
        Ok(self.cached_avail())
    }

    /// Offset of the next entry to consume, `None` if the ring is empty.
    /// Loads the producer index only when the cached value says empty.
    pub fn peek<R: SharedRegion + ?Sized>(
        &mut self,
        region: &R,
    ) -> Result<Option<usize>, RingError> {
        self.check()?;
        if self.cached_avail() == 0 && self.refresh(region)? == 0 {
            return Ok(None);
        }
        Ok(Some(self.layout.slot_offset(self.head)))
    }

    /// Count the entry at [`Self::peek`] as consumed (not released).
    pub fn consume(&mut self) -> Result<(), RingError> {
        self.check()?;
        if self.cached_avail() == 0 {
            return Err(RingError::Empty);
        }
        self.head = self.head.wrapping_add(1);
        Ok(())
    }

    /// Copy the first `dst.len()` bytes (at most one entry) of the next
    /// entry into `dst` and consume it, without releasing it.  `Ok(false)`
    /// if the ring is empty.
    pub fn read_next<R: SharedRegion + ?Sized>(
        &mut self,
        region: &R,
        dst: &mut [u8],
    ) -> Result<bool, RingError> {
        if dst.len() > self.layout.entry_size as usize {
            return Err(RingError::BadLength);
        }
        let Some(off) = self.peek(region)? else {
            return Ok(false);
        };
        if !region.read(off, dst) {
            return Err(self.fail(RingError::Access));
        }
        self.consume()?;
        Ok(true)
    }

    /// Whether the producer closed the ring ([`PROD_CLOSED`]) and every
    /// entry it published before closing has been consumed: nothing will
    /// ever come.  (The flag is loaded before the producer index, so the
    /// entries published before the close are counted.)
    pub fn closed_and_drained<R: SharedRegion + ?Sized>(&mut self, region: &R) -> bool {
        region
            .load_u32_acquire(PROD_FLAGS_OFFSET)
            .is_some_and(|f| f & PROD_CLOSED != 0)
            && self.refresh(region) == Ok(0)
    }

    /// Release the oldest `n` consumed entries and release-store the
    /// consumer index.
    pub fn release<R: SharedRegion + ?Sized>(
        &mut self,
        region: &R,
        n: u32,
    ) -> Result<(), RingError> {
        self.check()?;
        if n > self.unreleased() {
            return Err(RingError::BadLength);
        }
        let c = self.cons.wrapping_add(n);
        if !region.store_u32_release(CONS_OFFSET, c) {
            return Err(self.fail(RingError::Access));
        }
        self.cons = c;
        Ok(())
    }

    /// Release every consumed entry.
    pub fn release_all<R: SharedRegion + ?Sized>(&mut self, region: &R) -> Result<(), RingError> {
        self.release(region, self.unreleased())
    }

    /// Consume the peeked entry and release everything consumed.
    pub fn advance<R: SharedRegion + ?Sized>(&mut self, region: &R) -> Result<(), RingError> {
        self.consume()?;
        self.release_all(region)
    }

    /// Copies the entries the producer published and this side has not
    /// consumed into a fresh ring `dst` of geometry `layout` (an SRQ
    /// resize; this side consumes, the producer is held off meanwhile).
    ///
    /// Every consumed entry must have been released ([`RingError::BadLength`]
    /// otherwise).  The producer index is loaded from `src` once and
    /// validated as [`Self::refresh`] does; entries `cons .. prod` are copied
    /// slot by slot to the same free-running indices in `dst`, whose header
    /// then gets both indices.  `self` is left unchanged whatever happens;
    /// `src` is only read.
    ///
    /// Errors: the sticky fault of `self`; [`RingError::BadEntrySize`] if
    /// the entry sizes differ; [`RingError::Access`] if a region refuses an
    /// access or `dst` is smaller than `layout`; [`RingError::InvalidIndex`]
    /// for an impossible producer index; [`RingError::Full`] if the
    /// entries do not fit into `layout`.
    pub fn transfer<S, D>(
        &self,
        src: &S,
        layout: RingLayout,
        dst: &D,
    ) -> Result<ConsumerTransferred, RingError>
    where
        S: SharedRegion + ?Sized,
        D: SharedRegion + ?Sized,
    {
        self.check()?;
        if self.unreleased() != 0 {
            return Err(RingError::BadLength);
        }
        if layout.entry_size != self.layout.entry_size {
            return Err(RingError::BadEntrySize);
        }
        if dst.len() < layout.bytes_total() {
            return Err(RingError::Access);
        }
        let p = src.load_u32_acquire(PROD_OFFSET).ok_or(RingError::Access)?;
        let limit = self
            .cons
            .wrapping_add(self.layout.entries)
            .wrapping_sub(self.seen_prod);
        if p.wrapping_sub(self.seen_prod) > limit {
            return Err(RingError::InvalidIndex);
        }
        let count = p.wrapping_sub(self.cons);
        if count > layout.entries {
            return Err(RingError::Full);
        }
        copy_slots(src, self.layout, dst, layout, self.cons, count)?;
        // Entries first, then the indices (release).
        if !dst.store_u32_release(CONS_OFFSET, self.cons) || !dst.store_u32_release(PROD_OFFSET, p)
        {
            return Err(RingError::Access);
        }
        Ok(ConsumerTransferred {
            consumer: Consumer {
                layout,
                head: self.cons,
                cons: self.cons,
                seen_prod: p,
                fault: None,
            },
            prod: p,
            count,
        })
    }

    /// Remove every unconsumed entry for which `keep` is false, keeping
    /// the others in order, and release the freed slots; returns how many
    /// were removed.  The entries consumed but not released must have been
    /// released first (`BadLength` otherwise).
    ///
    /// Safe against a producer adding entries meanwhile: only slots between
    /// the consumer and the producer index read here (which the producer
    /// does not touch) are rewritten, compacted towards the newest one, and
    /// the consumer index then moves past the freed slots at the old end.
    /// `keep` sees at most one entry's bytes (`entry_size` of them, up to
    /// 64) at a time.
    pub fn purge<R: SharedRegion + ?Sized>(
        &mut self,
        region: &R,
        mut keep: impl FnMut(&[u8]) -> bool,
    ) -> Result<u32, RingError> {
        self.check()?;
        if self.unreleased() != 0 {
            return Err(RingError::BadLength);
        }
        let esz = self.layout.entry_size as usize;
        let mut buf = [0u8; 64];
        let entry = buf.get_mut(..esz).ok_or(RingError::BadLength)?;
        self.refresh(region)?;
        let mut dst = self.seen_prod;
        let mut removed = 0u32;
        let mut i = self.seen_prod;
        while i != self.head {
            i = i.wrapping_sub(1);
            if !region.read(self.layout.slot_offset(i), entry) {
                return Err(self.fail(RingError::Access));
            }
            if keep(entry) {
                dst = dst.wrapping_sub(1);
                if dst != i && !region.write(self.layout.slot_offset(dst), entry) {
                    return Err(self.fail(RingError::Access));
                }
            } else {
                removed += 1;
            }
        }
        self.head = self.head.wrapping_add(removed);
        self.release_all(region)?;
        Ok(removed)
    }

    /// [`Self::read_next`] and, if an entry was read, [`Self::release_all`].
    pub fn pop<R: SharedRegion + ?Sized>(
        &mut self,
        region: &R,
        dst: &mut [u8],
    ) -> Result<bool, RingError> {
        if !self.read_next(region, dst)? {
            return Ok(false);
        }
        self.release_all(region)?;
        Ok(true)
    }
}

/// A safe [`SharedRegion`] over a slice of `AtomicU32` words (native byte
/// order).  Usable wherever the shared memory can be viewed as atomics,
/// e.g. host tests of the provider.  Entry bytes are accessed with relaxed
/// atomics; partial words are updated with a compare-and-swap loop so that
/// neighbouring bytes are never clobbered.
#[derive(Clone, Copy, Debug)]
pub struct AtomicRegion<'a> {
    words: &'a [AtomicU32],
}

impl<'a> AtomicRegion<'a> {
    /// View `words` as a region of `4 * words.len()` bytes.
    pub const fn new(words: &'a [AtomicU32]) -> Self {
        Self { words }
    }

    fn range_ok(&self, off: usize, len: usize) -> bool {
        matches!(off.checked_add(len), Some(end) if end <= self.len())
    }

    fn word_at(&self, off: usize) -> Option<&AtomicU32> {
        if off & 3 != 0 {
            return None;
        }
        self.words.get(off / 4)
    }
}

impl SharedRegion for AtomicRegion<'_> {
    fn len(&self) -> usize {
        self.words.len().saturating_mul(4)
    }

    fn load_u32_acquire(&self, off: usize) -> Option<u32> {
        self.word_at(off).map(|w| w.load(Ordering::Acquire))
    }

    fn store_u32_release(&self, off: usize, v: u32) -> bool {
        match self.word_at(off) {
            Some(w) => {
                w.store(v, Ordering::Release);
                true
            }
            None => false,
        }
    }

    fn read(&self, off: usize, dst: &mut [u8]) -> bool {
        if !self.range_ok(off, dst.len()) {
            return false;
        }
        if off & 3 == 0 {
            // Fast path: one load per word, whole words copied at once.
            let Some(ws) = self.words.get(off / 4..) else {
                return false;
            };
            let mut chunks = dst.chunks_exact_mut(4);
            let mut ws = ws.iter();
            for (d, w) in (&mut chunks).zip(&mut ws) {
                d.copy_from_slice(&w.load(Ordering::Relaxed).to_ne_bytes());
            }
            let tail = chunks.into_remainder();
            if let Some(w) = ws.next() {
                let by = w.load(Ordering::Relaxed).to_ne_bytes();
                for (x, y) in tail.iter_mut().zip(by) {
                    *x = y;
                }
            }
            return true;
        }
        let mut cur_word = usize::MAX;
        let mut cur = [0u8; 4];
        for (i, d) in dst.iter_mut().enumerate() {
            let p = off.wrapping_add(i);
            let w = p / 4;
            if w != cur_word {
                match self.words.get(w) {
                    Some(x) => cur = x.load(Ordering::Relaxed).to_ne_bytes(),
                    None => return false,
                }
                cur_word = w;
            }
            *d = cur.get(p % 4).copied().unwrap_or(0);
        }
        true
    }

    fn write(&self, off: usize, src: &[u8]) -> bool {
        if !self.range_ok(off, src.len()) {
            return false;
        }
        let mut i = 0usize;
        if off & 3 == 0 {
            // Fast path: whole words stored at once; the partial last
            // word (if any) goes through the merging loop below.
            let Some(ws) = self.words.get(off / 4..) else {
                return false;
            };
            let chunks = src.chunks_exact(4);
            i = src.len() - chunks.remainder().len();
            for (c, w) in chunks.zip(ws) {
                let mut by = [0u8; 4];
                by.copy_from_slice(c);
                w.store(u32::from_ne_bytes(by), Ordering::Relaxed);
            }
        }
        while i < src.len() {
            let p = off.wrapping_add(i);
            let b = p % 4;
            let n = (4 - b).min(src.len().wrapping_sub(i));
            let (Some(word), Some(chunk)) = (self.words.get(p / 4), src.get(i..i.wrapping_add(n)))
            else {
                return false;
            };
            if let Ok(full) = <[u8; 4]>::try_from(chunk) {
                word.store(u32::from_ne_bytes(full), Ordering::Relaxed);
            } else {
                let merge = |old: u32| {
                    let mut by = old.to_ne_bytes();
                    for (t, v) in by.iter_mut().skip(b).zip(chunk) {
                        *t = *v;
                    }
                    Some(u32::from_ne_bytes(by))
                };
                // `merge` always returns `Some`, so this cannot fail.
                let _ = word.fetch_update(Ordering::Relaxed, Ordering::Relaxed, merge);
            }
            i = i.wrapping_add(n);
        }
        true
    }
}

/// A single-threaded [`SharedRegion`] over `Cell<u8>`s, for tests and for
/// simulations where both sides run in one thread.  "Acquire"/"release"
/// are plain accesses (there is no other thread).
#[derive(Clone, Copy, Debug)]
pub struct CellRegion<'a> {
    bytes: &'a [Cell<u8>],
}

impl<'a> CellRegion<'a> {
    /// View `bytes` as a region.
    pub const fn new(bytes: &'a [Cell<u8>]) -> Self {
        Self { bytes }
    }

    fn range(&self, off: usize, len: usize) -> Option<&'a [Cell<u8>]> {
        self.bytes.get(off..off.checked_add(len)?)
    }
}

impl SharedRegion for CellRegion<'_> {
    fn len(&self) -> usize {
        self.bytes.len()
    }

    fn load_u32_acquire(&self, off: usize) -> Option<u32> {
        if off & 3 != 0 {
            return None;
        }
        let s = self.range(off, 4)?;
        let mut b = [0u8; 4];
        for (d, c) in b.iter_mut().zip(s) {
            *d = c.get();
        }
        Some(u32::from_ne_bytes(b))
    }

    fn store_u32_release(&self, off: usize, v: u32) -> bool {
        if off & 3 != 0 {
            return false;
        }
        self.write(off, &v.to_ne_bytes())
    }

    fn read(&self, off: usize, dst: &mut [u8]) -> bool {
        let Some(s) = self.range(off, dst.len()) else {
            return false;
        };
        for (d, c) in dst.iter_mut().zip(s) {
            *d = c.get();
        }
        true
    }

    fn write(&self, off: usize, src: &[u8]) -> bool {
        let Some(s) = self.range(off, src.len()) else {
            return false;
        };
        for (c, v) in s.iter().zip(src) {
            c.set(*v);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    /// xorshift64* - tiny deterministic PRNG for the simulations.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            self.0 = x;
            x.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    fn cells(n: usize) -> Vec<Cell<u8>> {
        (0..n).map(|_| Cell::new(0)).collect()
    }

    fn entry(seq: u64, size: usize) -> Vec<u8> {
        let mut v = std::vec![0u8; size];
        for (i, b) in v.iter_mut().enumerate() {
            *b = (seq as u8).wrapping_add(i as u8);
        }
        if let Some(d) = v.get_mut(..8) {
            d.copy_from_slice(&seq.to_ne_bytes());
        }
        v
    }

    #[test]
    fn layout_rounding_and_limits() {
        let l = RingLayout::new(3, 64, 1024).unwrap();
        assert_eq!(l.entries(), 4);
        assert_eq!(l.mask(), 3);
        assert_eq!(l.entry_size(), 64);
        assert_eq!(l.bytes_total(), 4096);
        assert_eq!(RingLayout::new(64, 64, 64).unwrap().bytes_total(), 8192);
        assert_eq!(RingLayout::new(62, 64, 64).unwrap().bytes_total(), 8192);
        assert_eq!(RingLayout::new(1, 16, 1).unwrap().entries(), 1);
        assert_eq!(RingLayout::new(0, 64, 1024), Err(RingError::BadEntries));
        assert_eq!(RingLayout::new(1025, 64, 1024), Err(RingError::BadEntries));
        assert_eq!(
            RingLayout::new(u32::MAX, 64, u32::MAX),
            Err(RingError::BadEntries)
        );
        assert_eq!(RingLayout::new(4, 0, 8), Err(RingError::BadEntrySize));
        assert_eq!(RingLayout::new(4, 24, 8), Err(RingError::BadEntrySize));
        assert_eq!(
            RingLayout::new(1 << 31, 64, u32::MAX),
            Err(RingError::TooLarge)
        );
        assert_eq!(
            RingLayout::from_raw(1, 0xFFFF_FFF0),
            Err(RingError::TooLarge)
        );
        // The largest ring that fits in u32 bytes.
        let big = RingLayout::from_raw(1 << 20, 4032).unwrap();
        assert_eq!(big.bytes_total_u32() % RING_ALIGN, 0);
        assert_eq!(RingLayout::from_raw(6, 64), Err(RingError::BadEntries));
        assert_eq!(RingLayout::from_raw(0, 64), Err(RingError::BadEntries));
        assert_eq!(RingLayout::from_resp(8, 64, 4095), Err(RingError::TooLarge));
        assert!(RingLayout::from_resp(8, 64, 65536).is_ok());
    }

    #[test]
    fn slot_offsets() {
        let l = RingLayout::new(8, 128, 8).unwrap();
        assert_eq!(l.slot_offset(0), 128);
        assert_eq!(l.slot_offset(7), 128 + 7 * 128);
        assert_eq!(l.slot_offset(8), 128);
        assert_eq!(l.slot_offset(u32::MAX), 128 + 7 * 128);
        for i in 0..64u32 {
            let o = l.slot_offset(i.wrapping_mul(0x9E37_79B9));
            assert!(o >= 128 && o + 128 <= l.bytes_total());
            assert_eq!((o - 128) % 128, 0);
        }
    }

    fn basic_cycle(start: u32) {
        let l = RingLayout::new(4, 64, 4).unwrap();
        let buf = cells(l.bytes_total());
        let r = CellRegion::new(&buf);
        l.init_header(&r, start).unwrap();
        let mut p = Producer::attach(l, &r).unwrap();
        let mut c = Consumer::new(l, start);
        assert_eq!(p.index(), start);
        let mut out = [0u8; 64];
        assert_eq!(c.pop(&r, &mut out), Ok(false));
        assert_eq!(c.peek(&r), Ok(None));
        assert_eq!(c.consume(), Err(RingError::Empty));
        let mut seq = 0u64;
        let mut next = 0u64;
        for _round in 0..5 {
            assert!(!p.is_full(&r).unwrap());
            for _ in 0..4 {
                p.push(&r, &entry(seq, 64)).unwrap();
                seq += 1;
            }
            assert!(p.is_full(&r).unwrap());
            assert_eq!(p.free_slots(&r), Ok(0));
            assert_eq!(p.next_slot(&r), Ok(None));
            assert_eq!(p.push(&r, &entry(seq, 64)), Err(RingError::Full));
            assert_eq!(p.advance(), Err(RingError::Full));
            for _ in 0..4 {
                assert_eq!(c.pop(&r, &mut out), Ok(true));
                assert_eq!(out.to_vec(), entry(next, 64));
                next += 1;
            }
            assert_eq!(c.pop(&r, &mut out), Ok(false));
            assert_eq!(p.free_slots(&r), Ok(4));
        }
        assert_eq!(c.index(), start.wrapping_add(20));
        assert_eq!(
            r.load_u32_acquire(CONS_OFFSET),
            Some(start.wrapping_add(20))
        );
        assert_eq!(
            r.load_u32_acquire(PROD_OFFSET),
            Some(start.wrapping_add(20))
        );
    }

    #[test]
    fn full_empty_and_wrap() {
        basic_cycle(0);
        basic_cycle(u32::MAX);
        basic_cycle(u32::MAX - 2);
        basic_cycle(u32::MAX - 5);
        basic_cycle(0x8000_0000);
    }

    #[test]
    fn closing_is_seen_after_the_last_entries() {
        let l = RingLayout::new(4, 64, 4).unwrap();
        let buf = cells(l.bytes_total());
        let r = CellRegion::new(&buf);
        l.init_header(&r, 7).unwrap();
        let mut p = Producer::new(l, 7);
        let mut c = Consumer::new(l, 7);
        assert!(!c.closed_and_drained(&r));
        p.push(&r, &entry(1, 64)).unwrap();
        p.close(&r).unwrap();
        // Closing touches neither index nor entries.
        assert_eq!(r.load_u32_acquire(PROD_OFFSET), Some(8));
        assert_eq!(r.load_u32_acquire(CONS_OFFSET), Some(7));
        // Closed, but an entry is still there.
        assert!(!c.closed_and_drained(&r));
        let mut out = [0u8; 64];
        assert_eq!(c.pop(&r, &mut out), Ok(true));
        assert_eq!(out.to_vec(), entry(1, 64));
        assert_eq!(c.pop(&r, &mut out), Ok(false));
        assert!(c.closed_and_drained(&r));
        // A region too small for the header refuses it.
        let small = cells(2);
        assert_eq!(p.close(&CellRegion::new(&small)), Err(RingError::Access));
        assert!(!Consumer::new(l, 7).closed_and_drained(&CellRegion::new(&small)));
    }

    #[test]
    fn attach_reads_peer_header() {
        let l = RingLayout::new(8, 64, 8).unwrap();
        let buf = cells(l.bytes_total());
        let r = CellRegion::new(&buf);
        r.store_u32_release(PROD_OFFSET, 5);
        r.store_u32_release(CONS_OFFSET, 2);
        let p = Producer::attach(l, &r).unwrap();
        assert_eq!(p.index(), 5);
        let c = Consumer::attach(l, &r).unwrap();
        assert_eq!(c.index(), 2);
        r.store_u32_release(PROD_OFFSET, 11);
        assert_eq!(Producer::attach(l, &r), Err(RingError::InvalidIndex));
        assert_eq!(Consumer::attach(l, &r), Err(RingError::InvalidIndex));
        let small = cells(l.bytes_total() - 1);
        let rs = CellRegion::new(&small);
        assert_eq!(Producer::attach(l, &rs), Err(RingError::Access));
        assert_eq!(Consumer::attach(l, &rs), Err(RingError::Access));
        assert_eq!(l.init_header(&rs, 0), Err(RingError::Access));
    }

    #[test]
    fn wild_producer_index_detected() {
        for start in [0u32, u32::MAX - 1, 0x7FFF_FFFF] {
            let l = RingLayout::new(8, 64, 8).unwrap();
            let buf = cells(l.bytes_total());
            let r = CellRegion::new(&buf);
            l.init_header(&r, start).unwrap();
            let mut c = Consumer::new(l, start);
            // Exactly full is fine.
            r.store_u32_release(PROD_OFFSET, start.wrapping_add(8));
            assert_eq!(c.refresh(&r), Ok(8));
            // One beyond is not.
            r.store_u32_release(PROD_OFFSET, start.wrapping_add(9));
            assert_eq!(c.refresh(&r), Err(RingError::InvalidIndex));
            // Sticky, whatever the producer does next.
            r.store_u32_release(PROD_OFFSET, start);
            assert_eq!(c.peek(&r), Err(RingError::InvalidIndex));
            assert_eq!(c.consume(), Err(RingError::InvalidIndex));
            assert_eq!(c.release(&r, 0), Err(RingError::InvalidIndex));
            assert_eq!(c.fault(), Some(RingError::InvalidIndex));

            // Producer index moving backwards.
            let mut c = Consumer::new(l, start);
            r.store_u32_release(PROD_OFFSET, start.wrapping_add(3));
            assert_eq!(c.refresh(&r), Ok(3));
            r.store_u32_release(PROD_OFFSET, start.wrapping_add(2));
            assert_eq!(c.refresh(&r), Err(RingError::InvalidIndex));

            // Far-away garbage.
            let mut c = Consumer::new(l, start);
            r.store_u32_release(PROD_OFFSET, start.wrapping_sub(1));
            assert_eq!(c.peek(&r), Err(RingError::InvalidIndex));
        }
    }

    #[test]
    fn wild_consumer_index_detected() {
        let l = RingLayout::new(8, 64, 8).unwrap();
        let buf = cells(l.bytes_total());
        let r = CellRegion::new(&buf);
        l.init_header(&r, 100).unwrap();
        let mut p = Producer::new(l, 100);
        for i in 0..5 {
            p.write_next(&r, &entry(i, 64)).unwrap();
        }
        p.publish(&r).unwrap();
        p.write_next(&r, &entry(5, 64)).unwrap();
        assert_eq!(p.pending(), 1);
        // The consumer may consume up to the published index ...
        r.store_u32_release(CONS_OFFSET, 105);
        assert_eq!(p.refresh(&r), Ok(7));
        // ... not beyond (entry 105 is written but unpublished).
        r.store_u32_release(CONS_OFFSET, 106);
        assert_eq!(p.refresh(&r), Err(RingError::InvalidIndex));
        assert_eq!(p.push(&r, &[0]), Err(RingError::InvalidIndex));
        assert_eq!(p.publish(&r), Err(RingError::InvalidIndex));

        // Backwards consumer index.
        let mut p = Producer::new(l, 100);
        r.store_u32_release(CONS_OFFSET, 100);
        p.push(&r, &[1]).unwrap();
        p.push(&r, &[2]).unwrap();
        r.store_u32_release(CONS_OFFSET, 102);
        assert_eq!(p.refresh(&r), Ok(8));
        r.store_u32_release(CONS_OFFSET, 101);
        assert_eq!(p.refresh(&r), Err(RingError::InvalidIndex));
    }

    #[test]
    fn own_index_scribbles_are_ignored() {
        let l = RingLayout::new(4, 64, 4).unwrap();
        let buf = cells(l.bytes_total());
        let r = CellRegion::new(&buf);
        l.init_header(&r, 0).unwrap();
        let mut p = Producer::new(l, 0);
        let mut c = Consumer::new(l, 0);
        let mut out = [0u8; 16];
        p.push(&r, &entry(0, 16)).unwrap();
        p.push(&r, &entry(1, 16)).unwrap();
        assert_eq!(c.pop(&r, &mut out), Ok(true));
        // The producer scribbles on the consumer index: the consumer never
        // reads it, and the producer itself detects it.
        r.store_u32_release(CONS_OFFSET, 0xDEAD_BEEF);
        assert_eq!(c.pop(&r, &mut out), Ok(true));
        assert_eq!(out.to_vec(), entry(1, 16));
        assert_eq!(r.load_u32_acquire(CONS_OFFSET), Some(2));
        // The consumer scribbles on the producer's index: overwritten by
        // the next publish, and a consumer that read it in between fails.
        r.store_u32_release(PROD_OFFSET, 1);
        p.push(&r, &entry(2, 16)).unwrap();
        assert_eq!(r.load_u32_acquire(PROD_OFFSET), Some(3));
        assert_eq!(c.pop(&r, &mut out), Ok(true));
        assert_eq!(out.to_vec(), entry(2, 16));
    }

    #[test]
    fn deferred_release() {
        let l = RingLayout::new(4, 64, 4).unwrap();
        let buf = cells(l.bytes_total());
        let r = CellRegion::new(&buf);
        l.init_header(&r, 7).unwrap();
        let mut p = Producer::new(l, 7);
        let mut c = Consumer::new(l, 7);
        for i in 0..4 {
            p.push(&r, &entry(i, 64)).unwrap();
        }
        let mut out = [0u8; 64];
        for i in 0..4 {
            assert_eq!(c.read_next(&r, &mut out), Ok(true));
            assert_eq!(out.to_vec(), entry(i, 64));
        }
        assert_eq!(c.read_next(&r, &mut out), Ok(false));
        assert_eq!(c.unreleased(), 4);
        // Nothing released: the producer still sees a full ring.
        assert!(p.is_full(&r).unwrap());
        assert_eq!(c.release(&r, 5), Err(RingError::BadLength));
        c.release(&r, 1).unwrap();
        assert_eq!(c.released(), 8);
        assert_eq!(p.free_slots(&r), Ok(1));
        p.push(&r, &entry(4, 64)).unwrap();
        assert!(p.is_full(&r).unwrap());
        // A producer index covering only released slots is valid.
        assert_eq!(c.refresh(&r), Ok(1));
        c.release_all(&r).unwrap();
        assert_eq!(c.unreleased(), 0);
        assert_eq!(c.peek(&r), Ok(Some(l.slot_offset(11))));
        c.advance(&r).unwrap();
        assert_eq!(c.released(), 12);
        assert_eq!(c.release(&r, 1), Err(RingError::BadLength));
    }

    #[test]
    fn purge_removes_matching_entries_in_order_across_the_wrap() {
        for start in [0u32, u32::MAX - 3, 5] {
            let l = RingLayout::new(8, 64, 8).unwrap();
            let buf = cells(l.bytes_total());
            let r = CellRegion::new(&buf);
            l.init_header(&r, start).unwrap();
            let mut p = Producer::new(l, start);
            let mut c = Consumer::new(l, start);
            let mut out = [0u8; 64];
            // Move the ring around a bit first.
            for i in 0..5 {
                p.push(&r, &entry(100 + i, 64)).unwrap();
                assert_eq!(c.pop(&r, &mut out), Ok(true));
            }
            for i in 0..8 {
                p.push(&r, &entry(i, 64)).unwrap();
            }
            // Drop the odd sequence numbers.
            let odd = |e: &[u8]| u64::from_ne_bytes(e[..8].try_into().unwrap()) % 2 == 1;
            assert_eq!(c.purge(&r, |e| !odd(e)), Ok(4));
            assert_eq!(p.free_slots(&r), Ok(4));
            for i in [0u64, 2, 4, 6] {
                assert_eq!(c.pop(&r, &mut out), Ok(true));
                assert_eq!(out.to_vec(), entry(i, 64));
            }
            assert_eq!(c.pop(&r, &mut out), Ok(false));
            // The freed slots are usable again, in order.
            for i in 8..16 {
                p.push(&r, &entry(i, 64)).unwrap();
            }
            assert_eq!(c.purge(&r, |_| true), Ok(0));
            assert_eq!(c.purge(&r, |e| e[0] != 9), Ok(1));
            for i in (8..16).filter(|&i| i != 9) {
                assert_eq!(c.pop(&r, &mut out), Ok(true));
                assert_eq!(out.to_vec(), entry(i, 64));
            }
            // Unreleased consumed entries: refused, nothing changed.
            p.push(&r, &entry(20, 64)).unwrap();
            assert_eq!(c.read_next(&r, &mut out), Ok(true));
            assert_eq!(c.purge(&r, |_| false), Err(RingError::BadLength));
            assert_eq!(c.unreleased(), 1);
        }
    }

    #[test]
    fn in_place_entries_and_lengths() {
        let l = RingLayout::new(2, 32, 2).unwrap();
        let buf = cells(l.bytes_total());
        let r = CellRegion::new(&buf);
        l.init_header(&r, 0).unwrap();
        let mut p = Producer::new(l, 0);
        let mut c = Consumer::new(l, 0);
        assert_eq!(p.write_next(&r, &[0u8; 33]), Err(RingError::BadLength));
        let off = p.next_slot(&r).unwrap().unwrap();
        assert_eq!(off, 128);
        assert!(r.write(off, &[9u8; 32]));
        p.advance().unwrap();
        p.publish(&r).unwrap();
        let mut big = [0u8; 33];
        assert_eq!(c.read_next(&r, &mut big), Err(RingError::BadLength));
        let mut hdr = [0u8; 4];
        assert_eq!(c.pop(&r, &mut hdr), Ok(true));
        assert_eq!(hdr, [9u8; 4]);
    }

    #[test]
    fn region_too_small_is_sticky_access_error() {
        let l = RingLayout::new(8, 512, 8).unwrap();
        let buf = cells(256);
        let r = CellRegion::new(&buf);
        let mut p = Producer::new(l, 0);
        // Slot 0 is at 128..640: beyond the region.
        assert_eq!(p.push(&r, &[1u8; 512]), Err(RingError::Access));
        assert_eq!(p.refresh(&r), Err(RingError::Access));
        let mut c = Consumer::new(l, 0);
        r.store_u32_release(PROD_OFFSET, 1);
        let mut out = [0u8; 512];
        assert_eq!(c.pop(&r, &mut out), Err(RingError::Access));
        assert_eq!(c.fault(), Some(RingError::Access));
        let none = cells(0);
        let rn = CellRegion::new(&none);
        assert!(rn.is_empty());
        let mut c = Consumer::new(l, 0);
        assert_eq!(c.peek(&rn), Err(RingError::Access));
    }

    /// A ring of `entries` slots of `esz` bytes whose indices start at
    /// `start`, with `pushed` entries produced (all published) and `popped`
    /// of them consumed and released.
    fn filled(
        buf: &[Cell<u8>],
        entries: u32,
        esz: usize,
        start: u32,
        pushed: u64,
        popped: u64,
    ) -> (RingLayout, Producer, Consumer) {
        let l = RingLayout::new(entries, esz as u32, 1 << 16).unwrap();
        let r = CellRegion::new(buf);
        l.init_header(&r, start).unwrap();
        let mut p = Producer::new(l, start);
        let mut c = Consumer::new(l, start);
        let mut out = std::vec![0u8; esz];
        let (mut w, mut rd) = (0u64, 0u64);
        // Interleave so that the slots wrap inside the old ring too.
        while w < pushed || rd < popped {
            if w < pushed && (w - rd) < u64::from(entries) {
                p.push(&r, &entry(w, esz)).unwrap();
                w += 1;
            } else {
                assert_eq!(c.pop(&r, &mut out), Ok(true));
                assert_eq!(out, entry(rd, esz));
                rd += 1;
            }
        }
        (l, p, c)
    }

    #[test]
    fn transfer_moves_outstanding_entries_across_the_wrap() {
        // RING_START of the driver is u32::MAX - 1023.
        for start in [u32::MAX - 1023, u32::MAX - 5, u32::MAX, 0, 0x8000_0000] {
            for (old_n, new_n, esz, pushed, popped) in [
                (8u32, 16u32, 64usize, 1030u64, 1024u64), // grow, 6 outstanding
                (16, 8, 64, 1040, 1032),                  // shrink to exactly 8
                (8, 8, 128, 20, 13),                      // same size, 2 chunks
                (4, 1, 64, 7, 7),                         // empty ring
                (1024, 2048, 64, 3000, 2000),             // a full ring of 1000
            ] {
                let ob = cells(
                    RingLayout::new(old_n, esz as u32, 1 << 16)
                        .unwrap()
                        .bytes_total(),
                );
                let (_, p, c) = filled(&ob, old_n, esz, start, pushed, popped.min(pushed));
                let old = CellRegion::new(&ob);
                let snapshot: Vec<u8> = ob.iter().map(Cell::get).collect();
                let nl = RingLayout::new(new_n, esz as u32, 1 << 16).unwrap();
                let nb = cells(nl.bytes_total());
                let new = CellRegion::new(&nb);
                let t = p.transfer(&old, nl, &new).unwrap();
                let outstanding = (pushed - popped) as u32;
                assert_eq!(t.count, outstanding);
                assert_eq!(t.cons, c.released());
                assert_eq!(t.cons, start.wrapping_add(popped as u32));
                assert_eq!(t.producer.index(), p.index());
                assert_eq!(t.producer.layout(), &nl);
                // The old ring is only read.
                assert!(ob.iter().map(Cell::get).eq(snapshot.iter().copied()));
                assert_eq!(new.load_u32_acquire(CONS_OFFSET), Some(t.cons));
                assert_eq!(new.load_u32_acquire(PROD_OFFSET), Some(p.index()));
                // A consumer attaching to the new ring (the provider) and one
                // starting at `cons` (a kernel CQ) read the same entries, in
                // order, then whatever the new producer adds.
                let mut np = t.producer.clone();
                let mut nc = Consumer::attach(nl, &new).unwrap();
                let mut kc = Consumer::new(nl, t.cons);
                assert_eq!(kc.refresh(&new), Ok(t.count));
                assert_eq!(nc, kc);
                let mut out = std::vec![0u8; esz];
                let mut seq = popped;
                let mut next = pushed;
                for round in 0..3 * u64::from(new_n) {
                    if round % 3 != 2 && np.push(&new, &entry(next, esz)).is_ok() {
                        next += 1;
                    }
                    if nc.pop(&new, &mut out).unwrap() {
                        assert_eq!(out, entry(seq, esz), "start {start:#x} seq {seq}");
                        seq += 1;
                    }
                }
                while nc.pop(&new, &mut out).unwrap() {
                    assert_eq!(out, entry(seq, esz));
                    seq += 1;
                }
                assert_eq!(seq, next);
                assert!(next > pushed);
            }
        }
    }

    #[test]
    fn consumer_transfer_moves_posted_entries_across_the_wrap() {
        // An SRQ resize: the kernel consumes, user space produces.
        for start in [u32::MAX - 1023, u32::MAX - 5, u32::MAX, 0] {
            for (old_n, new_n, esz, pushed, popped) in [
                (8u32, 16u32, 64usize, 1030u64, 1024u64), // grow, 6 posted
                (16, 8, 64, 1040, 1032),                  // shrink to exactly 8
                (8, 8, 128, 20, 13),                      // same size, 2 chunks
                (4, 1, 64, 7, 7),                         // empty ring
            ] {
                let ob = cells(
                    RingLayout::new(old_n, esz as u32, 1 << 16)
                        .unwrap()
                        .bytes_total(),
                );
                let (_, _, c) = filled(&ob, old_n, esz, start, pushed, popped.min(pushed));
                let old = CellRegion::new(&ob);
                let snapshot: Vec<u8> = ob.iter().map(Cell::get).collect();
                let nl = RingLayout::new(new_n, esz as u32, 1 << 16).unwrap();
                let nb = cells(nl.bytes_total());
                let new = CellRegion::new(&nb);
                let t = c.transfer(&old, nl, &new).unwrap();
                assert_eq!(t.count, (pushed - popped) as u32);
                assert_eq!(t.prod, start.wrapping_add(pushed as u32));
                assert!(ob.iter().map(Cell::get).eq(snapshot.iter().copied()));
                assert_eq!(new.load_u32_acquire(PROD_OFFSET), Some(t.prod));
                assert_eq!(
                    new.load_u32_acquire(CONS_OFFSET),
                    Some(start.wrapping_add(popped as u32))
                );
                // The provider takes the new ring over and keeps posting;
                // the kernel reads the old entries, in order, then the new.
                let mut np = Producer::attach(nl, &new).unwrap();
                let mut kc = t.consumer;
                let mut out = std::vec![0u8; esz];
                let (mut seq, mut next) = (popped, pushed);
                for round in 0..3 * u64::from(new_n) {
                    if round % 3 != 2 && np.push(&new, &entry(next, esz)).is_ok() {
                        next += 1;
                    }
                    if kc.pop(&new, &mut out).unwrap() {
                        assert_eq!(out, entry(seq, esz), "start {start:#x} seq {seq}");
                        seq += 1;
                    }
                }
                while kc.pop(&new, &mut out).unwrap() {
                    assert_eq!(out, entry(seq, esz));
                    seq += 1;
                }
                assert_eq!(seq, next);
            }
        }
    }

    #[test]
    fn consumer_transfer_refuses() {
        let start = u32::MAX - 1023;
        let ob = cells(RingLayout::new(16, 64, 16).unwrap().bytes_total());
        let (l, mut p, c) = filled(&ob, 16, 64, start, 1034, 1024);
        let old = CellRegion::new(&ob);
        let big = RingLayout::new(32, 64, 32).unwrap();
        let bb = cells(big.bytes_total());
        let br = CellRegion::new(&bb);
        // 10 posted do not fit into 8.
        let small = RingLayout::new(8, 64, 8).unwrap();
        let sb = cells(small.bytes_total());
        assert_eq!(
            c.transfer(&old, small, &CellRegion::new(&sb)).err(),
            Some(RingError::Full)
        );
        // Other entry size, short destination.
        let l128 = RingLayout::new(32, 128, 32).unwrap();
        let b128 = cells(l128.bytes_total());
        assert_eq!(
            c.transfer(&old, l128, &CellRegion::new(&b128)).err(),
            Some(RingError::BadEntrySize)
        );
        let short = cells(big.bytes_total() - 1);
        assert_eq!(
            c.transfer(&old, big, &CellRegion::new(&short)).err(),
            Some(RingError::Access)
        );
        // A consumed entry not yet released.
        let mut held = c.clone();
        assert!(held.peek(&old).unwrap().is_some());
        held.consume().unwrap();
        assert_eq!(
            held.transfer(&old, big, &br).err(),
            Some(RingError::BadLength)
        );
        // A producer index user space moved beyond the ring.
        let bad = start.wrapping_add(1024 + 17);
        assert!(old.store_u32_release(PROD_OFFSET, bad));
        assert_eq!(
            c.transfer(&old, big, &br).err(),
            Some(RingError::InvalidIndex)
        );
        // Nothing was written to the destination header on failure.
        assert_eq!(br.load_u32_acquire(PROD_OFFSET), Some(0));
        let _ = (l, &mut p);
    }

    #[test]
    fn transfer_refuses_and_leaves_everything_unchanged() {
        let start = u32::MAX - 1023;
        let ob = cells(RingLayout::new(16, 64, 16).unwrap().bytes_total());
        let (l, p, _) = filled(&ob, 16, 64, start, 1034, 1024);
        let old = CellRegion::new(&ob);
        let before = p.clone();
        let small = RingLayout::new(8, 64, 16).unwrap();
        let sb = cells(small.bytes_total());
        let sr = CellRegion::new(&sb);
        // 10 outstanding entries do not fit into 8 slots.
        assert_eq!(p.transfer(&old, small, &sr).err(), Some(RingError::Full));
        let big = RingLayout::new(32, 64, 32).unwrap();
        let bb = cells(big.bytes_total());
        let br = CellRegion::new(&bb);
        // Other entry size, destination too small.
        let l128 = RingLayout::new(32, 128, 32).unwrap();
        let b128 = cells(l128.bytes_total());
        assert_eq!(
            p.transfer(&old, l128, &CellRegion::new(&b128)).err(),
            Some(RingError::BadEntrySize)
        );
        let short = cells(big.bytes_total() - 4);
        assert_eq!(
            p.transfer(&old, big, &CellRegion::new(&short)).err(),
            Some(RingError::Access)
        );
        // Consumer index scribbles: beyond the producer, behind the last
        // accepted one, far off.
        let c = old.load_u32_acquire(CONS_OFFSET).unwrap();
        for bad in [
            c.wrapping_add(11),
            p.seen_cons.wrapping_sub(1),
            c ^ 0x8000_0000,
        ] {
            old.store_u32_release(CONS_OFFSET, bad);
            assert_eq!(
                p.transfer(&old, big, &br).err(),
                Some(RingError::InvalidIndex),
                "{bad:#x}"
            );
        }
        // Consumed everything: a valid index.
        old.store_u32_release(CONS_OFFSET, c.wrapping_add(10));
        assert_eq!(p.transfer(&old, small, &sr).map(|t| t.count), Ok(0));
        old.store_u32_release(CONS_OFFSET, c);
        // Unaligned/short source region: refused.
        let tiny = cells(8);
        assert_eq!(
            p.transfer(&CellRegion::new(&tiny), big, &br).err(),
            Some(RingError::Access)
        );
        assert_eq!(p, before);
        assert_eq!(p.layout(), &l);
        // A broken producer stays broken.
        let mut broken = p.clone();
        old.store_u32_release(CONS_OFFSET, c.wrapping_add(12));
        assert_eq!(broken.refresh(&old), Err(RingError::InvalidIndex));
        old.store_u32_release(CONS_OFFSET, c);
        assert_eq!(
            broken.transfer(&old, big, &br).err(),
            Some(RingError::InvalidIndex)
        );
        // And the intact one still works on the old ring.
        let mut p = p;
        assert_eq!(p.push(&old, &entry(5000, 64)), Ok(()));
    }

    #[test]
    fn transfer_keeps_unpublished_entries_unpublished() {
        let l = RingLayout::new(8, 64, 8).unwrap();
        let ob = cells(l.bytes_total());
        let old = CellRegion::new(&ob);
        l.init_header(&old, u32::MAX - 1).unwrap();
        let mut p = Producer::new(l, u32::MAX - 1);
        for i in 0..3 {
            p.push(&old, &entry(i, 64)).unwrap();
        }
        p.write_next(&old, &entry(3, 64)).unwrap();
        assert_eq!(p.pending(), 1);
        let nl = RingLayout::new(4, 64, 8).unwrap();
        let nb = cells(nl.bytes_total());
        let new = CellRegion::new(&nb);
        let t = p.transfer(&old, nl, &new).unwrap();
        assert_eq!(t.count, 4);
        assert_eq!(new.load_u32_acquire(PROD_OFFSET), Some(1));
        let mut np = t.producer;
        assert_eq!(np.pending(), 1);
        let mut c = Consumer::attach(nl, &new).unwrap();
        let mut out = [0u8; 64];
        for i in 0..3 {
            assert_eq!(c.pop(&new, &mut out), Ok(true));
            assert_eq!(out.to_vec(), entry(i, 64));
        }
        assert_eq!(c.pop(&new, &mut out), Ok(false));
        np.publish(&new).unwrap();
        assert_eq!(c.pop(&new, &mut out), Ok(true));
        assert_eq!(out.to_vec(), entry(3, 64));
    }

    /// A CQ that is resized over and over while entries flow through it:
    /// nothing is lost, duplicated or reordered across the index wrap.
    #[test]
    fn random_resizes() {
        let mut rng = Rng(0x05EE_D0FC_0FFE);
        let esz = 64usize;
        let start = u32::MAX - 1023;
        let mut layout = RingLayout::new(8, esz as u32, 1 << 12).unwrap();
        let mut buf = cells(layout.bytes_total());
        layout.init_header(&CellRegion::new(&buf), start).unwrap();
        let mut p = Producer::new(layout, start);
        let mut c = Consumer::new(layout, start);
        let (mut written, mut read) = (0u64, 0u64);
        let mut out = std::vec![0u8; esz];
        for _ in 0..5_000 {
            let r = CellRegion::new(&buf);
            for _ in 0..rng.below(u64::from(layout.entries()) + 2) {
                match p.push(&r, &entry(written, esz)) {
                    Ok(()) => written += 1,
                    Err(RingError::Full) => break,
                    Err(e) => panic!("{e:?}"),
                }
            }
            for _ in 0..rng.below(u64::from(layout.entries()) + 2) {
                if !c.pop(&r, &mut out).unwrap() {
                    break;
                }
                assert_eq!(out, entry(read, esz));
                read += 1;
            }
            if rng.below(3) == 0 {
                let n = 1u32 << rng.below(9);
                let nl = RingLayout::new(n, esz as u32, 1 << 12).unwrap();
                let nb = cells(nl.bytes_total());
                match p.transfer(&r, nl, &CellRegion::new(&nb)) {
                    Ok(t) => {
                        assert_eq!(u64::from(t.count), written - read);
                        p = t.producer;
                        c = Consumer::new(nl, t.cons);
                        layout = nl;
                        buf = nb;
                    }
                    Err(RingError::Full) => assert!(written - read > u64::from(n)),
                    Err(e) => panic!("{e:?}"),
                }
            }
        }
        assert!(written > 5_000 && p.index().wrapping_sub(start) == written as u32);
        assert!(read > 4_000);
    }

    /// Producer and consumer alternate random batches; both sides check
    /// every entry; indices start just below the wrap.
    #[test]
    fn random_interleaving() {
        for (seed, entries, start) in [
            (1u64, 1u32, u32::MAX),
            (2, 2, u32::MAX - 1),
            (3, 8, u32::MAX - 100),
            (4, 64, u32::MAX - 1000),
            (5, 16, 0),
        ] {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            let esz = 64usize;
            let l = RingLayout::new(entries, esz as u32, 1 << 16).unwrap();
            let buf = cells(l.bytes_total());
            let r = CellRegion::new(&buf);
            l.init_header(&r, start).unwrap();
            let mut p = Producer::attach(l, &r).unwrap();
            let mut c = Consumer::attach(l, &r).unwrap();
            let (mut written, mut read) = (0u64, 0u64);
            let mut out = std::vec![0u8; esz];
            for _ in 0..20_000 {
                match rng.below(4) {
                    0 | 1 => {
                        for _ in 0..rng.below(u64::from(entries) + 2) {
                            match p.write_next(&r, &entry(written, esz)) {
                                Ok(()) => written += 1,
                                Err(RingError::Full) => break,
                                Err(e) => panic!("{e:?}"),
                            }
                        }
                        if rng.below(4) != 0 {
                            p.publish(&r).unwrap();
                        }
                    }
                    2 => {
                        for _ in 0..rng.below(u64::from(entries) + 2) {
                            if !c.read_next(&r, &mut out).unwrap() {
                                break;
                            }
                            assert_eq!(out, entry(read, esz));
                            read += 1;
                        }
                    }
                    _ => {
                        let n = rng.below(u64::from(c.unreleased()) + 1) as u32;
                        c.release(&r, n).unwrap();
                    }
                }
                let in_flight = written - read;
                assert!(in_flight <= u64::from(entries));
                assert_eq!(p.index(), start.wrapping_add(written as u32));
                assert_eq!(c.index(), start.wrapping_add(read as u32));
            }
            assert!(read > 1000, "too little progress: {read}");
        }
    }

    /// The other side writes random values into the index it owns between
    /// operations; nothing panics, and once an error is reported it sticks.
    #[test]
    fn fuzz_peer_indices() {
        let mut rng = Rng(0xDEAD_BEEF_CAFE_F00D);
        let l = RingLayout::new(8, 64, 8).unwrap();
        let buf = cells(l.bytes_total());
        let r = CellRegion::new(&buf);
        let mut out = [0u8; 64];
        for _ in 0..2_000 {
            let start = rng.next() as u32;
            l.init_header(&r, start).unwrap();
            let mut c = Consumer::new(l, start);
            let mut p = Producer::new(l, start);
            for _ in 0..20 {
                // Near-valid or wild values.
                let d = if rng.below(2) == 0 {
                    rng.below(12) as u32
                } else {
                    rng.next() as u32
                };
                r.store_u32_release(PROD_OFFSET, c.released().wrapping_add(d));
                match c.pop(&r, &mut out) {
                    Ok(_) => {}
                    Err(e) => {
                        assert_eq!(e, RingError::InvalidIndex);
                        assert_eq!(c.peek(&r), Err(e));
                    }
                }
                let d = rng.next() as u32 % 16;
                r.store_u32_release(CONS_OFFSET, p.index().wrapping_sub(d));
                match p.push(&r, &out) {
                    Ok(()) | Err(RingError::Full) => {}
                    Err(e) => {
                        assert_eq!(e, RingError::InvalidIndex);
                        assert_eq!(p.is_full(&r), Err(e));
                    }
                }
            }
        }
    }

    #[test]
    fn atomic_region_bytes() {
        let words: Vec<AtomicU32> = (0..16).map(|_| AtomicU32::new(0)).collect();
        let r = AtomicRegion::new(&words);
        assert_eq!(r.len(), 64);
        let mut reference = [0u8; 64];
        let mut rng = Rng(77);
        for _ in 0..2_000 {
            let off = rng.below(70) as usize;
            let len = rng.below(20) as usize;
            let src: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let ok = r.write(off, &src);
            assert_eq!(ok, off + len <= 64);
            if ok {
                reference[off..off + len].copy_from_slice(&src);
            }
            let mut dst = std::vec![0u8; len];
            assert_eq!(r.read(off, &mut dst), ok);
            if ok {
                assert_eq!(dst, src);
            }
            let mut all = [0u8; 64];
            assert!(r.read(0, &mut all));
            assert_eq!(all, reference);
        }
        assert_eq!(r.load_u32_acquire(2), None);
        assert_eq!(r.load_u32_acquire(64), None);
        assert!(!r.store_u32_release(62, 1));
        assert!(r.store_u32_release(60, 0x0102_0304));
        assert_eq!(r.load_u32_acquire(60), Some(0x0102_0304));
        assert!(!r.read(usize::MAX, &mut [0u8; 2]));
        assert!(!r.write(usize::MAX - 1, &[0u8; 4]));
        let cb = cells(8);
        let cr = CellRegion::new(&cb);
        assert_eq!(cr.load_u32_acquire(1), None);
        assert!(!cr.store_u32_release(2, 0));
        assert!(!cr.read(usize::MAX, &mut [0u8; 1]));
    }

    /// Real threads over atomics: the acquire/release protocol transfers
    /// every entry intact.
    #[test]
    fn threaded_spsc() {
        const N: u64 = 100_000;
        let l = RingLayout::new(16, 64, 16).unwrap();
        let words: Vec<AtomicU32> = (0..l.bytes_total() / 4)
            .map(|_| AtomicU32::new(0))
            .collect();
        let r = AtomicRegion::new(&words);
        l.init_header(&r, u32::MAX - 50_000).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut p = Producer::attach(l, &r).unwrap();
                let mut seq = 0u64;
                while seq < N {
                    match p.push(&r, &entry(seq, 64)) {
                        Ok(()) => seq += 1,
                        Err(RingError::Full) => std::thread::yield_now(),
                        Err(e) => panic!("{e:?}"),
                    }
                }
            });
            s.spawn(|| {
                let mut c = Consumer::attach(l, &r).unwrap();
                let mut seq = 0u64;
                let mut out = [0u8; 64];
                while seq < N {
                    if c.pop(&r, &mut out).unwrap() {
                        assert_eq!(out.to_vec(), entry(seq, 64));
                        seq += 1;
                    } else {
                        std::thread::yield_now();
                    }
                }
            });
        });
    }
}
