// SPDX-License-Identifier: GPL-2.0
//! Port counters (`hw_counters` in sysfs, `rdma statistic`): descriptors
//! and the `alloc_hw_port_stats` / `get_hw_stats` entry points.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use kernel::bindings;
use kernel::ffi::c_int;
use kernel::str::CStr;

use crate::ib::device::Device;

/// The descriptors of `N` counters, handed to ib_core (a `static`: they
/// must outlive every device).
pub(crate) struct StatDescs<const N: usize>([bindings::rdma_stat_desc; N]);

// SAFETY: the descriptors only point to `'static` C strings and are never
// written after construction.
unsafe impl<const N: usize> Sync for StatDescs<N> {}

impl<const N: usize> StatDescs<N> {
    /// Descriptors for counters named `names`, in order.
    pub(crate) const fn new(names: [&'static CStr; N]) -> Self {
        let mut d = [bindings::rdma_stat_desc { name: core::ptr::null(), flags: 0, priv_: core::ptr::null() }; N];
        let mut i = 0;
        while i < N {
            d[i].name = names[i].as_char_ptr();
            i += 1;
        }
        Self(d)
    }

    /// The descriptors.
    pub(crate) const fn as_slice(&'static self) -> &'static [bindings::rdma_stat_desc] {
        &self.0
    }
}

/// A driver's port counters.
pub(crate) trait HwStats {
    /// The driver's device data.
    type Dev;
    /// The counters' descriptors ([`StatDescs::as_slice`] of a `static`).
    const DESCS: &'static [bindings::rdma_stat_desc];
    /// Reads the current values of `dev`'s counters into `values` (one per
    /// descriptor).
    fn read(dev: &Device<Self::Dev>, values: &mut [u64]);
}

/// `ib_device_ops::alloc_hw_port_stats`.
///
/// # Safety
///
/// ib_core's contract.
pub(in crate::ib) unsafe extern "C" fn alloc_hw_port_stats<T: HwStats>(
    _ib: *mut bindings::ib_device,
    _port: u32,
) -> *mut bindings::rdma_hw_stats {
    let n = T::DESCS.len() as c_int;
    // SAFETY: `'static` descriptors; ib_core frees the result.
    unsafe { bindings::rdma_alloc_hw_stats_struct(T::DESCS.as_ptr(), n, 0) }
}

/// `ib_device_ops::get_hw_stats`.
///
/// # Safety
///
/// ib_core's contract: `ib` is a registered device of ours, `stats` came
/// from [`alloc_hw_port_stats`].
pub(in crate::ib) unsafe extern "C" fn get_hw_stats<T: HwStats>(
    ib: *mut bindings::ib_device,
    stats: *mut bindings::rdma_hw_stats,
    _port: u32,
    _index: c_int,
) -> c_int {
    let n = T::DESCS.len();
    // SAFETY: a registered device of ours, live for the call.
    let dev = unsafe { Device::<T::Dev>::from_ib(ib) };
    // SAFETY: `stats` came from `alloc_hw_port_stats::<T>`, so it has a
    // value for each descriptor, and it is ours for the call.
    let values = unsafe { (*stats).value.as_mut_slice(n) };
    T::read(dev, values);
    n as c_int
}
