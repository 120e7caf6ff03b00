// SPDX-License-Identifier: GPL-2.0
//! Memory regions: the `ib_device_ops` entry points and the object around
//! the driver's part.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! Unlike PDs, CQs and QPs, memory regions are allocated by the driver:
//! `reg_user_mr`, `rereg_user_mr`, `get_dma_mr` and `alloc_mr` return an
//! `ib_mr` the driver allocated, which ib_core fills in further and hands
//! back to `dereg_mr`.  Here that allocation is a `KBox` of an `ib_mr`
//! followed by the driver's part ([`MrOps`]).  The driver builds its part,
//! the layer allocates the object, then the driver publishes the part
//! ([`MrOps::publish`]) — nothing can fail after that — and the layer
//! writes the keys and shape it reports into the `ib_mr`.
//!
//! ib_core keeps writing its part of the object (`ib_map_mr_sg` sets
//! `iova`, `length` and `page_size`; `ib_update_fast_reg_key` the keys),
//! so no reference to it is formed: only to the driver's part, and single
//! fields are read through [`MrRef::mapping`].

use core::marker::PhantomData;
use core::ptr::NonNull;
use kernel::bindings;
use kernel::ffi::{c_int, c_uint};
use kernel::prelude::*;
use kernel::types::Opaque;

use crate::ib::device::Device;
use crate::ib::umem::KernelMem;
use crate::ib::PdId;

/// What ib_core's `ib_mr` of a newly published region shows.
pub(crate) struct MrInit {
    /// The L_Key and R_Key (rroce uses one key for both).
    pub(crate) key: u32,
    /// First I/O virtual address.
    pub(crate) iova: u64,
    pub(crate) length: u64,
    pub(crate) page_size: u32,
}

/// A user region to register: `length` bytes at user address `start`,
/// whose first byte has I/O virtual address `iova`.
#[derive(Clone, Copy)]
pub(crate) struct UserRange {
    pub(crate) start: u64,
    pub(crate) length: u64,
    pub(crate) iova: u64,
}

/// What `rereg_user_mr` asks for.
pub(crate) struct Rereg {
    /// `IB_MR_REREG_*`.
    pub(crate) flags: u32,
    /// The new range (`IB_MR_REREG_TRANS`).
    pub(crate) range: UserRange,
    /// The new access flags (`IB_MR_REREG_ACCESS`).
    pub(crate) access: c_int,
    /// The PD of the new region (`None`: ib_core passed none).
    pub(crate) pd: Option<PdId>,
}

/// The mapping `ib_map_mr_sg` left in a fast-registration MR.
pub(crate) struct Mapping {
    pub(crate) iova: u64,
    pub(crate) length: u64,
    pub(crate) page_size: u32,
}

/// A driver's memory regions.
pub(crate) trait MrOps: Sized + Send + Sync + 'static {
    /// The driver's device data.
    type Dev;

    /// `reg_user_mr`: a region over user memory in `pd`, not published.
    fn reg_user(dev: &Device<Self::Dev>, pd: PdId, range: UserRange, access: c_int) -> Result<Self>;

    /// `rereg_user_mr`: a new region to replace `self` (ib_core then
    /// deregisters `self`), not published.
    fn rereg_user(&self, dev: &Device<Self::Dev>, req: &Rereg) -> Result<Self>;

    /// `get_dma_mr`: a region over the kernel's memory (`mem`), not
    /// published.
    fn dma(dev: &Device<Self::Dev>, pd: PdId, access: c_int, mem: KernelMem) -> Result<Self>;

    /// `alloc_mr`: a fast-registration region for up to `max_num_sg`
    /// pages of kernel memory (`mem`), not published.
    fn fast_reg(
        dev: &Device<Self::Dev>,
        pd: PdId,
        mr_type: bindings::ib_mr_type,
        max_num_sg: u32,
        mem: KernelMem,
    ) -> Result<Self>;

    /// Makes a region reachable by its key — in place of `replacing` for a
    /// re-registration — and says what the `ib_mr` shows.  On failure the
    /// region is dropped.
    fn publish(&self, dev: &Device<Self::Dev>, replacing: Option<&Self>) -> Result<MrInit>;

    /// `ib_map_mr_sg` starts: the page list is emptied (`EINVAL` if the
    /// region is no fast-registration region).
    fn map_begin(&self) -> Result;

    /// Appends a page (`ENOMEM` when the list is full).
    fn set_page(&self, addr: u64) -> Result;

    /// `dereg_mr`: unpublishes the region, which is dropped when this
    /// succeeds; on failure (`EBUSY`: windows are bound) it stays.
    fn dereg(&self, dev: &Device<Self::Dev>) -> Result;

    /// `advise_mr` (`ibv_advise_mr`): prefetch the on-demand paging pages
    /// behind `sges` (`IB_UVERBS_ADVISE_MR_ADVICE_*`), in `pd`.
    fn advise(dev: &Device<Self::Dev>, pd: PdId, advice: u32, flags: u32, sges: &[Prefetch]) -> Result;
}

