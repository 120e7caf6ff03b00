// SPDX-License-Identifier: GPL-2.0
//! Small helpers missing from the 6.12 `kernel` crate.

use kernel::prelude::*;

/// Removes element `i` of `v`, moving the last element into its place
/// (`Vec::swap_remove`, which the 6.12 `KVec` lacks).  `None` if out of range.
pub(crate) fn swap_remove<T>(v: &mut KVec<T>, i: usize) -> Option<T> {
    let last = v.len().checked_sub(1)?;
    if i > last {
        return None;
    }
    v.as_mut_slice().swap(i, last);
    // SAFETY: `last < len`, so that slot is initialised; shrinking the length
    // first hands its ownership to us, and it is read exactly once.
    unsafe {
        v.set_len(last);
        Some(core::ptr::read(v.as_ptr().add(last)))
    }
}
