// SPDX-License-Identifier: GPL-2.0
//! rroce devices: `rdma link add`, life alongside the netdev, removal.
//!
//! Each device is an `ib_device` allocated by ib_core with [`DevPriv`] right
//! behind it ([`RroceDev`], `ib::device`).  The driver's [`Registration`]
//! (the link type, the netdev notifier, the pernet hook, the list of
//! devices and the namespaces' sockets) is published in a [`Global`] for
//! the C callbacks, which carry no context; its lock is never held across
//! a call that may take the RTNL or wait for an unregistration.

#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::c_str;
use kernel::ffi::c_ulong;
use kernel::prelude::*;
use kernel::sync::Mutex;

use crate::ib::device::{DevGet, DevId, DevWeak, NewDevice, RxDevices, Setup};
use crate::ib::link::{LinkOps, NewLink};
use crate::ib::stats::HwStats;
use crate::net::netdev::{NetDevEvents, NetDevId, NetDevNotifier, NetDevRef, NetDevView};
use crate::net::pernet::{NetExit, Pernet};
use crate::net::udp::{NetSockRef, NetSocks};
use crate::proto::link;
use crate::stats::{RxHandler, RxDispatch, Stats};
use crate::sync::global::{Global, GlobalOwner, Teardown};
use crate::sync::idtable::RcuTable;
use crate::sync::rcu::ReadGuard;

/// The driver's private part of a device.
pub(crate) struct DevPriv {
    /// The Ethernet device the port runs on.
    pub(crate) ndev: NetDevRef,
    /// Our reference to the namespace's UDP sockets, given back on dealloc.
    sock: Option<NetSockRef<RxDispatch>>,
    /// Last port state reported to ib_core, to send each change once.
    port_active: AtomicBool,
    /// Protection domains in use, bounded by `attrs.max_pd`.
    pub(crate) pds: AtomicU32,
    /// XRC domains allocated.
    pub(crate) xrcds: AtomicU32,
    /// Completion queues in use, bounded by `attrs.max_cq`.
    pub(crate) cqs: AtomicU32,
    /// What `query_device` reports (ib_core keeps a copy in `ib.attrs`).
    pub(crate) attrs: kernel::bindings::ib_device_attr,
    /// Memory region and window keys (the index part).
    pub(crate) keys: crate::keys::Keys,
    /// Queue pairs by number.
    pub(crate) qps: crate::ib::qp::QpTable<<DevPriv as crate::ib::qp::HasQps>::Qp>,
    /// Shared receive queue numbers, and the XRC SRQs by number.
    pub(crate) srqs: crate::ib::srq::SrqTable<<DevPriv as crate::ib::srq::HasSrqs>::Srq>,
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
    /// The CRC-32 of the ICRCs it sends and checks.
    pub(crate) crc: crate::crc::Icrc,
}

/// Receives a packet a device sent to itself, inside the drain's RCU
/// read-side section.
pub(crate) type LocalRx = fn(&RroceDev, &crate::sync::rcu::ReadGuard, &[u8]);

/// An rroce device: ib_core's `ib_device` followed by ours.
pub(crate) type RroceDev = crate::ib::device::Device<DevPriv>;

impl RroceDev {
    /// Whether the port is up, as last reported to ib_core.
    pub(crate) fn link_active(&self) -> bool {
        self.p.ndev.is_active()
    }
}

/// Devices the receive path may deliver to, read locklessly under RCU
/// (entered before registration, removed by `dealloc_driver`).
pub(crate) static RX_DEVS: RxDevices<DevPriv> = RxDevices::new();

/// The device a received datagram is for: the one on the netdev it arrived
/// on, else (loopback, or a device on another netdev of the namespace) the
/// one whose netdev owns the destination address `dst` (16 bytes: IPv6,
/// 4: IPv4); borrowed for the read-side section `rcu`.
pub(crate) fn rx_device<'g>(in_dev: NetDevView<'_>, dst: &[u8], rcu: &'g ReadGuard) -> Option<&'g RroceDev> {
    let net = in_dev.net();
    let mut same_net = false;
    for dev in RX_DEVS.iter(rcu) {
        if dev.p.ndev.id() == in_dev.id() {
            return Some(dev);
        }
        same_net |= dev.p.ndev.net() == net;
    }
    // Slow path (loopback): look at every device of the namespace.
    if !same_net {
        return None;
    }
    RX_DEVS.iter(rcu).find(|dev| dev.p.ndev.net() == net && dev.p.ndev.has_addr(dst))
}

