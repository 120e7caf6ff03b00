// SPDX-License-Identifier: GPL-2.0
//! Synchronisation and collections (part of the abstraction layer).
//!
//! Locks that the 6.12 `kernel::sync` lacks (`_bh` and `_irqsave`
//! spinlocks), RCU (read-side guards, values freed after a grace period),
//! the RCU-readable id tables over an allocating xarray, and small `KVec`
//! helpers.  Like the rest of the layer (`ib`, `net`, `ffi`)
//! this is the only kind of code in the driver that may use `unsafe`; the
//! modules above it are `#![forbid(unsafe_code)]` and reach the kernel
//! through these types.  The layer never imports a module above it.

pub(crate) mod global;
pub(crate) mod idtable;
pub(crate) mod kvec;
pub(crate) mod lock;
pub(crate) mod percpu;
pub(crate) mod rcu;
pub(crate) mod timer;

/// A full memory barrier (`smp_mb`).
pub(crate) fn smp_mb() {
    // SAFETY: a plain barrier, no memory is accessed.
    unsafe { crate::ffi::rroce_smp_mb() };
}

/// A random byte (`get_random_u8`).  Any context.
pub(crate) fn random_u8() -> u8 {
    // SAFETY: `get_random_u8` may be called in any context.
    unsafe { kernel::bindings::get_random_u8() }
}

/// Sleeps for at least `ms` milliseconds (`msleep`).  Process context.
pub(crate) fn msleep(ms: u32) {
    // SAFETY: callers are in process context (the function's contract).
    unsafe { kernel::bindings::msleep(ms) };
}

/// Warns (with the debug options that check it) if the caller may not
/// sleep (`might_sleep`).
pub(crate) fn might_sleep() {
    // SAFETY: a check without side effects on the caller's state.
    unsafe { crate::ffi::rroce_might_sleep() };
}
