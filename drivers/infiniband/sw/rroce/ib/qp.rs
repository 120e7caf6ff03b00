// SPDX-License-Identifier: GPL-2.0
//! Queue pairs: the `ib_device_ops` entry points, the object ib_core
//! allocates around the driver's part, the QP number table the receive
//! path finds QPs in, and what a QP's data path holds on to (its timer,
//! work item and asynchronous events).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! ib_core allocates `size_ib_qp` bytes; after `ib_qp` comes a [`QpCell`]:
//! the layer's state (a liveness flag, an embedded timer and work item)
//! and the driver's part ([`QpOps`]).  `create_qp` initialises the cell in
//! place, sets the timer and work item up, marks the QP live and only then
//! publishes it in the device's [`QpTable`], so the receive path never
//! finds a QP whose creation can still fail.  `destroy_qp` reverses that:
//! not live, unpublished, a grace period (receivers that found it are
//! done), the timer shut down, both work items disabled, then the driver's
//! part is dropped.

use core::marker::PhantomData;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::bindings;
use kernel::error::from_result;
use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::types::Opaque;

use crate::ffi;
use crate::ib::ah::RoceAttr;
use crate::ib::cq::CqHandle;
use crate::ib::device::Device;
use crate::ib::object::{self, CoreObject, NewObj, Obj};
use crate::ib::srq::SrqHandle;
use crate::ib::udata::UData;
use crate::ib::wr::{RecvWrChain, SendWrChain};
use crate::net::txgauge::TxGauge;
use crate::ib::PdId;
use crate::sync::idtable::IdTable;
use crate::sync::rcu::ReadGuard;
use crate::sync::timer::{QueueClaim, TimerRef, WorkQueue, WorkRef};

/// The event side of a created QP.
///
/// # Invariants
///
/// `self.0` is a QP whose creation completed (ib_core set its event
/// handler and context), alive for `'a`.
#[derive(Clone, Copy)]
pub(crate) struct QpEvents<'a>(NonNull<bindings::ib_qp>, PhantomData<&'a bindings::ib_qp>);

impl QpEvents<'_> {
    /// Raises the affiliated event `event`.  Call without driver locks.
    pub(crate) fn raise(&self, event: bindings::ib_event_type) {
        let qp = self.0.as_ptr();
        // SAFETY: alive (type invariant); ib_core set these fields when
        // creating the QP and does not change them.
        let (handler, device, context) = unsafe { ((*qp).event_handler, (*qp).device, (*qp).qp_context) };
        if let Some(h) = handler {
            let mut ev = bindings::ib_event { device, event, ..Default::default() };
            ev.element.qp = qp;
            // SAFETY: the consumer's handler and context, as registered.
            unsafe { h(&mut ev, context) };
        }
    }
}

/// What a QP is created with.
pub(crate) struct QpCreate<'a, T: QpOps> {
    /// ib_core's request; the driver writes the capacities it allocated
    /// into `cap`.  Its pointers are resolved into the fields below.
    pub(crate) init: &'a mut bindings::ib_qp_init_attr,
    /// The protection domain.
    pub(crate) pd: PdId,
    /// The CQs (ib_core holds a use count on each for the QP).
    pub(crate) send_cq: Option<CqHandle<T::Cq>>,
    pub(crate) recv_cq: Option<CqHandle<T::Cq>>,
    /// The SRQ, if any (likewise counted).
    pub(crate) srq: Option<SrqHandle<T::Srq>>,
    /// User space's buffers (`None` for a kernel consumer).
    pub(crate) udata: Option<UData<'a>>,
}

/// A driver's device data that names its QP type (implemented where the
/// driver's object types meet; [`Driver`](crate::ib::driver::Driver)
/// requires the table's QP type), so that the device can hold the
/// [`QpTable`] without depending on the QP code.
pub(crate) trait HasQps {
    /// The driver's part of a QP.
    type Qp: QpOps;
}