struct DevEntry {
    dev: DevWeak<DevPriv>,
    ndev: NetDevId,
    /// `ib_register_device` succeeded.
    registered: bool,
    /// The netdev went away before registration finished.
    doomed: bool,
}

struct State {
    devs: KVec<DevEntry>,
    /// Devices deallocated, whose unregistering thread may still be on its
    /// way out of `dealloc_driver` (module code): module unload waits for
    /// them ([`DevWeak::wait_unregistration`]); `newlink` prunes the ones
    /// done.
    gone: KVec<DevWeak<DevPriv>>,
    socks: NetSocks<RxDispatch>,
}

/// The kernel registrations, dropped in order by [`Teardown::teardown`].
struct Regs {
    pernet: Option<Pernet>,
    notifier: Option<NetDevNotifier>,
    link: Option<LinkOps>,
}

/// The driver's global registrations and device table.
#[pin_data]
pub(crate) struct Registration {
    #[pin]
    state: Mutex<State>,
    module: &'static ThisModule,
    /// The driver's `ib_device_ops` table (built by `verbs`).
    ops: fn(&'static ThisModule) -> kernel::bindings::ib_device_ops,
    /// What the namespaces' sockets hand their datagrams to (`recv::rx`).
    rx: RxHandler,
    /// What the devices' loopback queues hand their packets to.
    local_rx: LocalRx,
    /// The ICRC's CRC-32 for new devices (picked at module load).
    icrc: crate::crc::Choice,
    #[pin]
    regs: Mutex<Regs>,
}

/// The live registration, for the C callbacks (which get no context).
static GLOBAL: Global<Registration> = Global::new();

impl Registration {
    /// Registers the pernet hook, the netdev notifier and the `rroce` link
    /// type.
    pub(crate) fn new(
        module: &'static ThisModule,
        ops: fn(&'static ThisModule) -> kernel::bindings::ib_device_ops,
        rx: RxHandler,
        local_rx: LocalRx,
    ) -> Result<GlobalOwner<Self>> {
        let icrc = crate::crc::pick()?;
        let reg = KBox::pin_init(
            try_pin_init!(Self {
                state <- kernel::new_mutex!(State { devs: KVec::new(), gone: KVec::new(), socks: NetSocks::new() }),
                module,
                ops,
                rx,
                local_rx,
                icrc,
                regs <- kernel::new_mutex!(Regs { pernet: None, notifier: None, link: None }),
            }),
            GFP_KERNEL,
        )?;
        // From here on, dropping `owner` unwinds whatever was registered.
        let owner = GLOBAL.publish(reg)?;
        {
            let reg = owner.get().ok_or(EINVAL)?;
            let mut r = reg.regs.lock();
            r.pernet = Some(Pernet::register::<Callbacks>()?);
            r.notifier = Some(NetDevNotifier::register::<Callbacks>()?);
            r.link = Some(LinkOps::register::<Callbacks>(c_str!("rroce"))?);
        }
        Ok(owner)
    }

    /// A registration reference to the first registered device matching
    /// `pred`, if any.
    fn get_registered(&self, pred: impl Fn(&DevEntry) -> bool) -> Option<DevGet<DevPriv>> {
        let st = self.state.lock();
        st.devs.iter().filter(|e| e.registered && pred(e)).find_map(|e| e.dev.try_get())
    }

    /// Unregisters every device; used at module unload.
    fn remove_all(&self) {
        loop {
            if let Some(d) = self.get_registered(|_| true) {
                d.unregister();
                continue;
            }
            if self.state.lock().devs.is_empty() {
                break;
            }
            // A device is mid-unregistration (queued by a netdev event):
            // wait for its `dealloc_driver`.
            crate::sync::msleep(10);
        }
    }
}

impl Teardown for Registration {
    fn teardown(&self) {
        // No new devices (waits for running `newlink`s).
        let link = self.regs.lock().link.take();
        drop(link);
        self.remove_all();
        // The last unregistrations may still be leaving `dealloc_driver`.
        let gone = core::mem::take(&mut self.state.lock().gone);
        for w in &gone {
            w.wait_unregistration();
        }
        drop(gone);
        let notifier = self.regs.lock().notifier.take();
        drop(notifier);
        // Runs the exit hook for every namespace, closing any sockets left.
        let pernet = self.regs.lock().pernet.take();
        drop(pernet);
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

/// The legacy `write()` commands rroce serves beyond ib_core's defaults.
const UVERBS_CMDS: u64 = (1u64 << kernel::bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ)
    | (1u64 << kernel::bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND);

/// Allocates the device of `rdma link add` (not yet set up or registered)
/// and enters it in the device list.
#[inline(never)]
fn alloc_device(g: &Registration, nref: NetDevRef) -> Result<NewDevice<DevPriv>> {
    let mac = nref.mac();
    let net = nref.net();
    let ndev = nref.id();
    let loopq = crate::loopback::LoopQueue::new()?;
    let mcast = crate::mcast::McastTable::new()?;
    let crc = crate::crc::Icrc::new(g.icrc);
    let stats = Stats::new()?;
    let mut st = g.state.lock();
    if st.devs.iter().any(|e| e.ndev == ndev) {
        return Err(EEXIST);
    }
    // A netdev being unregistered gets no device: its NETDEV_UNREGISTER
    // may have run already.  (Checked under the lock the notifier takes to
    // mark entries doomed, so a later one finds the entry.)
    if !nref.is_registered() {
        return Err(ENODEV);
    }
    st.devs.reserve(1, GFP_KERNEL)?;
    let active = nref.is_active();
    let sock = st.socks.get(net, || RxDispatch::new(g.rx))?;
    let p = move || DevPriv {
        ndev: nref,
        sock: None,
        port_active: AtomicBool::new(active),
        pds: AtomicU32::new(0),
        xrcds: AtomicU32::new(0),
        cqs: AtomicU32::new(0),
        attrs: crate::limits::device_attrs(u64::from_ne_bytes(link::eui64_from_mac(mac))),
        keys: crate::keys::Keys::new(),
        qps: crate::ib::qp::QpTable::new(),
        srqs: crate::ib::srq::SrqTable::new(),
        ahs: RcuTable::new(),
        stats,
        loopq,
        mcast,
        local_rx: g.local_rx,
        crc,
    };
    // (No device may be dropped while the state is locked: its
    // `dealloc_driver` takes the lock.)
    let mut new = match NewDevice::new(p, || (g.ops)(g.module)) {
        Ok(new) => new,
        Err(e) => {
            st.socks.put(sock);
            return Err(e);
        }
    };
    match new.p_mut() {
        Some(p) => p.sock = Some(sock),
        None => st.socks.put(sock),
    }
    // Cannot fail: capacity was reserved above.  From now on dropping the
    // device (or a failed registration) runs `dealloc`, which removes the
    // entry and gives the socket back.
    let _ = st.devs.push(DevEntry { dev: new.weak(), ndev, registered: false, doomed: false }, GFP_KERNEL);
    Ok(new)
}

/// Forgets the deallocated devices whose unregistration is over.
fn prune_gone(g: &Registration) {
    let mut st = g.state.lock();
    let mut i = 0;
    while i < st.gone.len() {
        if st.gone.get(i).is_some_and(|w| w.unregistration_idle()) {
            crate::sync::kvec::swap_remove(&mut st.gone, i);
        } else {
            i += 1;
        }
    }
}

/// `rdma link add NAME type rroce netdev NDEV`.
fn newlink(name: &CStr, nref: NetDevRef) -> Result {
    let g = GLOBAL.get().ok_or(ENODEV)?;
    check_name(name)?;
    if !nref.is_ether() {
        return Err(EINVAL);
    }
    // On a VLAN device ib_core's GID management would give the port no
    // GID for its addresses (it matches them against the real device):
    // as rdma_rxe, on real devices only.
    if nref.is_vlan() {
        return Err(EPERM);
    }
    prune_gone(&g);
    let mut new = alloc_device(&g, nref)?;
    let id = new.dev().id();
    let setup = Setup { node_guid: new.dev().p.attrs.sys_image_guid, node_desc: b"rroce software RoCEv2", uverbs_cmds: UVERBS_CMDS };
    // On failure dropping `new` deallocates the device.
    new.setup(&setup)?;
    new.publish_rx()?;
    new.register(name)?;

    let doomed = {
        let mut st = g.state.lock();
        match st.devs.iter_mut().find(|e| e.dev.id() == id) {
            Some(e) => {
                e.registered = true;
                e.doomed
            }
            // Already unregistered by `rdma link delete`.
            None => false,
        }
    };
    if doomed {
        if let Some(d) = g.get_registered(|e| e.dev.id() == id) {
            d.unregister();
        }
        return Err(ENODEV);
    }
    // The notifier skipped the device until now: a link change during the
    // registration would be lost, and the next one taken for no change.
    // Under the RTNL, as the notifier's own calls.
    let _rtnl = crate::net::netdev::Rtnl::lock();
    if let Some(d) = g.get_registered(|e| e.dev.id() == id) {
        port_event(&d);
    }
    Ok(())
}

/// The device `id` is going away (`dealloc_driver`): out of the list, its
/// socket reference given back, its part dropped.
pub(crate) fn dealloc(mut p: DevPriv, id: DevId) {
    // Held until the part is dropped: module unload waits for it.
    let g = GLOBAL.get();
    if let Some(g) = g.as_ref() {
        let mut st = g.state.lock();
        if let Some(i) = st.devs.iter().position(|e| e.dev.id() == id) {
            let e = crate::sync::kvec::swap_remove(&mut st.devs, i);
            // (If this allocation fails, unload does not wait for this
            // device's last instructions here.)
            if let Some(e) = e {
                let _ = st.gone.push(e.dev, GFP_KERNEL);
            }
        }
        if let Some(s) = p.sock.take() {
            st.socks.put(s);
        }
    }
    drop(p);
    drop(g);
}

/// Reports a port state change to ib_core consumers (and user space).
fn port_event(d: &DevGet<DevPriv>) {
    let dev = d.dev();
    let active = dev.link_active();
    if dev.p.port_active.swap(active, Ordering::Relaxed) != active {
        d.port_event(active);
    }
}

fn netdev_event(event: c_ulong, ndev: NetDevId) -> Result {
    let g = GLOBAL.get().ok_or(ENODEV)?;
    let on_ndev = |e: &DevEntry| e.ndev == ndev;
    match event as u32 {
        kernel::bindings::netdev_cmd_NETDEV_UNREGISTER => {
            {
                let mut st = g.state.lock();
                for e in st.devs.iter_mut().filter(|e| e.ndev == ndev && !e.registered) {
                    e.doomed = true;
                }
            }
            // Unregistration must not run under the RTNL: it is queued.
            if let Some(d) = g.get_registered(on_ndev) {
                d.unregister_queued();
            }
        }
        kernel::bindings::netdev_cmd_NETDEV_UP
        | kernel::bindings::netdev_cmd_NETDEV_DOWN
        | kernel::bindings::netdev_cmd_NETDEV_CHANGE => {
            if let Some(d) = g.get_registered(on_ndev) {
                port_event(&d);
            }
        }
        _ => {}
    }
    Ok(())
}

/// The C callbacks of the registration.
struct Callbacks;

impl NewLink for Callbacks {
    fn newlink(name: &CStr, ndev: NetDevRef) -> Result {
        newlink(name, ndev)
    }
}

impl NetDevEvents for Callbacks {
    fn event(event: c_ulong, ndev: NetDevView<'_>) {
        let _ = netdev_event(event, ndev.id());
    }
}

impl NetExit for Callbacks {
    fn exit(net: *mut kernel::bindings::net) {
        if let Some(g) = GLOBAL.get() {
            g.state.lock().socks.net_exit(net);
        }
    }
}

/// The port counters (`hw_counters`).
impl HwStats for Stats {
    type Dev = DevPriv;
    const DESCS: &'static [kernel::bindings::rdma_stat_desc] = crate::stats::DESCS.as_slice();

    fn read(dev: &RroceDev, values: &mut [u64]) {
        dev.p.stats.read(values);
    }
}
