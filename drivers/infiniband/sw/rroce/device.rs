// SPDX-License-Identifier: GPL-2.0
//! rroce devices: `rdma link add`, life alongside the netdev, removal.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/rdma/rdma_netlink.h`](srctree/include/rdma/rdma_netlink.h)
//!
//! Each device is an `ib_device` allocated by ib_core with [`DevPriv`] right
//! behind it ([`RroceDev`]).  The driver's global [`Registration`] tracks all
//! devices so that netdev events and module unload can find them; its lock
//! is never held across a call that may take the RTNL or wait for an
//! unregistration.

use core::mem::size_of;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU8, Ordering};
use kernel::bindings;
use kernel::error::{from_result, to_result};
use kernel::ffi::{c_char, c_int, c_ulong, c_void};
use kernel::c_str;
use kernel::prelude::*;
use kernel::sync::Mutex;
use kernel::types::Opaque;

use crate::ffi;
use crate::sync::idtable::{IdTable, RcuTable};
use crate::net::netdev::NetDevRef;
use crate::net::parent::SynthParent;
use crate::proto::link;
use crate::ib::stats::HwStats;
use crate::stats::{RxHandler, RxStats, Stats};
use crate::net::udp::{NetSockRef, NetSocks};

/// The driver's private part of a device.
pub(crate) struct DevPriv {
    /// The Ethernet device the port runs on.
    pub(crate) ndev: NetDevRef,
    /// Our reference to the namespace's UDP sockets, given back on dealloc.
    sock: Option<NetSockRef<RxStats>>,
    /// A synthetic sysfs parent when the netdev has no bus parent.
    parent: Option<SynthParent>,
    /// Last port state reported to ib_core, to send each change once.
    port_active: AtomicBool,
    /// Protection domains in use, bounded by `attrs.max_pd`.
    pub(crate) pds: AtomicU32,
    /// Completion queues in use, bounded by `attrs.max_cq`.
    pub(crate) cqs: AtomicU32,
    /// What `query_device` reports (ib_core keeps a copy in `ib.attrs`).
    pub(crate) attrs: bindings::ib_device_attr,
    /// Memory region and window keys (the index part).
    pub(crate) keys: crate::keys::Keys,
    /// Queue pairs by number.
    pub(crate) qps: crate::ib::qp::QpTable<<DevPriv as crate::ib::qp::HasQps>::Qp>,
    /// Shared receive queue numbers.
    pub(crate) srqns: IdTable,
    /// Address handle numbers.
    pub(crate) ahs: RcuTable<crate::av::AhEntry>,
    /// Counters (`hw_counters`).
    pub(crate) stats: crate::stats::Stats,
    /// Packets to the device's own addresses (`loopback`).
    pub(crate) loopq: crate::loopback::LoopQueue,
    /// Multicast groups of UD QPs.
    pub(crate) mcast: crate::mcast::McastTable,
    /// What receives the packets of [`Self::loopq`] (`recv::rx_local`).
    pub(crate) local_rx: LocalRx,
}

/// Receives a packet a device sent to itself.
pub(crate) type LocalRx = fn(&RroceDev, &[u8]);

/// An rroce device: ib_core's `ib_device` followed by ours.
pub(crate) type RroceDev = crate::ib::device::Device<DevPriv>;

impl RroceDev {
    /// Whether the port is up, as last reported to ib_core.
    pub(crate) fn link_active(&self) -> bool {
        self.p.ndev.is_active()
    }
}

/// Devices the receive path may deliver to, read locklessly under RCU.
///
/// A device is entered before `ib_register_device` and removed in
/// `dealloc_driver`, which then waits for an RCU grace period before its
/// memory can go.
const MAX_DEVICES: usize = 64;
static RX_DEVS: [AtomicPtr<RroceDev>; MAX_DEVICES] = [const { AtomicPtr::new(ptr::null_mut()) }; MAX_DEVICES];

