// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Memory the application hands to a verb: scatter/gather lists and the
//! buffers of inline sends.
//!
//! The verbs API promises that `sg_list` holds `num_sge` SGEs and that the
//! buffers of an inline request are readable while the call runs.  The
//! constructors here are `unsafe` and take that promise; what they return
//! can then be used by safe code, which never sees the raw pointers.

use core::ffi::{c_int, c_void};
use core::ptr;

use super::abi::{IbvDataBuf, IbvSge, EINVAL};
use super::alloc::BufVec;

/// The SGEs of a work request, borrowed from the application: `EINVAL`
/// for a negative count, more than `max` SGEs or a NULL list with SGEs.
/// The count is checked before the list is touched.
///
/// # Safety
///
/// If `num_sge` is positive and at most `max`, `sg_list` must point at
/// `num_sge` SGEs that stay valid and unchanged for `'a`.
pub(crate) unsafe fn sge_list<'a>(
    sg_list: *const IbvSge,
    num_sge: c_int,
    max: u16,
) -> Result<&'a [IbvSge], c_int> {
    let n = usize::try_from(num_sge).map_err(|_| EINVAL)?;
    if n > usize::from(max) || (n > 0 && sg_list.is_null()) {
        return Err(EINVAL);
    }
    if n == 0 {
        return Ok(&[]);
    }
    // SAFETY: per the contract `sg_list` holds `n` SGEs for `'a`.
    Ok(unsafe { core::slice::from_raw_parts(sg_list, n) })
}

/// The buffer list of `wr_set_inline_data_list`: `EINVAL` for a NULL list
/// with entries.
///
/// # Safety
///
/// If `num_buf` is positive, `list` must point at `num_buf` buffers that
/// stay valid for `'a`.
pub(crate) unsafe fn buf_list<'a>(
    list: *const IbvDataBuf,
    num_buf: usize,
) -> Result<&'a [IbvDataBuf], c_int> {
    if num_buf == 0 {
        return Ok(&[]);
    }
    if list.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: per the contract `list` holds `num_buf` entries for `'a`.
    Ok(unsafe { core::slice::from_raw_parts(list, num_buf) })
}

#[derive(Clone, Copy)]
enum Bufs<'a> {
    Sges(&'a [IbvSge]),
    Bufs(&'a [IbvDataBuf]),
}

/// The application buffers of an inline request, at most `max` bytes in
/// all; [`InlineData::copy_into`] copies their bytes.
///
/// # Invariants
///
/// Every buffer with a non-zero length has a non-NULL address, is readable
/// for `'a`, and the lengths add up to no more than the `max` given to the
/// constructor.
#[derive(Clone, Copy)]
pub(crate) struct InlineData<'a> {
    bufs: Bufs<'a>,
    total: usize,
}

impl<'a> InlineData<'a> {
    /// The buffers an inline `post_send` request's SGEs describe: `EINVAL`
    /// if they hold more than `max` bytes or a NULL address with a length.
    ///
    /// # Safety
    ///
    /// Each SGE must describe application memory readable for `'a` (the
    /// verbs API's promise for `IBV_SEND_INLINE`) if the checks pass.
    pub(crate) unsafe fn from_sges(sges: &'a [IbvSge], max: u32) -> Result<Self, c_int> {
        let total = check(sges.iter().map(|s| (s.addr, u64::from(s.length))), max)?;
        // INVARIANT: checked above; readability per the contract.
        Ok(Self {
            bufs: Bufs::Sges(sges),
            total,
        })
    }

    /// The buffers of `wr_set_inline_data(_list)`, with the same checks.
    ///
    /// # Safety
    ///
    /// As for [`InlineData::from_sges`].
    pub(crate) unsafe fn from_bufs(bufs: &'a [IbvDataBuf], max: u32) -> Result<Self, c_int> {
        let total = check(
            bufs.iter().map(|b| (b.addr.addr() as u64, b.length as u64)),
            max,
        )?;
        // INVARIANT: checked above; readability per the contract.
        Ok(Self {
            bufs: Bufs::Bufs(bufs),
            total,
        })
    }

    /// The number of bytes.
    pub(crate) const fn len(&self) -> usize {
        self.total
    }

