// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! The provider's own per-object buffers, from a parent domain's allocator
//! or from the heap: [`ProviderBuf`] (a fixed-size zeroed slice) and
//! [`BufVec`] (a fixed-capacity vector on top of one).
//!
//! Which memory this is: the scratch space of each work queue, i.e. per
//! SQ, RQ and SRQ the staging entry (one WQE, built and checked before it
//! is copied into the ring), the SGE list of the request being encoded
//! and, for an SQ, its inline data.  The rings themselves are kernel
//! memory mapped from the uverbs fd (`RingMap`), never the application's;
//! the provider objects libibverbs sees (`verbs_qp`, `ibv_cq_ex`, ...) are
//! the provider's heap objects, as on every provider.
//!
//! A parent domain's allocator ([`Allocator`], `ibv_alloc_parent_domain`'s
//! `alloc`/`free`) is asked for each such buffer of a QP or SRQ created on
//! that parent domain, with its size, [`BUF_ALIGN`] and the resource type
//! ([`RES_TYPE_QP`], [`RES_TYPE_SRQ`]).  `IBV_ALLOCATOR_USE_DEFAULT` gives
//! a heap buffer instead; NULL fails the creation with `ENOMEM`.  The
//! provider zeroes what it gets (the man page asks the allocator to, but
//! `posix_memalign`-based ones do not) and gives it back to `free` when
//! the object is destroyed.  Empty buffers (an RQ's inline data) are never
//! allocated.

use core::ffi::{c_int, c_void};
use core::mem::{align_of, size_of};
use core::ops::{Deref, DerefMut};
use core::ptr::NonNull;
use std::alloc::Layout;
use std::sync::Arc;

use super::abi::{
    IbvPd, ParentAllocFn, ParentFreeFn, EINVAL, ENOMEM, IBV_ALLOCATOR_USE_DEFAULT,
    RDMA_DRIVER_UNKNOWN,
};
use super::opaque::Zeroable;

/// `resource_type` of a QP's buffers: 1.  As ibv_alloc_parent_domain(3)
/// describes, the upper 32 bits are the `rdma_driver_id` (rroce has none:
/// `RDMA_DRIVER_UNKNOWN`, 0), the lower ones a provider code; the codes
/// are mlx5dv's (`MLX5DV_RES_TYPE_QP` 1, `_SRQ` 4; its `_CQ`, 5, stays
/// unused: a CQ has no buffer of the provider's own, its ring is kernel
/// memory and a completion is decoded on the stack).
pub(crate) const RES_TYPE_QP: u64 = ((RDMA_DRIVER_UNKNOWN as u64) << 32) | 1;
/// `resource_type` of an SRQ's buffers: 4.
pub(crate) const RES_TYPE_SRQ: u64 = ((RDMA_DRIVER_UNKNOWN as u64) << 32) | 4;

/// The alignment the provider asks for (a cache line), also of its heap
/// buffers.
pub(crate) const BUF_ALIGN: usize = 64;

/// A parent domain's `alloc`/`free` and their `pd_context`.
///
/// # Invariants
///
/// `alloc` and `free` behave as ibv_alloc_parent_domain(3) specifies, from
/// any thread (see [`Allocator::new`]).
pub(crate) struct Allocator {
    alloc: ParentAllocFn,
    free: ParentFreeFn,
    pd_context: *mut c_void,
}

// SAFETY: `pd_context` is only passed back to the callbacks, which may be
// called from any thread (the type invariant); Rust never reads it.
unsafe impl Send for Allocator {}
// SAFETY: as above; the struct is immutable.
unsafe impl Sync for Allocator {}

impl Allocator {
    /// The allocator of a parent domain.
    ///
    /// # Safety
    ///
    /// For any thread and any `pd`, `alloc(pd, pd_context, size,
    /// alignment, resource_type)` must return NULL,
    /// `IBV_ALLOCATOR_USE_DEFAULT` or the address of `size` readable and
    /// writable bytes that nobody else uses until they are passed (once)
    /// to `free(pd, pd_context, ptr, resource_type)`; the verbs API's
    /// contract for these callbacks.
    pub(crate) unsafe fn new(
        alloc: ParentAllocFn,
        free: ParentFreeFn,
        pd_context: *mut c_void,
    ) -> Self {
        // INVARIANT: per the contract.
        Self {
            alloc,
            free,
            pd_context,
        }
    }