/// A driver's queue pairs.
///
/// The associated types are the driver's parts of the objects a QP refers
/// to; [`Driver`](crate::ib::driver::Driver) makes them the ones the ops
/// table uses for those objects.
pub(crate) trait QpOps: Sized + Send + Sync + 'static {
    /// The driver's device data.
    type Dev;
    /// Its CQs, SRQs, AHs and MRs.
    type Cq: Send + Sync + 'static;
    type Srq: Send + Sync + 'static;
    type Ah;
    type Mr;

    /// The device's QP number table.
    fn table(dev: &Device<Self::Dev>) -> &QpTable<Self>;

    /// Creates the driver's part of a new QP; returns it and the QP number
    /// it reserved in [`Self::table`] (the layer publishes it).
    fn create(dev: &Device<Self::Dev>, c: QpCreate<'_, Self>) -> Result<(Self, u32)>;

    /// `modify_qp`: `av` is the address vector when `mask` has `IB_QP_AV`.
    fn modify(q: QpRef<'_, Self>, attr: &bindings::ib_qp_attr, mask: c_int, av: Option<RoceAttr>) -> Result;

    /// `query_qp`: fills `attr` and `init`.
    fn query(q: QpRef<'_, Self>, attr: &mut bindings::ib_qp_attr, init: &mut bindings::ib_qp_init_attr);

    /// Destruction begins: the QP is still published and live.
    fn before_destroy(_q: QpRef<'_, Self>) {}

    /// Destroys it: unpublished, its timer and work item stopped.
    fn destroy(self, dev: &Device<Self::Dev>);

    /// `post_send` (an empty chain: a user QP's doorbell).  The walk stops
    /// at the first request not posted.
    fn post_send(q: QpRef<'_, Self>, chain: &mut SendWrChain<'_, Self::Ah, Self::Mr>) -> Result;

    /// `post_recv` of a kernel consumer.
    fn post_recv(q: QpRef<'_, Self>, chain: &mut RecvWrChain<'_>) -> Result;

    /// The QP's timer fired.
    fn on_timer(q: QpRef<'_, Self>);

    /// The QP's work item runs.
    fn on_work(q: QpRef<'_, Self>);

    /// The QP's softirq work item runs (see [`QpRef::flush`]).
    fn on_flush(q: QpRef<'_, Self>);

    /// `attach_mcast` / `detach_mcast` of the group `mgid`.
    fn mcast(q: QpRef<'_, Self>, mgid: &[u8; 16], attach: bool) -> Result;
}

/// The layer's part of a QP object, around the driver's.
///
/// # Invariants
///
/// `ib` is the QP the cell belongs to, `table` the table it is published
/// in, which outlives it.  `timer` and `work` are set up
/// (callbacks [`timer_fn::<T>`], [`work_fn::<T>`]) before `live` is first
/// set, and shut down / disabled by `destroy_qp` before the cell is
/// dropped; `live` is cleared when destruction starts.
pub(crate) struct QpCell<T> {
    ib: NonNull<bindings::ib_qp>,
    /// The table the QP is published in (its device's, which outlives it).
    table: NonNull<QpTable<T>>,
    live: AtomicBool,
    timer: Opaque<bindings::timer_list>,
    work: Opaque<bindings::work_struct>,
    /// A work item in softirq context (`system_bh_wq`), like `work`.
    flush: Opaque<bindings::work_struct>,
    /// Its packets in the network stack; wakes `work` (attached once the
    /// work item is set up, detached when destruction starts).
    tx: TxGauge,
    p: T,
    /// Keeps the driver's workqueue, where `work` runs, until the cell is
    /// dropped (after `work` is disabled).
    queue: QueueClaim,
}

/// `ib_device_ops::size_ib_qp` for a driver whose QPs are `T`.
pub(crate) const fn size<T>() -> usize {
    object::size::<bindings::ib_qp, QpCell<T>>()
}

/// A created, live QP, usable for `'a`.
///
/// # Invariants
///
/// `self.0` is the cell of a created QP whose timer and work item are set
/// up and not shut down while `'a` lasts.
pub(crate) struct QpRef<'a, T>(&'a QpCell<T>);

impl<T> Clone for QpRef<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for QpRef<'_, T> {}

impl<'a, T: QpOps> QpRef<'a, T> {
    /// The driver's part.
    pub(crate) fn p(&self) -> &'a T {
        &self.0.p
    }

    /// The device.
    pub(crate) fn dev(&self) -> &'a Device<T::Dev> {
        // SAFETY: ib_core set `device` to one of ours at creation; the
        // device outlives its QPs.
        unsafe { Device::<T::Dev>::from_ib((*self.0.ib.as_ptr()).device) }
    }

    /// The QP number.
    pub(crate) fn qpn(&self) -> u32 {
        // SAFETY: created (type invariant); the number was set by
        // `create_qp` and never changes.
        unsafe { (*self.0.ib.as_ptr()).qp_num }
    }

    /// The QP's timer.
    pub(crate) fn timer(&self) -> TimerRef<'a> {
        // SAFETY: set up and not shut down for `'a` (type invariant).
        unsafe { TimerRef::new(&self.0.timer) }
    }

    /// The QP's work item.
    pub(crate) fn work(&self) -> WorkRef<'a> {
        // SAFETY: set up and not cancelled for `'a` (type invariant).
        unsafe { WorkRef::new(&self.0.work, Some(&*self.0.queue)) }
    }

    /// The QP's softirq work item: queued from the receive path, it runs
    /// once the receive batch (NAPI poll) that queued it is done.
    pub(crate) fn flush(&self) -> WorkRef<'a> {
        // SAFETY: set up (`rroce_bh_work_init`) and not cancelled for `'a`
        // (type invariant).
        unsafe { WorkRef::new(&self.0.flush, None) }
    }

    /// The QP's transmit back-pressure: its work item runs when a stopped
    /// sender may go on.
    pub(crate) fn tx(&self) -> &'a TxGauge {
        &self.0.tx
    }

    /// The QP's asynchronous events.
    pub(crate) fn events(&self) -> QpEvents<'a> {
        // INVARIANT: created and alive for `'a`.
        QpEvents(self.0.ib, PhantomData)
    }
}