/// One range of an `advise_mr` request: an SGE.
#[derive(Clone, Copy)]
pub(crate) struct Prefetch {
    pub(crate) addr: u64,
    pub(crate) length: u32,
    pub(crate) lkey: u32,
}

/// SGEs one `advise_mr` call takes (ib_uverbs caps them far lower).
const MAX_ADVISE_SGES: usize = 32;

/// The allocation behind an `ib_mr` of a driver whose regions are `T`.
///
/// # Invariants
///
/// Created by [`commit`] as a `KBox` handed to ib_core as its `ib_mr`, and
/// taken back by [`dereg_mr`]; `p` is published and initialised in
/// between.  No reference to `ib` is formed (ib_core writes it).
#[repr(C)]
struct MrObj<T> {
    ib: Opaque<bindings::ib_mr>,
    p: T,
}

impl<T> MrObj<T> {
    /// The driver's part of `ibmr`.
    ///
    /// # Safety
    ///
    /// `ibmr` is an MR of a device whose regions are `T` (created by this
    /// module's entry points), not deregistered while `'a` lasts.
    unsafe fn part<'a>(ibmr: *mut bindings::ib_mr) -> &'a T {
        // CAST: `ib` is the first field of a `repr(C)` `MrObj<T>`, and
        // `Opaque<ib_mr>` has the layout of `ib_mr`.
        let obj = ibmr.cast::<Self>();
        // SAFETY: per the requirements the object is live; only `p` is
        // borrowed.
        unsafe { &*core::ptr::addr_of!((*obj).p) }
    }
}

/// Allocates the object for `p`, publishes it (`replacing` for a
/// re-registration) and fills in ib_core's part.
fn commit<T: MrOps>(dev: &Device<T::Dev>, p: T, replacing: Option<&T>) -> Result<*mut bindings::ib_mr> {
    let obj = KBox::new(MrObj { ib: Opaque::new(bindings::ib_mr::default()), p }, GFP_KERNEL_ACCOUNT)?;
    // On failure `obj` (and the unpublished part) is dropped.
    let init = obj.p.publish(dev, replacing)?;
    let raw = KBox::into_raw(obj);
    // SAFETY: `raw` is the allocation just leaked, not yet given to
    // ib_core: nothing else accesses it.
    unsafe {
        let ib = (*raw).ib.get();
        (*ib).lkey = init.key;
        (*ib).rkey = init.key;
        (*ib).iova = init.iova;
        (*ib).length = init.length;
        (*ib).page_size = init.page_size;
        Ok(ib)
    }
}

/// `ib_device_ops::reg_user_mr`.
///
/// # Safety
///
/// ib_core's contract: `pd` is a live PD of one of the driver's devices.
pub(in crate::ib) unsafe extern "C" fn reg_user_mr<T: MrOps>(
    pd: *mut bindings::ib_pd,
    start: u64,
    length: u64,
    iova: u64,
    access: c_int,
    _udata: *mut bindings::ib_udata,
) -> *mut bindings::ib_mr {
    // SAFETY: `pd` is live and its device one of ours, live for the call.
    let dev = unsafe { Device::<T::Dev>::from_ib((*pd).device) };
    T::reg_user(dev, PdId::of(pd), UserRange { start, length, iova }, access)
        .and_then(|p| commit(dev, p, None))
        .unwrap_or_else(|e| e.to_ptr())
}