    /// An allocator that always answers `IBV_ALLOCATOR_USE_DEFAULT`, for
    /// the safe modules' unit tests.
    #[cfg(test)]
    pub(crate) fn use_default() -> Self {
        unsafe extern "C" fn alloc(
            _: *mut IbvPd,
            _: *mut c_void,
            _: usize,
            _: usize,
            _: u64,
        ) -> *mut c_void {
            IBV_ALLOCATOR_USE_DEFAULT
        }
        unsafe extern "C" fn free(_: *mut IbvPd, _: *mut c_void, _: *mut c_void, _: u64) {}
        // SAFETY: `alloc` never hands out memory.
        unsafe { Self::new(alloc, free, core::ptr::null_mut()) }
    }
}

/// Where the buffers of a new object come from.
#[derive(Clone)]
pub(crate) enum Source {
    /// The provider's heap.
    Heap,
    /// A parent domain's allocator; `pd` (the parent domain's `ibv_pd`) is
    /// only passed back to the callbacks.
    Domain {
        allocator: Arc<Allocator>,
        pd: *mut IbvPd,
        resource_type: u64,
    },
}

/// Who owns a [`ProviderBuf`]'s memory.
enum Origin {
    /// Nothing allocated (no elements).
    Empty,
    /// `std::alloc::alloc` with this layout.
    Heap(Layout),
    /// A parent domain's allocator, which gets it back on drop.
    Domain {
        allocator: Arc<Allocator>,
        pd: *mut IbvPd,
        resource_type: u64,
    },
}

/// A fixed number of zero-initialised `T`s owned by the provider, from
/// the heap or a parent domain's allocator; read and written as a slice.
///
/// # Invariants
///
/// `ptr` is aligned for `T` and points at `len` initialised `T`s that
/// only this buffer uses, allocated as `origin` says (dangling if `len` is
/// 0, with `origin` `Empty`).
pub(crate) struct ProviderBuf<T: Zeroable + Copy> {
    ptr: NonNull<T>,
    len: usize,
    origin: Origin,
}

// SAFETY: the buffer owns its elements exclusively (type invariant), and
// the allocator's `free` may run on any thread.
unsafe impl<T: Zeroable + Copy + Send> Send for ProviderBuf<T> {}
// SAFETY: a shared reference only reads the elements.
unsafe impl<T: Zeroable + Copy + Sync> Sync for ProviderBuf<T> {}

impl<T: Zeroable + Copy> ProviderBuf<T> {
    /// `len` zeroed elements from `source`: `ENOMEM` if the allocation
    /// fails (the allocator returned NULL, the size overflows), `EINVAL`
    /// if the allocator returned memory not aligned for `T`.
    pub(crate) fn zeroed(len: usize, source: &Source) -> Result<Self, c_int> {
        let size = size_of::<T>().checked_mul(len).ok_or(ENOMEM)?;
        if size == 0 {
            // INVARIANT: nothing to allocate.
            return Ok(Self {
                ptr: NonNull::dangling(),
                len,
                origin: Origin::Empty,
            });
        }
        if let Source::Domain {
            allocator,
            pd,
            resource_type,
        } = source
        {
            let align = BUF_ALIGN.max(align_of::<T>());
            // SAFETY: calling the application's allocator as the verbs API
            // allows (the type invariant of `Allocator`).
            let p = unsafe {
                (allocator.alloc)(*pd, allocator.pd_context, size, align, *resource_type)
            };
            if p != IBV_ALLOCATOR_USE_DEFAULT {
                let origin = Origin::Domain {
                    allocator: Arc::clone(allocator),
                    pd: *pd,
                    resource_type: *resource_type,
                };
                return Self::take(p, len, size, origin);
            }
        }
        let layout =
            Layout::from_size_align(size, BUF_ALIGN.max(align_of::<T>())).map_err(|_| ENOMEM)?;
        // SAFETY: `layout` has a non-zero size.  (`take` zeroes it.)
        let p = unsafe { std::alloc::alloc(layout) };
        Self::take(p.cast(), len, size, Origin::Heap(layout))
    }