// SAFETY: the cell is shared between the verbs, the receive softirq, the
// timer and the work item; `T` is `Send + Sync`, the rest atomics or
// kernel objects with their own synchronisation.
unsafe impl<T: Send + Sync> Send for QpCell<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for QpCell<T> {}

/// The QPs of a device by number, for the receive path: looked up under
/// RCU, live ones only.
///
/// # Invariants
///
/// Every published entry of `ids` is the `ib_qp` of a created QP of this
/// driver whose cell is `QpCell<T>`; `destroy_qp` unpublishes it and waits
/// for a grace period before the QP goes.
pub(crate) struct QpTable<T> {
    ids: IdTable,
    _qps: PhantomData<T>,
}

impl<T: QpOps> QpTable<T> {
    /// An empty table.
    pub(crate) fn new() -> Self {
        // INVARIANT: empty.
        Self { ids: IdTable::new(), _qps: PhantomData }
    }

    /// Reserves a QP number in `[min, max]` (if fewer than `limit` are in
    /// use) for a QP being created.
    pub(crate) fn reserve(&self, min: u32, max: u32, limit: u32) -> Result<u32> {
        self.ids.reserve(min, max, limit, bindings::GFP_KERNEL_ACCOUNT)
    }

    /// Gives back a number reserved by a creation that failed.
    pub(crate) fn unreserve(&self, qpn: u32) {
        self.ids.unreserve(qpn)
    }

    /// The live QP `qpn`, for the read-side section `_rcu`.
    pub(crate) fn get<'g>(&'g self, qpn: u32, _rcu: &'g ReadGuard) -> Option<QpRef<'g, T>> {
        let ib = NonNull::new(self.ids.load(qpn).cast::<bindings::ib_qp>())?;
        // SAFETY: a published entry is a created QP with cell `QpCell<T>`
        // (type invariant), loaded inside `_rcu`; `destroy_qp` waits for a
        // grace period after unpublishing it.
        let cell = unsafe { Obj::<bindings::ib_qp, QpCell<T>>::part_of(ib) };
        // INVARIANT: live, so its timer and work item are set up, and they
        // are stopped only after the grace period.
        cell.live.load(Ordering::Acquire).then_some(QpRef(cell))
    }

    /// ib_core's pointer to QP `qpn`, or null (for a work completion's
    /// `qp`: kernel consumers drain their CQs before destroying QPs).
    pub(crate) fn raw(&self, qpn: u32) -> *mut bindings::ib_qp {
        self.ids.load(qpn).cast()
    }
}

/// The QP of a verb: ib_core holds it for the call.
///
/// # Safety
///
/// `qp` is a created QP of a device whose QPs are `T`, alive for `'a`.
unsafe fn verb_qp<'a, T: QpOps>(qp: *mut bindings::ib_qp) -> Result<QpRef<'a, T>> {
    let qp = NonNull::new(qp).ok_or(EINVAL)?;
    // SAFETY: per the requirements.
    let cell = unsafe { Obj::<bindings::ib_qp, QpCell<T>>::part_of(qp) };
    // INVARIANT: created, so set up; destroyed (stopped) only after the
    // verb, which ib_core does not run concurrently with destroy_qp.
    Ok(QpRef(cell))
}

