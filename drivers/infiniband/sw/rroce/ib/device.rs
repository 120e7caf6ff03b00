// SPDX-License-Identifier: GPL-2.0
//! The device: ib_core's `ib_device` followed by the driver's data, and
//! the device and port query entry points.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use kernel::bindings;
use kernel::error::{from_result, to_result};
use core::ptr::NonNull;
use kernel::ffi::{c_char, c_int};
use kernel::prelude::*;
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::types::Opaque;

use crate::sync::rcu::ReadGuard;

use crate::ib::udata::UData;
use crate::net::netdev::NetDevRef;
use crate::net::parent::SynthParent;

/// An RDMA device of this driver: the `ib_device` ib_core allocated
/// (`_ib_alloc_device`, sized for this type) with the driver's `T` after it.
///
/// # Invariants
///
/// Only ever reached through a pointer from `_ib_alloc_device` sized for
/// `Device<T>`; `ib` is at offset 0; `p` is initialised right after the
/// allocation and dropped in `dealloc_driver`, after which no reference
/// to the device is formed.  ib_core owns `ib` (it changes it under its
/// own locks), so it is only reached through raw pointers.
#[repr(C)]
pub(crate) struct Device<T> {
    /// ib_core's part.
    pub(crate) ib: Opaque<bindings::ib_device>,
    /// A synthetic sysfs parent when the netdev has no bus parent.
    synth: Option<SynthParent>,
    /// The driver's part.
    pub(crate) p: T,
}

impl<T> Device<T> {
    /// The device an `ib_device` of ours belongs to.
    ///
    /// # Safety
    ///
    /// `ib` must be an `ib_device` allocated for a `Device<T>` whose `p` is
    /// initialised and not yet dropped, valid for `'a`.
    pub(crate) unsafe fn from_ib<'a>(ib: *mut bindings::ib_device) -> &'a Self {
        // CAST: `ib` is the first field of a `repr(C)` `Device<T>`.
        // SAFETY: the caller guarantees validity for `'a`.
        unsafe { &*ib.cast::<Self>() }
    }

    /// ib_core's pointer to the device.
    pub(crate) fn as_raw(&self) -> *mut bindings::ib_device {
        self.ib.get()
    }

    /// `num_comp_vectors` (set before registration, then constant).
    pub(crate) fn num_comp_vectors(&self) -> u32 {
        // SAFETY: the device is live (type invariant); the field is written
        // only before registration.
        unsafe { (*self.as_raw()).num_comp_vectors as u32 }
    }

    /// The speed and width of port `port` from its netdev's link speed
    /// (`ib_get_eth_speed`).
    pub(crate) fn eth_speed(&self, port: u32) -> Result<(u16, u8)> {
        let (mut speed, mut width) = (0u16, 0u8);
        // SAFETY: a live, registered device of ours with its netdev set.
        to_result(unsafe { bindings::ib_get_eth_speed(self.as_raw(), port, &mut speed, &mut width) })?;
        Ok((speed, width))
    }

    /// ib_core's view of port `port` (`ib_query_port`, which calls back
    /// into the driver's `query_port`).
    pub(crate) fn query_port_core(&self, port: u32) -> Result<bindings::ib_port_attr> {
        let mut attr = bindings::ib_port_attr::default();
        // SAFETY: a live device of ours; `attr` is writable.
        to_result(unsafe { bindings::ib_query_port(self.as_raw(), port, &mut attr) })?;
        Ok(attr)
    }
}

/// The `max_objects` module parameter: when not 0, devices created
/// afterwards advertise and enforce at most that many objects of each kind.
pub(crate) fn max_objects_param() -> u32 {
    // SAFETY: reads a module parameter.
    unsafe { crate::ffi::rroce_param_max_objects() }
}