    /// Wraps `size` (non-zero) freshly allocated bytes at `p` (NULL: the
    /// allocation failed) as `len` zeroed `T`s.
    fn take(p: *mut c_void, len: usize, size: usize, origin: Origin) -> Result<Self, c_int> {
        let Some(ptr) = NonNull::new(p.cast::<T>()) else {
            return Err(ENOMEM);
        };
        // Built first, so that a refused block goes back to its owner.
        let buf = Self { ptr, len, origin };
        if !ptr.as_ptr().addr().is_multiple_of(align_of::<T>()) {
            return Err(EINVAL);
        }
        // SAFETY: `p` is the start of `size` writable bytes that only we
        // use (the allocator's contract, or std::alloc's); zero bytes are a
        // valid `T` (`T: Zeroable`), so afterwards all `len` are initialised.
        unsafe { ptr.as_ptr().cast::<u8>().write_bytes(0, size) };
        // INVARIANT: aligned (checked), initialised, exclusively ours.
        Ok(buf)
    }

    /// The elements.
    pub(crate) fn as_slice(&self) -> &[T] {
        // SAFETY: the type invariant; the borrow of `self` keeps them alive
        // and shared.
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The elements, for writing.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: the type invariant; the exclusive borrow of `self` makes
        // this the only reference.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Whether a parent domain's allocator provided the memory.
    #[cfg(test)]
    pub(crate) fn is_from_domain(&self) -> bool {
        matches!(self.origin, Origin::Domain { .. })
    }
}

impl<T: Zeroable + Copy> Drop for ProviderBuf<T> {
    fn drop(&mut self) {
        match &self.origin {
            Origin::Empty => {}
            // SAFETY: allocated by `std::alloc::alloc` with this layout.
            Origin::Heap(layout) => unsafe {
                std::alloc::dealloc(self.ptr.as_ptr().cast(), *layout)
            },
            Origin::Domain {
                allocator,
                pd,
                resource_type,
            } => {
                // SAFETY: the block came from this allocator's `alloc` with
                // the same `pd` and resource type and is given back once; no
                // reference into it outlives `self`.
                unsafe {
                    (allocator.free)(
                        *pd,
                        allocator.pd_context,
                        self.ptr.as_ptr().cast(),
                        *resource_type,
                    )
                }
            }
        }
    }
}

impl<T: Zeroable + Copy> Deref for ProviderBuf<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: Zeroable + Copy> DerefMut for ProviderBuf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

/// A vector of at most `capacity` elements in a [`ProviderBuf`]: the SGEs
/// and inline bytes of the request being encoded.  Dereferences to the
/// elements pushed so far.
pub(crate) struct BufVec<T: Zeroable + Copy> {
    buf: ProviderBuf<T>,
    len: usize,
}

impl<T: Zeroable + Copy> BufVec<T> {
    /// An empty vector with room for `capacity` elements from `source`.
    pub(crate) fn with_capacity(capacity: usize, source: &Source) -> Result<Self, c_int> {
        Ok(Self {
            buf: ProviderBuf::zeroed(capacity, source)?,
            len: 0,
        })
    }

    /// Removes every element.
    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }

    /// Appends `v`; `EINVAL` (nothing appended) if the vector is full.
    pub(crate) fn push(&mut self, v: T) -> Result<(), c_int> {
        let slot = self.buf.get_mut(self.len).ok_or(EINVAL)?;
        *slot = v;
        self.len += 1;
        Ok(())
    }

    /// Appends `src`; `EINVAL` (nothing appended) if it does not fit.
    pub(crate) fn extend_from_slice(&mut self, src: &[T]) -> Result<(), c_int> {
        let end = self.len.checked_add(src.len()).ok_or(EINVAL)?;
        self.buf
            .get_mut(self.len..end)
            .ok_or(EINVAL)?
            .copy_from_slice(src);
        self.len = end;
        Ok(())
    }
}