fn rx_table_add(dev: *mut RroceDev) -> Result {
    for slot in &RX_DEVS {
        if slot.compare_exchange(ptr::null_mut(), dev, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            return Ok(());
        }
    }
    Err(ENOSPC)
}

fn rx_table_remove(dev: *mut RroceDev) {
    for slot in &RX_DEVS {
        let _ = slot.compare_exchange(dev, ptr::null_mut(), Ordering::AcqRel, Ordering::Acquire);
    }
}

/// The device a received datagram is for: the one on the netdev it arrived
/// on, else (loopback, or a device on another netdev of the namespace) the
/// one whose netdev owns the destination address `dst` (16 bytes: IPv6,
/// 4: IPv4).
///
/// Must be called in an RCU read-side section (the receive softirq); the
/// reference is valid until it ends.
pub(crate) fn rx_device<'a>(in_dev: *mut bindings::net_device, dst: &[u8]) -> Option<&'a RroceDev> {
    let mut same_net = None;
    // SAFETY: the ingress netdev of a packet being received is alive.
    let net = unsafe { ffi::rroce_dev_net(in_dev) };
    for slot in &RX_DEVS {
        let p = slot.load(Ordering::Acquire);
        // SAFETY: table entries stay valid for an RCU grace period after
        // their removal, and we are in a read-side section.
        let Some(dev) = (unsafe { p.as_ref() }) else { continue };
        if dev.p.ndev.as_ptr() == in_dev {
            return Some(dev);
        }
        if dev.p.ndev.net() == net {
            same_net = Some(dev);
        }
    }
    // Slow path (loopback): look at every device of the namespace.
    same_net?;
    for slot in &RX_DEVS {
        let p = slot.load(Ordering::Acquire);
        // SAFETY: as above.
        let Some(dev) = (unsafe { p.as_ref() }) else { continue };
        if dev.p.ndev.net() != net {
            continue;
        }
        if dev.p.ndev.has_addr(dst) {
            return Some(dev);
        }
    }
    None
}

struct DevEntry {
    dev: *mut RroceDev,
    ndev: *mut bindings::net_device,
    /// `ib_register_device` succeeded.
    registered: bool,
    /// The netdev went away before registration finished.
    doomed: bool,
}

struct State {
    devs: KVec<DevEntry>,
    socks: NetSocks<RxStats>,
}

// SAFETY: the raw pointers are kernel objects usable from any thread; the
// state is only accessed under its mutex.
unsafe impl Send for State {}

/// Registration stages reached, for unwinding.
const STAGE_PERNET: u8 = 1;
const STAGE_NOTIFIER: u8 = 2;
const STAGE_LINK: u8 = 3;

/// The driver's global registrations and device table.
#[pin_data(PinnedDrop)]
pub(crate) struct Registration {
    #[pin]
    state: Mutex<State>,
    module: &'static ThisModule,
    /// The driver's `ib_device_ops` table (built by `verbs`).
    ops: fn(&'static ThisModule) -> bindings::ib_device_ops,
    /// What the namespaces' sockets hand their datagrams to (`recv::rx`).
    rx: RxHandler,
    /// What the devices' loopback queues hand their packets to.
    local_rx: LocalRx,
    stage: AtomicU8,
    link_ops: Opaque<bindings::rdma_link_ops>,
    nb: Opaque<bindings::notifier_block>,
    pernet: Opaque<bindings::pernet_operations>,
}

// SAFETY: the C structures inside are only handed to their registration
// functions, which synchronise internally; the rest is a mutex and atomics.
unsafe impl Sync for Registration {}
// SAFETY: as above.
unsafe impl Send for Registration {}

/// The live registration, for C callbacks that get no context pointer.
///
/// Non-null exactly while the callbacks can run: from before the first
/// registration to after the last unregistration.
static GLOBAL: AtomicPtr<Registration> = AtomicPtr::new(ptr::null_mut());

fn global() -> Result<&'static Registration> {
    let g = GLOBAL.load(Ordering::Acquire);
    // SAFETY: non-null only while the pinned registration is alive and its
    // callbacks registered; they all finish before it is dropped.
    unsafe { g.as_ref() }.ok_or(ENODEV)
}