/// `ib_device_ops::create_qp`.
///
/// # Safety
///
/// ib_core's contract: `qp` is a zeroed allocation of `size_ib_qp` bytes
/// with `device`, `pd` and `qp_type` set; `init` is valid, its CQs and
/// SRQ created objects of this device (held for the QP); `udata` null or
/// the call's.
pub(in crate::ib) unsafe extern "C" fn create_qp<T: QpOps>(
    qp: *mut bindings::ib_qp,
    init: *mut bindings::ib_qp_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: per the function's contract.
        let (mut q, init, udata) = unsafe { (NewObj::<_, QpCell<T>>::from_raw(qp), &mut *init, UData::from_raw(udata)) };
        // SAFETY: ib_core set `device` to one of ours, live for the call.
        let dev = unsafe { Device::<T::Dev>::from_ib(q.ib().device()) };
        // SAFETY: null or created objects of this device, whose parts are
        // the driver's `Cq`/`Srq` (its ops table), counted for the QP until
        // it is destroyed.
        let (send_cq, recv_cq, srq) =
            unsafe { (CqHandle::from_raw(init.send_cq), CqHandle::from_raw(init.recv_cq), SrqHandle::from_raw(init.srq)) };
        let pd = PdId::of(q.ib().pd);
        let ib = NonNull::new(qp).ok_or(EINVAL)?;
        let tx = TxGauge::new()?;
        let queue = WorkQueue::claim()?;
        let (p, qpn) = T::create(dev, QpCreate { init, pd, send_cq, recv_cq, srq, udata })?;
        q.ib_mut().qp_num = qpn;
        let table = NonNull::from(T::table(dev));
        q.init(QpCell { ib, table, live: AtomicBool::new(false), timer: Opaque::uninit(), work: Opaque::uninit(), flush: Opaque::uninit(), tx, p, queue });
        // SAFETY: created just above; nothing else can reach it yet.
        let cell = unsafe { Obj::<bindings::ib_qp, QpCell<T>>::part_of(ib) };
        // SAFETY: the timer and work item are embedded in the QP, which
        // does not move; `destroy_qp` shuts the timer down and cancels the
        // work before the memory goes, and the cell's claim on the
        // workqueue goes with it.
        unsafe {
            ffi::rroce_timer_setup(cell.timer.get(), timer_fn::<T>);
            ffi::rroce_work_init(cell.work.get(), work_fn::<T>);
            ffi::rroce_bh_work_init(cell.flush.get(), flush_fn::<T>);
            // `destroy_qp` detaches it, waits for a grace period, then
            // cancels the work.
            cell.tx.attach(cell.work.get());
        }
        cell.live.store(true, Ordering::Release);
        // INVARIANT: created and live; `destroy_qp` unpublishes it from
        // the same table.
        // SAFETY: the device's table outlives its QPs.
        unsafe { cell.table.as_ref() }.ids.publish(qpn, qp.cast());
        Ok(0)
    })
}

/// The QP cell around timer `t`.
///
/// # Safety
///
/// `t` is the `timer` of a `QpCell<T>`.
unsafe fn cell_of_timer<'a, T>(t: *mut bindings::timer_list) -> &'a QpCell<T> {
    // SAFETY: container_of: `t` is the `timer` field of a `QpCell<T>`.
    unsafe { &*t.cast::<u8>().sub(core::mem::offset_of!(QpCell<T>, timer)).cast::<QpCell<T>>() }
}

/// The timer callback of a QP.
///
/// # Safety
///
/// Called by the timer core with the `timer` of a set-up `QpCell<T>`.
unsafe extern "C" fn timer_fn<T: QpOps>(t: *mut bindings::timer_list) {
    // SAFETY: per the requirements; `destroy_qp` shuts the timer down
    // (waiting for a running callback) before the cell goes.
    let cell = unsafe { cell_of_timer::<T>(t) };
    if cell.live.load(Ordering::Acquire) {
        // INVARIANT: set up, and shut down only after this callback.
        T::on_timer(QpRef(cell));
    }
}