/// A driver's device-wide verbs.
pub(crate) trait DeviceOps: Sized + Send + Sync + 'static {
    /// The devices the receive path may deliver to (a driver-wide table).
    fn rx_devices() -> &'static RxDevices<Self>;

    /// The port's netdev (`ib_device_set_netdev`; its parent becomes the
    /// device's sysfs parent).
    fn netdev(&self) -> &NetDevRef;

    /// The device is going away (`dealloc_driver`, ib_core's last call):
    /// it is unregistered, out of [`Self::rx_devices`], and no receiver
    /// still uses it.  `p` is dropped when this returns.
    fn dealloc(p: Self, id: DevId);

    /// What `query_device` reports.
    fn attrs(dev: &Device<Self>) -> bindings::ib_device_attr;

    /// Fills `attr` (zeroed by ib_core) for port `port`.
    fn query_port(dev: &Device<Self>, port: u32, attr: &mut bindings::ib_port_attr) -> Result;

    /// Fills `imm` for port `port`.
    fn port_immutable(dev: &Device<Self>, port: u32, imm: &mut bindings::ib_port_immutable) -> Result;

    /// The P_Key at `index` of port `port`.
    fn query_pkey(dev: &Device<Self>, port: u32, index: u16) -> Result<u16>;

    /// A PD is allocated (the driver keeps nothing in it).
    fn alloc_pd(dev: &Device<Self>) -> Result;

    /// A PD is freed.
    fn dealloc_pd(dev: &Device<Self>);

    /// An XRC domain is allocated (the driver keeps nothing in it).
    fn alloc_xrcd(dev: &Device<Self>) -> Result;

    /// An XRC domain is freed.
    fn dealloc_xrcd(dev: &Device<Self>);
}

/// `ib_device_ops::size_ib_pd`: a PD holds nothing of the driver's.
pub(crate) const PD_SIZE: usize = core::mem::size_of::<bindings::ib_pd>();

/// `ib_device_ops::size_ib_xrcd`: nor does an XRC domain.
pub(crate) const XRCD_SIZE: usize = core::mem::size_of::<bindings::ib_xrcd>();

/// `ib_device_ops::query_device`.
///
/// # Safety
///
/// ib_core's contract: `ib` is a live device of ours, `attr` writable,
/// `udata` null or the call's.
pub(in crate::ib) unsafe extern "C" fn query_device<T: DeviceOps>(
    ib: *mut bindings::ib_device,
    attr: *mut bindings::ib_device_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: null or valid for the call.
        if let Some(u) = unsafe { UData::from_raw(udata) } {
            // No driver command or response is defined.
            if !u.is_empty() {
                return Err(EINVAL);
            }
        }
        // SAFETY: per the contract.
        let (dev, attr) = unsafe { (Device::<T>::from_ib(ib), &mut *attr) };
        *attr = T::attrs(dev);
        Ok(0)
    })
}

/// `ib_device_ops::query_port`.
///
/// # Safety
///
/// ib_core's contract: `ib` is a live device of ours, `attr` valid.
pub(in crate::ib) unsafe extern "C" fn query_port<T: DeviceOps>(
    ib: *mut bindings::ib_device,
    port: u32,
    attr: *mut bindings::ib_port_attr,
) -> c_int {
    from_result(|| {
        // SAFETY: per the contract.
        let (dev, attr) = unsafe { (Device::<T>::from_ib(ib), &mut *attr) };
        T::query_port(dev, port, attr)?;
        Ok(0)
    })
}

/// `ib_device_ops::get_port_immutable`.
///
/// # Safety
///
/// ib_core's contract: `ib` is a device of ours being registered, `imm`
/// writable.
pub(in crate::ib) unsafe extern "C" fn get_port_immutable<T: DeviceOps>(
    ib: *mut bindings::ib_device,
    port: u32,
    imm: *mut bindings::ib_port_immutable,
) -> c_int {
    from_result(|| {
        // SAFETY: per the contract.
        let (dev, imm) = unsafe { (Device::<T>::from_ib(ib), &mut *imm) };
        T::port_immutable(dev, port, imm)?;
        Ok(0)
    })
}

/// `ib_device_ops::get_link_layer`: RoCE runs on Ethernet.
///
/// # Safety
///
/// ib_core's contract.
pub(in crate::ib) unsafe extern "C" fn get_link_layer(_ib: *mut bindings::ib_device, _port: u32) -> bindings::rdma_link_layer {
    bindings::rdma_link_layer_IB_LINK_LAYER_ETHERNET
}

/// `ib_device_ops::query_gid`: the RoCE GID table is ib_core's (filled
/// from the netdev's addresses).
///
/// # Safety
///
/// ib_core's contract.
pub(in crate::ib) unsafe extern "C" fn query_gid(
    ib: *mut bindings::ib_device,
    port: u32,
    index: c_int,
    gid: *mut bindings::ib_gid,
) -> c_int {
    // SAFETY: forwarded with the caller's valid arguments.
    unsafe { bindings::rdma_query_gid(ib, port, index, gid) }
}