impl Registration {
    /// Registers the `rroce` link type, the netdev notifier and the pernet hook.
    pub(crate) fn new(
        module: &'static ThisModule,
        ops: fn(&'static ThisModule) -> bindings::ib_device_ops,
        rx: RxHandler,
        local_rx: LocalRx,
    ) -> Result<Pin<KBox<Self>>> {
        let reg = KBox::pin_init(
            try_pin_init!(Self {
                state <- kernel::new_mutex!(State { devs: KVec::new(), socks: NetSocks::new() }),
                module,
                ops,
                rx,
                local_rx,
                stage: AtomicU8::new(0),
                link_ops: Opaque::new(bindings::rdma_link_ops {
                    type_: c_str!("rroce").as_char_ptr(),
                    newlink: Some(newlink_callback),
                    ..Default::default()
                }),
                nb: Opaque::new(bindings::notifier_block {
                    notifier_call: Some(netdev_event_callback),
                    ..Default::default()
                }),
                pernet: Opaque::new(bindings::pernet_operations {
                    exit: Some(net_exit_callback),
                    ..Default::default()
                }),
            }),
            GFP_KERNEL,
        )?;
        GLOBAL.store(ptr::from_ref(&*reg).cast_mut(), Ordering::Release);
        // From here on, dropping `reg` unwinds whatever stage was reached.
        // SAFETY: `pernet` is pinned inside `reg` and unregistered in drop.
        to_result(unsafe { bindings::register_pernet_subsys(reg.pernet.get()) })?;
        reg.stage.store(STAGE_PERNET, Ordering::Relaxed);
        // SAFETY: `nb` is pinned inside `reg` and unregistered in drop.
        to_result(unsafe { bindings::register_netdevice_notifier(reg.nb.get()) })?;
        reg.stage.store(STAGE_NOTIFIER, Ordering::Relaxed);
        // SAFETY: `link_ops` is pinned inside `reg` and unregistered in drop.
        unsafe { bindings::rdma_link_register(reg.link_ops.get()) };
        reg.stage.store(STAGE_LINK, Ordering::Relaxed);
        Ok(reg)
    }

    /// Starts unregistering the first registered device matching `pred`, if
    /// any; returns it with a registration reference the caller must drop
    /// with `ib_device_put` or `ib_unregister_device_and_put`.
    fn get_registered(
        &self,
        pred: impl Fn(&DevEntry) -> bool,
    ) -> Option<NonNull<bindings::ib_device>> {
        let st = self.state.lock();
        st.devs.iter().filter(|e| e.registered && pred(e)).find_map(|e| {
            let ib = e.dev.cast::<bindings::ib_device>();
            // SAFETY: entries are removed in `dealloc_driver` before the
            // device is freed, and we hold the lock, so `ib` is valid.
            unsafe { ffi::rroce_ib_device_try_get(ib) }.then(|| NonNull::new(ib)).flatten()
        })
    }

    /// Unregisters every device; used at module unload.
    fn remove_all(&self) {
        loop {
            if let Some(ib) = self.get_registered(|_| true) {
                // SAFETY: we hold a registration reference from `get_registered`.
                unsafe { bindings::ib_unregister_device_and_put(ib.as_ptr()) };
                continue;
            }
            if self.state.lock().devs.is_empty() {
                break;
            }
            // A device is mid-unregistration (queued by a netdev event):
            // wait for its `dealloc_driver`.
            // SAFETY: process context.
            unsafe { bindings::msleep(10) };
        }
    }
}

#[pinned_drop]
impl PinnedDrop for Registration {
    fn drop(self: Pin<&mut Self>) {
        let stage = self.stage.load(Ordering::Relaxed);
        if stage >= STAGE_LINK {
            // SAFETY: registered in `new`; waits for running `newlink`s.
            unsafe { bindings::rdma_link_unregister(self.link_ops.get()) };
        }
        self.remove_all();
        if stage >= STAGE_NOTIFIER {
            // SAFETY: registered in `new`.
            unsafe { bindings::unregister_netdevice_notifier(self.nb.get()) };
        }
        if stage >= STAGE_PERNET {
            // SAFETY: registered in `new`; runs the exit hook for every
            // namespace, closing any sockets left.
            unsafe { bindings::unregister_pernet_subsys(self.pernet.get()) };
        }
        GLOBAL.store(ptr::null_mut(), Ordering::Release);
        // The devices are gone; what they freed through RCU must be freed
        // before this module's code goes.
        crate::sync::rcu::barrier();
    }
}

/// The device name prefix rroce devices must carry (`rroce0`, `rroce_a`…).
fn check_name(name: &CStr) -> Result {
    let prefix = crate::proto::abi::DEVICE_NAME_PREFIX.as_bytes();
    if name.as_bytes().starts_with(prefix) {
        Ok(())
    } else {
        Err(EINVAL)
    }
}

/// `rdma link add NAME type rroce netdev NDEV`.
fn newlink(name: &CStr, ndev: NonNull<bindings::net_device>) -> Result {
    let g = global()?;
    check_name(name)?;
    // SAFETY: nldev holds a reference on `ndev` for the whole call.
    let nref = unsafe { NetDevRef::hold(ndev) };
    if !nref.is_ether() {
        return Err(EINVAL);
    }
    let mac = nref.mac();
    let net = nref.net();

    let loopq = crate::loopback::LoopQueue::new()?;
    let mcast = crate::mcast::McastTable::new()?;
    let dev = {
        let mut st = g.state.lock();
        if st.devs.iter().any(|e| e.ndev == ndev.as_ptr()) {
            return Err(EEXIST);
        }
        st.devs.reserve(1, GFP_KERNEL)?;
        let sock = st.socks.get(net, || RxStats::new(g.rx))?;
        // SAFETY: plain allocation call; ib_core zeroes the memory and
        // initialises the embedded `ib_device`.
        let raw = unsafe { bindings::_ib_alloc_device(size_of::<RroceDev>()) }.cast::<RroceDev>();
        if raw.is_null() {
            st.socks.put(sock);
            return Err(ENOMEM);
        }
        let active = nref.is_active();
        // SAFETY: `raw` is a fresh zeroed allocation of the right size; the
        // private part is written once here and dropped in
        // `dealloc_driver`.
        unsafe {
            ptr::addr_of_mut!((*raw).p).write(DevPriv {
                ndev: nref,
                sock: Some(sock),
                parent: None,
                port_active: AtomicBool::new(active),
                pds: AtomicU32::new(0),
                cqs: AtomicU32::new(0),
                attrs: crate::limits::device_attrs(u64::from_ne_bytes(link::eui64_from_mac(mac))),
                keys: crate::keys::Keys::new(),
                qps: crate::ib::qp::QpTable::new(),
                srqns: IdTable::new(),
                ahs: RcuTable::new(),
                stats: crate::stats::Stats::new(),
                loopq,
                mcast,
                local_rx: g.local_rx,
            })
        };
        // Cannot fail: capacity was reserved above.
        let _ = st.devs.push(
            DevEntry { dev: raw, ndev: ndev.as_ptr(), registered: false, doomed: false },
            GFP_KERNEL,
        );
        raw
    };
    let ib = dev.cast::<bindings::ib_device>();
    // SAFETY: `ib` is our freshly allocated device; from now on
    // `ib_dealloc_device` (which calls our `dealloc_driver`) undoes it all.
    unsafe { bindings::ib_set_device_ops(ib, &(g.ops)(g.module)) };

    // SAFETY: `dev` is valid and not yet visible to anyone else but the
    // device table, which does not touch these fields.
    let res = unsafe { setup(dev) };
    let res = res.and_then(|()| rx_table_add(dev));
    let res = res.and_then(|()| {
        // SAFETY: `ib` is fully set up; `name` is a valid C string; a null
        // DMA device selects virtual DMA.
        to_result(unsafe { bindings::ib_register_device(ib, name.as_char_ptr(), ptr::null_mut()) })
    });
    if let Err(e) = res {
        // SAFETY: registration failed or was not attempted, so the device
        // is ours alone; this calls `dealloc_driver` and frees it.
        unsafe { bindings::ib_dealloc_device(ib) };
        return Err(e);
    }

    let doomed = {
        let mut st = g.state.lock();
        match st.devs.iter_mut().find(|e| e.dev == dev) {
            Some(e) => {
                e.registered = true;
                e.doomed
            }
            // Already unregistered by `rdma link delete`.
            None => false,
        }
    };
    if doomed {
        if let Some(ib) = g.get_registered(|e| e.dev == dev) {
            // SAFETY: we hold a registration reference.
            unsafe { bindings::ib_unregister_device_and_put(ib.as_ptr()) };
        }
        return Err(ENODEV);
    }
    Ok(())
}

/// Fills the `ib_device` fields of a new device.
///
/// # Safety
///
/// `dev` must be a freshly allocated, not yet registered rroce device.
unsafe fn setup(dev: *mut RroceDev) -> Result {
    // SAFETY: per the function's requirements we have exclusive access.
    let (ib, p) = unsafe { (&mut *(*dev).ib.get(), &mut (*dev).p) };
    let parent = match p.ndev.parent() {
        parent if !parent.is_null() => parent,
        _ => {
            let sp = SynthParent::new(&p.ndev)?;
            let d = sp.device();
            p.parent = Some(sp);
            d
        }
    };
    ib.__bindgen_anon_1.dev.parent = parent;
    ib.node_type = bindings::RDMA_NODE_IB_CA as u8;
    ib.phys_port_cnt = 1;
    // Legacy write() commands beyond ib_core's default set.
    ib.uverbs_cmd_mask |= (1u64 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ)
        | (1u64 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND);
    // SAFETY: plain query.
    ib.num_comp_vectors = unsafe { ffi::rroce_num_possible_cpus() } as c_int;
    ib.node_guid = p.attrs.sys_image_guid;
    let desc = b"rroce software RoCEv2\0";
    for (d, s) in ib.node_desc.iter_mut().zip(desc.iter()) {
        *d = *s as c_char;
    }
    // SAFETY: `ib` is valid and unregistered; we hold the netdev.
    to_result(unsafe { bindings::ib_device_set_netdev(ib, p.ndev.as_ptr(), 1) })
}

/// `ib_device_ops::dealloc_driver`: the last call ib_core makes for a
/// device.
///
/// # Safety
///
/// `ib` must be an rroce device whose private part is initialised; it is
/// dropped here and must not be used afterwards.
pub(crate) unsafe extern "C" fn dealloc_driver(ib: *mut bindings::ib_device) {
    let dev = ib.cast::<RroceDev>();
    // SAFETY: per the requirements `p` is initialised; ib_core frees the
    // memory later without dropping it, so moving it out is the one drop.
    let mut p = unsafe { ptr::addr_of_mut!((*dev).p).read() };
    // No receiver may be looking at the device once it is gone.
    rx_table_remove(dev);
    crate::sync::rcu::synchronize();
    if let Ok(g) = global() {
        let mut st = g.state.lock();
        if let Some(i) = st.devs.iter().position(|e| e.dev == dev) {
            crate::sync::kvec::swap_remove(&mut st.devs, i);
        }
        if let Some(s) = p.sock.take() {
            st.socks.put(s);
        }
    }
    drop(p);
}

/// Reports a port state change to ib_core consumers (and user space).
fn port_event(ib: NonNull<bindings::ib_device>) {
    // SAFETY: the caller holds a registration reference.
    let dev = unsafe { RroceDev::from_ib(ib.as_ptr()) };
    let active = dev.link_active();
    if dev.p.port_active.swap(active, Ordering::Relaxed) == active {
        return;
    }
    let mut ev = bindings::ib_event {
        device: ib.as_ptr(),
        event: if active {
            bindings::ib_event_type_IB_EVENT_PORT_ACTIVE
        } else {
            bindings::ib_event_type_IB_EVENT_PORT_ERR
        },
        ..Default::default()
    };
    ev.element.port_num = 1;
    // SAFETY: `ev` is a valid event for a registered device.
    unsafe { bindings::ib_dispatch_event(&ev) };
}

fn netdev_event(event: c_ulong, ndev: *mut bindings::net_device) -> Result {
    let g = global()?;
    let on_ndev = |e: &DevEntry| e.ndev == ndev;
    match event as u32 {
        bindings::netdev_cmd_NETDEV_UNREGISTER => {
            {
                let mut st = g.state.lock();
                for e in st.devs.iter_mut().filter(|e| e.ndev == ndev && !e.registered) {
                    e.doomed = true;
                }
            }
            if let Some(ib) = g.get_registered(on_ndev) {
                // SAFETY: we hold a registration reference; unregistration
                // must not run under the RTNL, so it is queued.
                unsafe {
                    bindings::ib_unregister_device_queued(ib.as_ptr());
                    bindings::ib_device_put(ib.as_ptr());
                }
            }
        }
        bindings::netdev_cmd_NETDEV_UP
        | bindings::netdev_cmd_NETDEV_DOWN
        | bindings::netdev_cmd_NETDEV_CHANGE => {
            if let Some(ib) = g.get_registered(on_ndev) {
                port_event(ib);
                // SAFETY: drops the reference from `get_registered`.
                unsafe { bindings::ib_device_put(ib.as_ptr()) };
            }
        }
        _ => {}
    }
    Ok(())
}

/// # Safety
///
/// Called by nldev with a valid name and a referenced netdev.
unsafe extern "C" fn newlink_callback(name: *const c_char, ndev: *mut bindings::net_device) -> c_int {
    from_result(|| {
        let ndev = NonNull::new(ndev).ok_or(EINVAL)?;
        if name.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: nldev passes a NUL-terminated name.
        let name = unsafe { CStr::from_char_ptr(name) };
        newlink(name, ndev)?;
        Ok(0)
    })
}

/// # Safety
///
/// Called by the netdev notifier chain with a valid `netdev_notifier_info`.
unsafe extern "C" fn netdev_event_callback(
    _nb: *mut bindings::notifier_block,
    event: c_ulong,
    info: *mut c_void,
) -> c_int {
    // SAFETY: `info` is the notifier info of a netdev event.
    let ndev = unsafe { ffi::rroce_netdev_notifier_info_to_dev(info) };
    if !ndev.is_null() {
        let _ = netdev_event(event, ndev);
    }
    bindings::NOTIFY_DONE as c_int
}

/// # Safety
///
/// Called by the netns core for a namespace being dismantled.
unsafe extern "C" fn net_exit_callback(net: *mut bindings::net) {
    if let Ok(g) = global() {
        g.state.lock().socks.net_exit(net);
    }
}

/// The port counters (`hw_counters`).
impl HwStats for Stats {
    type Dev = DevPriv;
    const DESCS: &'static [bindings::rdma_stat_desc] = crate::stats::DESCS.as_slice();

    fn read(dev: &RroceDev, values: &mut [u64]) {
        for (v, a) in values.iter_mut().zip(dev.p.stats.0.iter()) {
            *v = a.load(Ordering::Relaxed);
        }
    }
}