/// The work item callback of a QP.
///
/// # Safety
///
/// Called by the workqueue with the `work` of a set-up `QpCell<T>`.
unsafe extern "C" fn work_fn<T: QpOps>(w: *mut bindings::work_struct) {
    // SAFETY: container_of: `w` is the `work` field of a `QpCell<T>`;
    // `destroy_qp` cancels it (waiting for a running instance) before the
    // cell goes.
    let cell = unsafe { &*w.cast::<u8>().sub(core::mem::offset_of!(QpCell<T>, work)).cast::<QpCell<T>>() };
    if cell.live.load(Ordering::Acquire) {
        // INVARIANT: as in `timer_fn`.
        T::on_work(QpRef(cell));
    }
}

/// The softirq work item callback of a QP.
///
/// # Safety
///
/// Called by the workqueue with the `flush` of a set-up `QpCell<T>`.
unsafe extern "C" fn flush_fn<T: QpOps>(w: *mut bindings::work_struct) {
    // SAFETY: container_of: `w` is the `flush` field of a `QpCell<T>`;
    // `destroy_qp` cancels it (waiting for a running instance) before the
    // cell goes.
    let cell = unsafe { &*w.cast::<u8>().sub(core::mem::offset_of!(QpCell<T>, flush)).cast::<QpCell<T>>() };
    if cell.live.load(Ordering::Acquire) {
        // INVARIANT: as in `timer_fn`.
        T::on_flush(QpRef(cell));
    }
}

/// `ib_device_ops::modify_qp`.
///
/// # Safety
///
/// ib_core's contract: `qp` created by [`create_qp::<T>`], `attr` valid
/// (with its source GID attribute resolved and referenced if `mask` has
/// `IB_QP_AV`).
pub(in crate::ib) unsafe extern "C" fn modify_qp<T: QpOps>(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    mask: c_int,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: per the contract.
        let (q, attr) = unsafe { (verb_qp::<T>(qp)?, &*attr) };
        let av = if mask as u32 & bindings::ib_qp_attr_mask_IB_QP_AV != 0 {
            // SAFETY: resolved and referenced for the call (the contract).
            Some(unsafe { RoceAttr::from_raw(&attr.ah_attr) }?)
        } else {
            None
        };
        T::modify(q, attr, mask, av)?;
        Ok(0)
    })
}

/// `ib_device_ops::query_qp`.
///
/// # Safety
///
/// ib_core's contract: `qp` created by [`create_qp::<T>`], `attr` and
/// `init` writable.
pub(in crate::ib) unsafe extern "C" fn query_qp<T: QpOps>(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    _mask: c_int,
    init: *mut bindings::ib_qp_init_attr,
) -> c_int {
    from_result(|| {
        // SAFETY: per the contract.
        let (q, attr, init) = unsafe { (verb_qp::<T>(qp)?, &mut *attr, &mut *init) };
        T::query(q, attr, init);
        Ok(0)
    })
}

/// `ib_device_ops::destroy_qp`.
///
/// # Safety
///
/// ib_core's contract: `qp` was created by [`create_qp::<T>`] and is
/// destroyed once; ib_core frees it afterwards.
pub(in crate::ib) unsafe extern "C" fn destroy_qp<T: QpOps>(qp: *mut bindings::ib_qp, _udata: *mut bindings::ib_udata) -> c_int {
    // SAFETY: per the contract.
    let Ok(q) = (unsafe { verb_qp::<T>(qp) }) else { return EINVAL.to_errno() };
    let (dev, qpn, cell) = (q.dev(), q.qpn(), q.0);
    T::before_destroy(q);
    cell.live.store(false, Ordering::Release);
    // Packets still queued no longer wake it (after the grace period).
    cell.tx.detach();
    // SAFETY: the table it was published in (type invariant), which
    // outlives the QP.
    unsafe { cell.table.as_ref() }.ids.remove(qpn);
    // Receivers that found the QP before it was unpublished are done after
    // a grace period; then no one can arm the timer any more.
    crate::sync::rcu::synchronize();
    // SAFETY: set up in `create_qp`; waits for a running callback and
    // turns later arming into a no-op.
    unsafe { ffi::rroce_timer_shutdown(cell.timer.get()) };
    // SAFETY: set up in `create_qp`; cancels it, waits for a running
    // instance and makes later queueing a no-op (`disable_work_sync`).
    // Each item may queue the other: disabled, neither can any more.
    unsafe { bindings::disable_work_sync(cell.flush.get()) };
    // SAFETY: as above.
    unsafe { bindings::disable_work_sync(cell.work.get()) };
    // SAFETY: created, and this is its destroy verb: nothing uses the cell
    // any more (unpublished, not live, timer and work stopped).
    let cell = unsafe { Obj::<bindings::ib_qp, QpCell<T>>::take(qp) };
    cell.p.destroy(dev);
    0
}