/// `ib_device_ops::query_pkey`.
///
/// # Safety
///
/// ib_core's contract: `ib` is a live device of ours, `pkey` writable.
pub(in crate::ib) unsafe extern "C" fn query_pkey<T: DeviceOps>(
    ib: *mut bindings::ib_device,
    port: u32,
    index: u16,
    pkey: *mut u16,
) -> c_int {
    from_result(|| {
        // SAFETY: per the contract.
        let dev = unsafe { Device::<T>::from_ib(ib) };
        let k = T::query_pkey(dev, port, index)?;
        // SAFETY: writable per the contract.
        unsafe { *pkey = k };
        Ok(0)
    })
}

/// `ib_device_ops::alloc_pd`.
///
/// # Safety
///
/// ib_core's contract: `pd` is a core-allocated PD with `device` set.
pub(in crate::ib) unsafe extern "C" fn alloc_pd<T: DeviceOps>(pd: *mut bindings::ib_pd, _udata: *mut bindings::ib_udata) -> c_int {
    from_result(|| {
        // SAFETY: per the contract the PD's device is a live one of ours.
        let dev = unsafe { Device::<T>::from_ib((*pd).device) };
        T::alloc_pd(dev)?;
        Ok(0)
    })
}

/// `ib_device_ops::dealloc_pd`.
///
/// # Safety
///
/// ib_core's contract: `pd` was allocated by [`alloc_pd`].
pub(in crate::ib) unsafe extern "C" fn dealloc_pd<T: DeviceOps>(pd: *mut bindings::ib_pd, _udata: *mut bindings::ib_udata) -> c_int {
    // SAFETY: per the contract the PD's device is a live one of ours.
    let dev = unsafe { Device::<T>::from_ib((*pd).device) };
    T::dealloc_pd(dev);
    0
}

/// `ib_device_ops::alloc_xrcd`.
///
/// # Safety
///
/// ib_core's contract: `xrcd` is a core-allocated XRC domain with `device`
/// set.
pub(in crate::ib) unsafe extern "C" fn alloc_xrcd<T: DeviceOps>(
    xrcd: *mut bindings::ib_xrcd,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: per the contract the domain's device is a live one of ours.
        let dev = unsafe { Device::<T>::from_ib((*xrcd).device) };
        T::alloc_xrcd(dev)?;
        Ok(0)
    })
}

/// `ib_device_ops::dealloc_xrcd`.
///
/// # Safety
///
/// ib_core's contract: `xrcd` was allocated by [`alloc_xrcd`].
pub(in crate::ib) unsafe extern "C" fn dealloc_xrcd<T: DeviceOps>(
    xrcd: *mut bindings::ib_xrcd,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: per the contract the domain's device is a live one of ours.
    let dev = unsafe { Device::<T>::from_ib((*xrcd).device) };
    T::dealloc_xrcd(dev);
    0
}

/// The identity of a device (its address), for comparisons.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct DevId(usize);

impl<T> Device<T> {
    /// The device's identity.
    pub(crate) fn id(&self) -> DevId {
        DevId(self.ib.get() as usize)
    }
}

/// The `ib_device` fields a driver sets before registration (the port's
/// netdev is [`DeviceOps::netdev`]).
pub(crate) struct Setup<'a> {
    /// `node_guid`.
    pub(crate) node_guid: u64,
    /// `node_desc` (truncated to 63 bytes).
    pub(crate) node_desc: &'a [u8],
    /// Legacy `write()` commands beyond ib_core's default set
    /// (`IB_USER_VERBS_CMD_*` bits).
    pub(crate) uverbs_cmds: u64,
}

/// An allocated, not yet registered device: owned by the driver until
/// [`NewDevice::register`] hands it to ib_core.
///
/// # Invariants
///
/// `self.0` came from `_ib_alloc_device` sized for `Device<T>`, with `p`
/// initialised and `dealloc_driver::<T>` in its ops; nothing else owns it.
/// Until `self.1` (published) is set, nothing else reaches `p`.
pub(crate) struct NewDevice<T: DeviceOps>(NonNull<Device<T>>, bool);