impl<T: Zeroable + Copy> Deref for BufVec<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        self.buf.get(..self.len).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::ptr;
    use std::sync::Mutex;

    /// What the test allocator saw: `(size, alignment, resource_type)` of
    /// each `alloc`, the addresses given to `free`.
    #[derive(Default)]
    struct Log {
        allocs: Vec<(usize, usize, u64)>,
        frees: Vec<usize>,
        /// What the next `alloc` does: 0 allocate, 1 USE_DEFAULT, 2 NULL,
        /// 3 a misaligned block.
        mode: u8,
    }

    unsafe extern "C" fn test_alloc(
        _pd: *mut IbvPd,
        ctx: *mut c_void,
        size: usize,
        align: usize,
        resource_type: u64,
    ) -> *mut c_void {
        // SAFETY: `ctx` is the live `Mutex<Log>` of the test.
        let log = unsafe { &*ctx.cast::<Mutex<Log>>() };
        let mut log = log.lock().unwrap();
        log.allocs.push((size, align, resource_type));
        match log.mode {
            1 => IBV_ALLOCATOR_USE_DEFAULT,
            2 => ptr::null_mut(),
            m => {
                let layout = Layout::from_size_align(size + 1, align).unwrap();
                // SAFETY: non-zero size; filled with garbage, which the
                // buffer must zero.  Leaked: a test.
                let p = unsafe { std::alloc::alloc(layout) };
                // SAFETY: `size + 1` bytes at `p`.
                unsafe { p.write_bytes(0xa5, size + 1) };
                p.wrapping_add(usize::from(m == 3)).cast()
            }
        }
    }

    unsafe extern "C" fn test_free(_pd: *mut IbvPd, ctx: *mut c_void, p: *mut c_void, _rt: u64) {
        // SAFETY: as in `test_alloc`.
        let log = unsafe { &*ctx.cast::<Mutex<Log>>() };
        log.lock().unwrap().frees.push(p.addr());
    }

    fn domain(log: &Mutex<Log>) -> Source {
        let ctx = ptr::from_ref(log).cast_mut().cast();
        Source::Domain {
            // SAFETY: the callbacks above keep the contract (the blocks
            // are leaked, not reused).
            allocator: Arc::new(unsafe { Allocator::new(test_alloc, test_free, ctx) }),
            pd: ptr::without_provenance_mut(0x1000),
            resource_type: RES_TYPE_QP,
        }
    }

    #[test]
    fn domain_buffers_are_zeroed_and_given_back() {
        let log = Mutex::new(Log::default());
        let src = domain(&log);
        let mut b = ProviderBuf::<u8>::zeroed(100, &src).unwrap();
        assert!(b.is_from_domain());
        assert!(b.iter().all(|&x| x == 0));
        b[99] = 7;
        let addr = b.as_ptr().addr();
        drop(b);
        let l = log.lock().unwrap();
        assert_eq!(l.allocs, [(100, BUF_ALIGN, RES_TYPE_QP)]);
        assert_eq!(l.frees, [addr]);
    }

    #[test]
    fn fallbacks_and_failures() {
        let log = Mutex::new(Log::default());
        let src = domain(&log);
        // Empty: the allocator is not asked.
        assert!(ProviderBuf::<u8>::zeroed(0, &src).unwrap().is_empty());
        assert!(log.lock().unwrap().allocs.is_empty());
        // USE_DEFAULT: a heap buffer, never given to `free`.
        log.lock().unwrap().mode = 1;
        let b = ProviderBuf::<rroce_proto::wqe::Sge>::zeroed(3, &src).unwrap();
        assert!(!b.is_from_domain() && b.len() == 3);
        drop(b);
        assert!(log.lock().unwrap().frees.is_empty());
        // NULL: ENOMEM.
        log.lock().unwrap().mode = 2;
        assert_eq!(ProviderBuf::<u8>::zeroed(8, &src).err(), Some(ENOMEM));
        // Misaligned for the type: EINVAL, and the block goes back.
        log.lock().unwrap().mode = 3;
        assert_eq!(
            ProviderBuf::<rroce_proto::wqe::Sge>::zeroed(2, &src).err(),
            Some(EINVAL)
        );
        assert_eq!(log.lock().unwrap().frees.len(), 1);
        // A byte buffer takes any alignment.
        assert!(ProviderBuf::<u8>::zeroed(8, &src).unwrap().is_from_domain());
        let l = log.lock().unwrap();
        let sizes: Vec<usize> = l.allocs.iter().map(|a| a.0).collect();
        assert_eq!(sizes, [48, 8, 32, 8]);
        assert!(l
            .allocs
            .iter()
            .all(|a| a.1 == BUF_ALIGN && a.2 == RES_TYPE_QP));
        assert_eq!(l.frees.len(), 2);
    }

    #[test]
    fn bufvec_is_bounded() {
        let mut v = BufVec::<u8>::with_capacity(4, &Source::Heap).unwrap();
        v.extend_from_slice(b"abc").unwrap();
        assert_eq!(v.extend_from_slice(b"de"), Err(EINVAL));
        v.push(b'd').unwrap();
        assert_eq!(v.push(b'e'), Err(EINVAL));
        assert_eq!(&*v, b"abcd");
        v.clear();
        assert!(v.is_empty());
        let mut empty = BufVec::<u8>::with_capacity(0, &Source::Heap).unwrap();
        assert_eq!(empty.push(1), Err(EINVAL));
        assert_eq!(empty.extend_from_slice(&[]), Ok(()));
    }
}