/// `ib_device_ops::post_send`.
///
/// # Safety
///
/// ib_core's contract: `qp` created by [`create_qp::<T>`]; `wr` null or a
/// valid chain of kernel send requests in their containers, whose AHs and
/// MRs (of this device) are the driver's `Ah` and `Mr`; `bad_wr` writable.
pub(in crate::ib) unsafe extern "C" fn post_send<T: QpOps>(
    qp: *mut bindings::ib_qp,
    wr: *const bindings::ib_send_wr,
    bad_wr: *mut *const bindings::ib_send_wr,
) -> c_int {
    // SAFETY: per the contract.
    let q = match unsafe { verb_qp::<T>(qp) } {
        Ok(q) => q,
        Err(e) => return e.to_errno(),
    };
    // SAFETY: created; ib_core set the type and device at creation.
    let (ty, device) = unsafe { ((*qp).qp_type, (*qp).device) };
    let ud = matches!(ty, bindings::ib_qp_type_IB_QPT_UD | bindings::ib_qp_type_IB_QPT_GSI);
    // SAFETY: per the contract.
    let mut chain = unsafe { SendWrChain::from_raw(wr, ud, device) };
    let r = T::post_send(q, &mut chain);
    // SAFETY: `bad_wr` is writable (the contract).
    unsafe { chain.finish(r, bad_wr) }
}

/// `ib_device_ops::post_recv`.
///
/// # Safety
///
/// ib_core's contract: `qp` created by [`create_qp::<T>`]; `wr` a valid
/// chain of receive requests; `bad_wr` writable.
pub(in crate::ib) unsafe extern "C" fn post_recv<T: QpOps>(
    qp: *mut bindings::ib_qp,
    wr: *const bindings::ib_recv_wr,
    bad_wr: *mut *const bindings::ib_recv_wr,
) -> c_int {
    // SAFETY: per the contract.
    let q = match unsafe { verb_qp::<T>(qp) } {
        Ok(q) => q,
        Err(e) => return e.to_errno(),
    };
    // SAFETY: per the contract.
    let mut chain = unsafe { RecvWrChain::from_raw(wr) };
    let r = T::post_recv(q, &mut chain);
    // SAFETY: `bad_wr` is writable (the contract).
    unsafe { chain.finish(r, bad_wr) }
}

/// The group of an attach/detach call.
///
/// # Safety
///
/// `gid` is null or a valid `ib_gid`.
unsafe fn mgid_of(gid: *const bindings::ib_gid) -> Result<[u8; 16]> {
    // SAFETY: per the requirements.
    let g = unsafe { gid.as_ref() }.ok_or(EINVAL)?;
    // SAFETY: every bit pattern is a valid `raw` view of the union.
    Ok(unsafe { g.raw })
}

/// `attach_mcast` (`attach`) or `detach_mcast`.
///
/// # Safety
///
/// ib_core's contract: `qp` created by [`create_qp::<T>`], `gid` valid.
unsafe fn mcast<T: QpOps>(qp: *mut bindings::ib_qp, gid: *mut bindings::ib_gid, attach: bool) -> c_int {
    from_result(|| {
        // SAFETY: per the contract.
        let (q, mgid) = unsafe { (verb_qp::<T>(qp)?, mgid_of(gid)?) };
        T::mcast(q, &mgid, attach)?;
        Ok(0)
    })
}

/// `ib_device_ops::attach_mcast`.
///
/// # Safety
///
/// As for [`mcast`].
pub(in crate::ib) unsafe extern "C" fn attach_mcast<T: QpOps>(qp: *mut bindings::ib_qp, gid: *mut bindings::ib_gid, _lid: u16) -> c_int {
    // SAFETY: forwarded.
    unsafe { mcast::<T>(qp, gid, true) }
}

/// `ib_device_ops::detach_mcast`.
///
/// # Safety
///
/// As for [`mcast`].
pub(in crate::ib) unsafe extern "C" fn detach_mcast<T: QpOps>(qp: *mut bindings::ib_qp, gid: *mut bindings::ib_gid, _lid: u16) -> c_int {
    // SAFETY: forwarded.
    unsafe { mcast::<T>(qp, gid, false) }
}