impl<T: DeviceOps> NewDevice<T> {
    /// Allocates a device around `p` with the ops table `ops` (whose
    /// `dealloc_driver` is replaced by [`dealloc_driver::<T>`]).
    /// (`p` and `ops` build large values: `p` is written straight into the
    /// device, the table in a frame of its own.)
    pub(crate) fn new(p: impl FnOnce() -> T, ops: impl FnOnce() -> bindings::ib_device_ops) -> Result<Self> {
        // SAFETY: a plain allocation; ib_core zeroes the memory and
        // initialises its `ib_device`.
        let raw = unsafe { bindings::_ib_alloc_device(core::mem::size_of::<Device<T>>()) };
        let dev = NonNull::new(raw.cast::<Device<T>>()).ok_or(ENOMEM)?;
        // SAFETY: a fresh allocation of the right size: the driver's fields
        // are written once here.
        unsafe {
            core::ptr::addr_of_mut!((*dev.as_ptr()).synth).write(None);
            core::ptr::addr_of_mut!((*dev.as_ptr()).p).write(p());
        }
        // SAFETY: as above.
        unsafe { install_ops::<T>(raw, ops) };
        // INVARIANT: allocated, initialised, ours alone, not published.
        Ok(Self(dev, false))
    }

    /// The device.
    pub(crate) fn dev(&self) -> &Device<T> {
        // SAFETY: initialised and owned (type invariant).
        unsafe { self.0.as_ref() }
    }

    /// The driver's part, until the device is published for receive.
    pub(crate) fn p_mut(&mut self) -> Option<&mut T> {
        // SAFETY: ours alone and unreachable until published (type
        // invariant); `&mut self` makes the borrow unique.
        (!self.1).then(|| unsafe { &mut (*self.0.as_ptr()).p })
    }

    /// Fills in the fields ib_core needs before registration.
    pub(crate) fn setup(&mut self, s: &Setup<'_>) -> Result {
        let raw = self.0.as_ptr();
        let ndev = self.dev().p.netdev();
        let parent = match ndev.parent() {
            p if !p.is_null() => p,
            _ => {
                let sp = SynthParent::new(ndev)?;
                let d = sp.device();
                // SAFETY: unregistered and ours alone (type invariant); the
                // parent lives with the device (it is dropped after
                // `dealloc_driver`, after unregistration).
                unsafe { (*raw).synth = Some(sp) };
                d
            }
        };
        {
            // SAFETY: as above; `parent` outlives the registration (the
            // netdev is held until then, the synthetic parent by the
            // device).
            let ib = unsafe { &mut *(*raw).ib.get() };
            ib.__bindgen_anon_1.dev.parent = parent;
            ib.node_type = bindings::RDMA_NODE_IB_CA as u8;
            ib.phys_port_cnt = 1;
            ib.uverbs_cmd_mask |= s.uverbs_cmds;
            // SAFETY: a plain query.
            ib.num_comp_vectors = unsafe { crate::ffi::rroce_num_possible_cpus() } as c_int;
            ib.node_guid = s.node_guid;
            for (d, c) in ib.node_desc.iter_mut().take(63).zip(s.node_desc.iter()) {
                *d = *c as c_char;
            }
        }
        // SAFETY: as above, with the port count set (ib_core checks the port
        // against it); ib_core takes its own reference on the netdev.
        to_result(unsafe { bindings::ib_device_set_netdev(raw.cast(), ndev.as_ptr(), 1) })
    }

    /// Makes the device reachable by the driver's receive path
    /// ([`DeviceOps::rx_devices`]); `dealloc_driver` takes it out again.
    pub(crate) fn publish_rx(&mut self) -> Result {
        T::rx_devices().add(self.0)?;
        // INVARIANT: reachable by receivers from now on.
        self.1 = true;
        Ok(())
    }

    /// Registers the device as `name`; from then on ib_core owns it (and
    /// frees it through `dealloc_driver`, also on failure).
    pub(crate) fn register(self, name: &CStr) -> Result {
        let raw = self.0.as_ptr().cast::<bindings::ib_device>();
        core::mem::forget(self);
        // SAFETY: set up and ours; a null DMA device selects virtual DMA.
        let r = to_result(unsafe { bindings::ib_register_device(raw, name.as_char_ptr(), core::ptr::null_mut()) });
        if r.is_err() {
            // SAFETY: registration failed, so the device is still ours
            // alone; this calls `dealloc_driver` and frees it.
            unsafe { bindings::ib_dealloc_device(raw) };
        }
        r
    }

    /// A reference that keeps the device's memory (not its registration).
    pub(crate) fn weak(&self) -> DevWeak<T> {
        DevWeak::new(self.0)
    }
}

impl<T: DeviceOps> Drop for NewDevice<T> {
    fn drop(&mut self) {
        // SAFETY: never registered and ours alone: this calls
        // `dealloc_driver` (dropping `p`) and frees the device.
        unsafe { bindings::ib_dealloc_device(self.0.as_ptr().cast()) };
    }
}