    /// Replaces the contents of `out` with the bytes of the buffers;
    /// `EINVAL` (and `out` holds a prefix) if they do not fit in its
    /// capacity.
    pub(crate) fn copy_into(&self, out: &mut BufVec<u8>) -> Result<(), c_int> {
        out.clear();
        let mut each = |addr: *const c_void, len: usize| {
            if len == 0 {
                return Ok(());
            }
            // SAFETY: the type invariant: a buffer with a length is
            // non-NULL and readable for `'a`.
            let bytes = unsafe { core::slice::from_raw_parts(addr.cast::<u8>(), len) };
            out.extend_from_slice(bytes)
        };
        match self.bufs {
            Bufs::Sges(s) => s.iter().try_for_each(|s| {
                each(
                    ptr::with_exposed_provenance(s.addr as usize),
                    s.length as usize,
                )
            }),
            Bufs::Bufs(b) => b
                .iter()
                .try_for_each(|b| each(b.addr.cast_const(), b.length)),
        }
    }
}

/// The total length of `(addr, len)` buffers if it is at most `max` and no
/// buffer with a length has address 0 or lies beyond the address space.
fn check(bufs: impl Iterator<Item = (u64, u64)>, max: u32) -> Result<usize, c_int> {
    let mut total: u64 = 0;
    for (addr, len) in bufs {
        total = total.checked_add(len).ok_or(EINVAL)?;
        if total > u64::from(max) {
            return Err(EINVAL);
        }
        if len > 0 && (addr == 0 || usize::try_from(addr).is_err()) {
            return Err(EINVAL);
        }
    }
    usize::try_from(total).map_err(|_| EINVAL)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sge(data: &[u8]) -> IbvSge {
        IbvSge {
            addr: data.as_ptr().expose_provenance() as u64,
            length: data.len() as u32,
            lkey: 0,
        }
    }

    #[test]
    fn inline_gathers_in_order_and_checks_the_limit() {
        let (a, b) = (*b"hello", *b" world");
        let sges = [sge(&a), sge(&b[..0]), sge(&b)];
        let mut out = BufVec::with_capacity(11, &crate::ffi::Source::Heap).unwrap();
        out.push(9).unwrap();
        // SAFETY: the SGEs describe the live locals `a` and `b`.
        let d = unsafe { InlineData::from_sges(&sges, 11) }.unwrap();
        d.copy_into(&mut out).unwrap();
        assert_eq!(&*out, b"hello world");
        assert_eq!(d.len(), 11);
        // SAFETY: as above (refused before anything is read).
        assert!(unsafe { InlineData::from_sges(&sges, 10) }.is_err());
        let null = [IbvSge {
            addr: 0,
            length: 1,
            lkey: 0,
        }];
        // SAFETY: refused before anything is read.
        let refused = unsafe { InlineData::from_sges(&null, 9) };
        assert_eq!(refused.err(), Some(EINVAL));
        let bufs = [IbvDataBuf {
            addr: a.as_ptr().cast_mut().cast(),
            length: 5,
        }];
        // SAFETY: describes the live local `a`.
        unsafe { InlineData::from_bufs(&bufs, 5) }
            .unwrap()
            .copy_into(&mut out)
            .unwrap();
        assert_eq!(&*out, b"hello");
        // More than the capacity: refused.
        let mut small = BufVec::with_capacity(4, &crate::ffi::Source::Heap).unwrap();
        // SAFETY: describes the live local `a`.
        let five = unsafe { InlineData::from_bufs(&bufs, 5) }.unwrap();
        assert_eq!(five.copy_into(&mut small), Err(EINVAL));
    }

    #[test]
    fn sge_list_counts_before_touching() {
        // SAFETY: each is refused before the (dangling or NULL) list is read.
        let refused = unsafe {
            [
                sge_list(ptr::dangling(), 3, 2),
                sge_list(ptr::dangling(), -1, 2),
                sge_list(ptr::null(), 1, 2),
            ]
        };
        assert!(refused.iter().all(|r| r.err() == Some(EINVAL)));
        // SAFETY: no SGEs: nothing is read.
        assert!(unsafe { sge_list(ptr::null(), 0, 2) }.unwrap().is_empty());
        let one = [IbvSge::default()];
        // SAFETY: one live SGE.
        assert_eq!(unsafe { sge_list(one.as_ptr(), 1, 1) }.unwrap().len(), 1);
    }
}