/// `ib_device_ops::rereg_user_mr`.
///
/// # Safety
///
/// ib_core's contract: `ibmr` is an MR of this driver (held for writing
/// by ib_core for the call), `pd` null or a live PD of its device.
#[allow(clippy::too_many_arguments)]
pub(in crate::ib) unsafe extern "C" fn rereg_user_mr<T: MrOps>(
    ibmr: *mut bindings::ib_mr,
    flags: c_int,
    start: u64,
    length: u64,
    iova: u64,
    access: c_int,
    pd: *mut bindings::ib_pd,
    _udata: *mut bindings::ib_udata,
) -> *mut bindings::ib_mr {
    // SAFETY: per the contract `ibmr` is one of ours for the call, and its
    // device (set by ib_core) outlives it.
    let (old, dev) = unsafe { (MrObj::<T>::part(ibmr), Device::<T::Dev>::from_ib((*ibmr).device)) };
    if flags == 0 {
        // ib_uverbs drops IB_MR_REREG_PD when the PD is the region's own
        // and calls the driver anyway: nothing changes, and null tells
        // ib_core the region was "changed in place" (until 2026-12-07 this
        // gave EINVAL; found by review).
        return core::ptr::null_mut();
    }
    let req = Rereg {
        flags: flags as u32,
        range: UserRange { start, length, iova },
        access,
        pd: (!pd.is_null()).then(|| PdId::of(pd)),
    };
    old.rereg_user(dev, &req).and_then(|p| commit(dev, p, Some(old))).unwrap_or_else(|e| e.to_ptr())
}