/// Copies the ops table `ops` builds into the device; ours replaces the
/// driver's `dealloc_driver`.
///
/// # Safety
///
/// `raw` is a device allocated for `Device<T>`, not yet registered.
#[inline(never)]
unsafe fn install_ops<T: DeviceOps>(raw: *mut bindings::ib_device, ops: impl FnOnce() -> bindings::ib_device_ops) {
    // SAFETY: per the requirements; ib_core copies the table.
    unsafe {
        bindings::ib_set_device_ops(raw, &ops());
        (*raw).ops.dealloc_driver = Some(dealloc_driver::<T>);
    }
}

/// `ib_device_ops::dealloc_driver`: takes the device out of the receive
/// table, waits for receivers, then drops the driver's part.
///
/// # Safety
///
/// ib_core's contract: `ib` is a device allocated by [`NewDevice::new`]
/// (so with `p` initialised); it is never used again.
pub(in crate::ib) unsafe extern "C" fn dealloc_driver<T: DeviceOps>(ib: *mut bindings::ib_device) {
    let dev = ib.cast::<Device<T>>();
    let id = DevId(ib as usize);
    T::rx_devices().remove(id);
    // No receiver may be looking at the device once its part is gone.
    crate::sync::rcu::synchronize();
    // SAFETY: initialised (the contract); ib_core frees the memory without
    // dropping it, so moving the fields out is their one drop.
    let (p, synth) = unsafe { (core::ptr::addr_of!((*dev).p).read(), core::ptr::addr_of!((*dev).synth).read()) };
    T::dealloc(p, id);
    drop(synth);
}

/// A counted reference to a device's memory (`get_device`), which lets it
/// be unregistered; [`DevWeak::try_get`] turns it into a registration
/// reference while the device is registered.
///
/// # Invariants
///
/// `self.0` is a device allocated by [`NewDevice::new`] on whose embedded
/// `struct device` this object holds one reference.
pub(crate) struct DevWeak<T>(NonNull<Device<T>>);

// SAFETY: device references may be taken and dropped from any thread.
unsafe impl<T: Send + Sync> Send for DevWeak<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for DevWeak<T> {}

impl<T> DevWeak<T> {
    fn new(dev: NonNull<Device<T>>) -> Self {
        // SAFETY: the device's memory is live (the caller owns or holds
        // it); `get_device` takes one more reference on it.
        unsafe { bindings::get_device(core::ptr::addr_of_mut!((*(*dev.as_ptr()).ib.get()).__bindgen_anon_1.dev)) };
        // INVARIANT: referenced just above.
        Self(dev)
    }

    /// The device's identity.
    pub(crate) fn id(&self) -> DevId {
        DevId(self.0.as_ptr() as usize)
    }

    fn unregistration_lock(&self) -> *mut bindings::mutex {
        // SAFETY: the memory is live (type invariant); only the field's
        // address is computed.
        unsafe { core::ptr::addr_of_mut!((*(*self.0.as_ptr()).ib.get()).unregistration_lock) }
    }

    /// Waits until no unregistration of the device is running.  ib_core
    /// holds the device's `unregistration_lock` across `dealloc_driver`,
    /// so afterwards no thread runs the driver's code for it (module
    /// unload waits for this).  Process context; call with no lock held
    /// that an unregistration may take.
    pub(crate) fn wait_unregistration(&self) {
        let m = self.unregistration_lock();
        // SAFETY: the mutex is initialised for as long as the memory is
        // live; taken and released at once.
        unsafe {
            crate::ffi::rroce_mutex_lock(m);
            bindings::mutex_unlock(m);
        }
    }

    /// Whether no unregistration of the device is running now (without
    /// waiting).
    pub(crate) fn unregistration_idle(&self) -> bool {
        let m = self.unregistration_lock();
        // SAFETY: as in `wait_unregistration`; released if taken.
        unsafe {
            if crate::ffi::rroce_mutex_trylock(m) == 0 {
                return false;
            }
            bindings::mutex_unlock(m);
        }
        true
    }

    /// A registration reference, if the device is registered (and not
    /// being unregistered).
    pub(crate) fn try_get(&self) -> Option<DevGet<T>> {
        let raw = self.0.as_ptr().cast::<bindings::ib_device>();
        // SAFETY: the memory is live (type invariant); `ib_device_try_get`
        // only succeeds for a registered device.
        // INVARIANT: on success we own one registration reference.
        unsafe { crate::ffi::rroce_ib_device_try_get(raw) }.then(|| DevGet(self.0))
    }
}

