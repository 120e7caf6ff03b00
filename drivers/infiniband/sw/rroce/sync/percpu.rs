// SPDX-License-Identifier: GPL-2.0
//! Per-CPU event counters.
//!
//! C header: [`include/linux/percpu.h`](srctree/include/linux/percpu.h)
//!
//! An array of `N` `u64` counters with one copy per possible CPU
//! (`alloc_percpu`).  Adding is `this_cpu_add` on the local copy: no
//! atomic read-modify-write and no cache line shared between CPUs, so a
//! counter bumped for every packet costs the same however many CPUs
//! receive for the device (device-wide atomics bounce one line between
//! them).  Reading sums the copies of every possible CPU, each read whole
//! (one aligned 8-byte load: this type is for 64-bit kernels); a sum read
//! while CPUs add counts some of the concurrent additions and not others.

use core::ptr::NonNull;
use kernel::bindings;
use kernel::prelude::*;

use crate::ffi;

/// `N` per-CPU `u64` counters.
///
/// # Invariants
///
/// `ptr` is the per-CPU address of an array of `N` `u64`, returned by
/// `rroce_alloc_percpu_u64(N, ..)` (zeroed) and freed only by `Drop`.  It
/// is never dereferenced itself: only through `this_cpu_add` and the
/// address `per_cpu_ptr` gives for a possible CPU.
pub(crate) struct PerCpuCounters<const N: usize> {
    ptr: NonNull<u64>,
}

// SAFETY: the counters are updated only by `this_cpu_add` (each CPU its
// own copy, preemption-safe) and read with single loads, from any thread.
unsafe impl<const N: usize> Send for PerCpuCounters<N> {}
// SAFETY: as for `Send`: `&self` methods are safe from any context.
unsafe impl<const N: usize> Sync for PerCpuCounters<N> {}

impl<const N: usize> PerCpuCounters<N> {
    /// Allocates the counters, all zero (`GFP_KERNEL`: process context,
    /// may sleep).
    pub(crate) fn new() -> Result<Self> {
        let n = u32::try_from(N).map_err(|_| EINVAL)?;
        // SAFETY: allocates `n` zeroed u64 per possible CPU; callers are in
        // process context (the function's contract).
        let p = unsafe { ffi::rroce_alloc_percpu_u64(n, bindings::GFP_KERNEL) };
        // INVARIANT: a fresh per-CPU array of `N` counters.
        Ok(Self { ptr: NonNull::new(p).ok_or(ENOMEM)? })
    }

    /// Adds `n` to counter `i` (ignored if `i >= N`).  Any context.
    pub(crate) fn add(&self, i: usize, n: u64) {
        if i < N {
            // SAFETY: `ptr + i` is the per-CPU address of counter `i` (type
            // invariant, `i < N`); `this_cpu_add` updates this CPU's copy
            // safely in any context.
            unsafe { ffi::rroce_this_cpu_add_u64(self.ptr.as_ptr().wrapping_add(i), n) };
        }
    }

    /// The sums over all CPUs of the first `out.len()` counters (at most
    /// `N`).  Any context.
    pub(crate) fn read(&self, out: &mut [u64]) {
        out.fill(0);
        let mut cpu = -1;
        loop {
            // SAFETY: walks `cpu_possible_mask`, no side effect.
            cpu = unsafe { ffi::rroce_next_possible_cpu(cpu) };
            // SAFETY: reads `nr_cpu_ids`, fixed before modules load.
            if cpu < 0 || cpu as u32 >= unsafe { ffi::rroce_nr_cpu_ids() } {
                break;
            }
            // SAFETY: `cpu` is a possible CPU, so this is the address of its
            // copy of the array, valid while `self` lives.
            let copy = unsafe { ffi::rroce_per_cpu_ptr_u64(self.ptr.as_ptr(), cpu) };
            for (i, o) in out.iter_mut().take(N).enumerate() {
                // SAFETY: counter `i < N` of that copy, aligned; a single
                // volatile load (`READ_ONCE`) while its CPU may add to it.
                *o = o.wrapping_add(unsafe { core::ptr::read_volatile(copy.add(i)) });
            }
        }
    }
}

impl<const N: usize> Drop for PerCpuCounters<N> {
    fn drop(&mut self) {
        // SAFETY: allocated by `alloc_percpu` (type invariant), freed once;
        // no other reference to it remains (`&mut self`).
        unsafe { bindings::free_percpu(self.ptr.as_ptr().cast()) };
    }
}