/// `ib_device_ops::advise_mr`.
///
/// # Safety
///
/// ib_core's contract: `pd` is a live PD of one of the driver's devices;
/// `sg_list` holds `num_sge` SGEs.
pub(in crate::ib) unsafe extern "C" fn advise_mr<T: MrOps>(
    pd: *mut bindings::ib_pd,
    advice: bindings::ib_uverbs_advise_mr_advice,
    flags: u32,
    sg_list: *mut bindings::ib_sge,
    num_sge: u32,
    _attrs: *mut bindings::uverbs_attr_bundle,
) -> c_int {
    let n = num_sge as usize;
    if n == 0 || n > MAX_ADVISE_SGES || sg_list.is_null() {
        return EINVAL.to_errno();
    }
    let mut sges = [Prefetch { addr: 0, length: 0, lkey: 0 }; MAX_ADVISE_SGES];
    for (i, d) in sges.iter_mut().take(n).enumerate() {
        // SAFETY: `sg_list` holds `num_sge` SGEs (contract), `i` below it.
        let sge = unsafe { &*sg_list.add(i) };
        *d = Prefetch { addr: sge.addr, length: sge.length, lkey: sge.lkey };
    }
    // SAFETY: as for `reg_user_mr`.
    let dev = unsafe { Device::<T::Dev>::from_ib((*pd).device) };
    match T::advise(dev, PdId::of(pd), advice, flags, &sges[..n]) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// `ib_device_ops::get_dma_mr`.
///
/// # Safety
///
/// ib_core's contract: `pd` is a live PD of one of the driver's devices.
pub(in crate::ib) unsafe extern "C" fn get_dma_mr<T: MrOps>(pd: *mut bindings::ib_pd, access: c_int) -> *mut bindings::ib_mr {
    // SAFETY: as for `reg_user_mr`.
    let dev = unsafe { Device::<T::Dev>::from_ib((*pd).device) };
    // Only kernel consumers reach this verb (`KernelMem`'s invariant).
    T::dma(dev, PdId::of(pd), access, KernelMem::new())
        .and_then(|p| commit(dev, p, None))
        .unwrap_or_else(|e| e.to_ptr())
}

/// `ib_device_ops::alloc_mr`.
///
/// # Safety
///
/// ib_core's contract: `pd` is a live PD of one of the driver's devices.
pub(in crate::ib) unsafe extern "C" fn alloc_mr<T: MrOps>(
    pd: *mut bindings::ib_pd,
    mr_type: bindings::ib_mr_type,
    max_num_sg: u32,
) -> *mut bindings::ib_mr {
    // SAFETY: as for `reg_user_mr`.
    let dev = unsafe { Device::<T::Dev>::from_ib((*pd).device) };
    // Only kernel consumers reach this verb (`KernelMem`'s invariant).
    T::fast_reg(dev, PdId::of(pd), mr_type, max_num_sg, KernelMem::new())
        .and_then(|p| commit(dev, p, None))
        .unwrap_or_else(|e| e.to_ptr())
}

/// The `set_page` callback of `ib_sg_to_pages`.
///
/// # Safety
///
/// `ibmr` is an MR of this driver with regions `T`, being mapped by
/// [`map_mr_sg::<T>`].
unsafe extern "C" fn set_page<T: MrOps>(ibmr: *mut bindings::ib_mr, addr: u64) -> c_int {
    // SAFETY: per the requirements.
    match unsafe { MrObj::<T>::part(ibmr) }.set_page(addr) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// `ib_device_ops::map_mr_sg`.
///
/// # Safety
///
/// ib_core's contract: `ibmr` is an MR of this driver, `sg` a DMA-mapped
/// list of `sg_nents` entries, `sg_offset` null or valid; the consumer does
/// not map the MR concurrently.
pub(in crate::ib) unsafe extern "C" fn map_mr_sg<T: MrOps>(
    ibmr: *mut bindings::ib_mr,
    sg: *mut bindings::scatterlist,
    sg_nents: c_int,
    sg_offset: *mut c_uint,
) -> c_int {
    // SAFETY: per the contract.
    if let Err(e) = unsafe { MrObj::<T>::part(ibmr) }.map_begin() {
        return e.to_errno();
    }
    // SAFETY: per the contract; `set_page::<T>` matches the MR's type.
    unsafe { bindings::ib_sg_to_pages(ibmr, sg, sg_nents, sg_offset, Some(set_page::<T>)) }
}

/// `ib_device_ops::dereg_mr`.
///
/// # Safety
///
/// ib_core's contract: `ibmr` is an MR of this driver; when this returns 0
/// it is gone.
pub(in crate::ib) unsafe extern "C" fn dereg_mr<T: MrOps>(ibmr: *mut bindings::ib_mr, _udata: *mut bindings::ib_udata) -> c_int {
    // SAFETY: per the contract; its device outlives it.
    let (p, dev) = unsafe { (MrObj::<T>::part(ibmr), Device::<T::Dev>::from_ib((*ibmr).device)) };
    if let Err(e) = p.dereg(dev) {
        return e.to_errno();
    }
    // SAFETY: the allocation came from `commit` (type invariant), and the
    // part is unpublished: this is its one release.
    drop(unsafe { KBox::from_raw(ibmr.cast::<MrObj<T>>()) });
    0
}

/// A region named by a kernel work request (`IB_WR_REG_MR`), alive for
/// `'a`.
///
/// # Invariants
///
/// `self.0` is a live MR of this driver whose part is `T`, not
/// deregistered and not mapped concurrently while `'a` lasts.
pub(crate) struct MrRef<'a, T>(NonNull<bindings::ib_mr>, PhantomData<&'a T>);

impl<T> Clone for MrRef<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for MrRef<'_, T> {}

impl<'a, T> MrRef<'a, T> {
    /// The reference of `mr`.
    ///
    /// # Safety
    ///
    /// As the type invariant.
    pub(crate) unsafe fn from_raw(mr: NonNull<bindings::ib_mr>) -> Self {
        // INVARIANT: per the requirements.
        Self(mr, PhantomData)
    }

    /// The driver's part.
    pub(crate) fn get(&self) -> &'a T {
        // SAFETY: live for `'a` (type invariant).
        unsafe { MrObj::<T>::part(self.0.as_ptr()) }
    }

    /// What the last `ib_map_mr_sg` set.
    pub(crate) fn mapping(&self) -> Mapping {
        let mr = self.0.as_ptr();
        // SAFETY: live (type invariant); single fields are read, which the
        // consumer does not change concurrently (its contract).
        unsafe { Mapping { iova: (*mr).iova, length: (*mr).length, page_size: (*mr).page_size } }
    }
}