impl<T> Drop for DevWeak<T> {
    fn drop(&mut self) {
        // SAFETY: gives back the reference of the type invariant.
        unsafe { bindings::put_device(core::ptr::addr_of_mut!((*(*self.0.as_ptr()).ib.get()).__bindgen_anon_1.dev)) };
    }
}

/// A registration reference (`ib_device_try_get`): the device stays
/// registered, with its driver part, until this is dropped or turned into
/// an unregistration.
///
/// # Invariants
///
/// `self.0` is a registered device of ours on which this object owns one
/// registration reference.
pub(crate) struct DevGet<T>(NonNull<Device<T>>);

impl<T> DevGet<T> {
    /// The device.
    pub(crate) fn dev(&self) -> &Device<T> {
        // SAFETY: registered, so initialised until unregistration, which
        // waits for this reference (type invariant).
        unsafe { self.0.as_ref() }
    }

    /// Unregisters the device and waits for it (process context, not under
    /// the RTNL).
    pub(crate) fn unregister(self) {
        let raw = self.0.as_ptr().cast::<bindings::ib_device>();
        core::mem::forget(self);
        // SAFETY: consumes the registration reference of the invariant.
        unsafe { bindings::ib_unregister_device_and_put(raw) };
    }

    /// Queues the device's unregistration (allowed under the RTNL).
    pub(crate) fn unregister_queued(self) {
        // SAFETY: the device is registered (type invariant); the reference
        // is dropped with `self` afterwards.
        unsafe { bindings::ib_unregister_device_queued(self.0.as_ptr().cast()) };
    }

    /// Dispatches `IB_EVENT_PORT_ACTIVE` or `IB_EVENT_PORT_ERR` for port 1.
    pub(crate) fn port_event(&self, active: bool) {
        let mut ev = bindings::ib_event {
            device: self.0.as_ptr().cast(),
            event: if active {
                bindings::ib_event_type_IB_EVENT_PORT_ACTIVE
            } else {
                bindings::ib_event_type_IB_EVENT_PORT_ERR
            },
            ..Default::default()
        };
        ev.element.port_num = 1;
        // SAFETY: a valid event of a registered device.
        unsafe { bindings::ib_dispatch_event(&ev) };
    }
}

impl<T> Drop for DevGet<T> {
    fn drop(&mut self) {
        // SAFETY: gives back the reference of the type invariant.
        unsafe { bindings::ib_device_put(self.0.as_ptr().cast()) };
    }
}

/// How many devices a driver's receive table holds.
pub(crate) const MAX_RX_DEVICES: usize = 64;

/// The devices a driver's receive path may deliver to, read locklessly
/// under RCU (a `static` of the driver).
///
/// # Invariants
///
/// Every non-null slot is a device allocated by [`NewDevice::new`] whose
/// driver part is initialised; `dealloc_driver::<T>` clears its slot and
/// waits for a grace period before the part is dropped.
pub(crate) struct RxDevices<T>([AtomicPtr<Device<T>>; MAX_RX_DEVICES]);

impl<T: DeviceOps> RxDevices<T> {
    /// An empty table.
    pub(crate) const fn new() -> Self {
        Self([const { AtomicPtr::new(core::ptr::null_mut()) }; MAX_RX_DEVICES])
    }

    fn add(&self, dev: NonNull<Device<T>>) -> Result {
        for slot in &self.0 {
            // INVARIANT: an initialised device of ours (`publish_rx`).
            if slot.compare_exchange(core::ptr::null_mut(), dev.as_ptr(), Ordering::AcqRel, Ordering::Acquire).is_ok() {
                return Ok(());
            }
        }
        Err(ENOSPC)
    }

    fn remove(&self, id: DevId) {
        for slot in &self.0 {
            let p = slot.load(Ordering::Acquire);
            if p as usize == id.0 {
                let _ = slot.compare_exchange(p, core::ptr::null_mut(), Ordering::AcqRel, Ordering::Acquire);
            }
        }
    }

    /// The devices in the table, for the read-side section `_rcu`.
    pub(crate) fn iter<'g>(&'g self, _rcu: &'g ReadGuard) -> impl Iterator<Item = &'g Device<T>> + 'g {
        self.0.iter().filter_map(|slot| {
            let p = slot.load(Ordering::Acquire);
            // SAFETY: a non-null slot is an initialised device (type
            // invariant), loaded inside `_rcu`; its part is dropped only a
            // grace period after the slot is cleared.
            unsafe { p.as_ref() }
        })
    }
}
