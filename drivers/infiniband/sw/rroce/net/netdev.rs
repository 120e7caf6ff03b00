// SPDX-License-Identifier: GPL-2.0
//! Counted references to the Ethernet devices rroce ports run on.
//!
//! C header: [`include/linux/netdevice.h`](srctree/include/linux/netdevice.h)

use core::pin::Pin;
use core::ptr::NonNull;
use kernel::bindings;
use kernel::prelude::*;
use kernel::types::Opaque;

use crate::ffi;

/// `ARPHRD_ETHER`: the only link type rroce runs on.
const ARPHRD_ETHER: u16 = 1;

/// A reference to a `struct net_device` that keeps it from being freed.
///
/// # Invariants
///
/// `self.0` points to a valid `net_device` on which this object owns one
/// `dev_hold()` reference, released on drop.
pub(crate) struct NetDevRef(NonNull<bindings::net_device>);

// SAFETY: a held `net_device` may be used and released from any thread.
unsafe impl Send for NetDevRef {}
// SAFETY: all methods only read fields the networking core allows to be
// read concurrently (with `READ_ONCE` where the core requires it).
unsafe impl Sync for NetDevRef {}

impl NetDevRef {
    /// Takes a new reference on `ndev`.
    ///
    /// # Safety
    ///
    /// `ndev` must point to a valid `net_device` that the caller keeps alive
    /// for the duration of the call (holds a reference or the RTNL).
    pub(crate) unsafe fn hold(ndev: NonNull<bindings::net_device>) -> Self {
        // SAFETY: `ndev` is valid per the function's safety requirements.
        unsafe { ffi::rroce_dev_hold(ndev.as_ptr()) };
        // INVARIANT: the reference was just taken.
        Self(ndev)
    }

    /// The raw pointer, for identity comparisons and calls into C.
    pub(crate) fn as_ptr(&self) -> *mut bindings::net_device {
        self.0.as_ptr()
    }

    /// Current Ethernet MTU.
    pub(crate) fn mtu(&self) -> u32 {
        // SAFETY: by the type invariant the device is valid.
        unsafe { ffi::rroce_netdev_mtu(self.as_ptr()) }
    }

    /// Whether the device is administratively up.
    pub(crate) fn is_running(&self) -> bool {
        // SAFETY: by the type invariant the device is valid.
        unsafe { ffi::rroce_netif_running(self.as_ptr()) }
    }

    /// Whether the device is up and has carrier: the RoCE port is active.
    pub(crate) fn is_active(&self) -> bool {
        // SAFETY: by the type invariant the device is valid.
        self.is_running() && unsafe { ffi::rroce_netif_carrier_ok(self.as_ptr()) }
    }

    /// Whether this is an Ethernet device.
    pub(crate) fn is_ether(&self) -> bool {
        // SAFETY: by the type invariant the device is valid; `type_` is set
        // before registration and never changes.
        unsafe { (*self.as_ptr()).type_ == ARPHRD_ETHER }
    }

    /// Whether this is a VLAN device (`is_vlan_dev`).
    pub(crate) fn is_vlan(&self) -> bool {
        // SAFETY: by the type invariant the device is valid.
        unsafe { ffi::rroce_is_vlan_dev(self.as_ptr()) }
    }

    /// The permanent-for-now MAC address (`dev_addr`).
    pub(crate) fn mac(&self) -> [u8; 6] {
        let mut mac = [0u8; 6];
        // SAFETY: by the type invariant the device is valid; an Ethernet
        // device's `dev_addr` holds at least `ETH_ALEN` bytes.
        unsafe {
            let addr = (*self.as_ptr()).dev_addr;
            if !addr.is_null() {
                core::ptr::copy_nonoverlapping(addr, mac.as_mut_ptr(), mac.len());
            }
        }
        mac
    }

    /// The network namespace the device lives in (identity only).
    pub(crate) fn net(&self) -> *mut bindings::net {
        // SAFETY: by the type invariant the device is valid.
        unsafe { ffi::rroce_dev_net(self.as_ptr()) }
    }

    /// The device's `struct device`.
    pub(crate) fn device(&self) -> *mut bindings::device {
        // SAFETY: by the type invariant the device is valid; this only
        // computes a field address.
        unsafe { core::ptr::addr_of_mut!((*self.as_ptr()).dev) }
    }

    /// The parent of the device's `struct device` (the virtio or PCI
    /// function), or null for purely virtual devices such as veth.
    pub(crate) fn parent(&self) -> *mut bindings::device {
        // SAFETY: `device()` is valid; `parent` is fixed at registration.
        unsafe { (*self.device()).parent }
    }

    /// Joins (`join`) or leaves the IPv4/IPv6 multicast group that RoCEv2
    /// maps the multicast GID `mgid` to, on this device.
    pub(crate) fn mcast_join(&self, mgid: &[u8; 16], join: bool) -> kernel::error::Result {
        // SAFETY: by the type invariant the device is valid; `mgid` points
        // to the 16 bytes the helper reads.
        let err = unsafe { ffi::rroce_mcast_join(self.as_ptr(), mgid.as_ptr(), join) };
        kernel::error::to_result(err)
    }

    /// Whether `addr` (4 bytes: IPv4, 16: IPv6) is an address of this
    /// device.  Any context (RCU inside).
    pub(crate) fn has_addr(&self, addr: &[u8]) -> bool {
        let ipv6 = match addr.len() {
            4 => false,
            16 => true,
            _ => return false,
        };
        // SAFETY: by the type invariant the device is valid; `addr` holds
        // the family's length.
        unsafe { ffi::rroce_ndev_has_addr(self.as_ptr(), ipv6, addr.as_ptr()) }
    }

    /// Whether the device is registered (not yet being unregistered).
    pub(crate) fn is_registered(&self) -> bool {
        // SAFETY: by the type invariant the device is valid; `reg_state`
        // is a plain byte the core writes under the RTNL.
        let st = unsafe { core::ptr::read_volatile(core::ptr::addr_of!((*self.as_ptr()).reg_state)) };
        u32::from(st) == bindings::netdev_reg_state_NETREG_REGISTERED
    }

    /// The interface name, NUL-terminated.
    pub(crate) fn name_ptr(&self) -> *const kernel::ffi::c_char {
        // SAFETY: by the type invariant the device is valid; `name` is a
        // NUL-terminated array inside it.
        unsafe { (*self.as_ptr()).name.as_ptr() }
    }
}

impl Drop for NetDevRef {
    fn drop(&mut self) {
        // SAFETY: by the type invariant we own one reference.
        unsafe { ffi::rroce_dev_put(self.as_ptr()) };
    }
}

/// The identity of a netdev (its address), for comparisons.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct NetDevId(usize);

impl NetDevRef {
    /// The device's identity.
    pub(crate) fn id(&self) -> NetDevId {
        NetDevId(self.as_ptr() as usize)
    }
}

/// A netdev borrowed for `'a`: the one a packet arrived on, or the one of
/// a notifier event.
///
/// # Invariants
///
/// `self.0` is a `net_device` kept alive for `'a` by whoever lent it.
#[derive(Clone, Copy)]
pub(crate) struct NetDevView<'a>(NonNull<bindings::net_device>, core::marker::PhantomData<&'a bindings::net_device>);

impl NetDevView<'_> {
    /// A view of `ndev`.
    ///
    /// # Safety
    ///
    /// `ndev` is null or a `net_device` that stays alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ndev: *mut bindings::net_device) -> Option<NetDevView<'a>> {
        // INVARIANT: per the requirements.
        NonNull::new(ndev).map(|p| NetDevView(p, core::marker::PhantomData))
    }

    /// The device's identity.
    pub(crate) fn id(&self) -> NetDevId {
        NetDevId(self.0.as_ptr() as usize)
    }

    /// The network namespace the device lives in (identity only).
    pub(crate) fn net(&self) -> *mut bindings::net {
        // SAFETY: alive (type invariant).
        unsafe { ffi::rroce_dev_net(self.0.as_ptr()) }
    }
}

/// What a netdev notifier reports to.
pub(crate) trait NetDevEvents: 'static {
    /// Netdev event `event` (`NETDEV_*`) of `ndev`, under the RTNL.
    fn event(event: kernel::ffi::c_ulong, ndev: NetDevView<'_>);
}

/// A registered netdev notifier (`register_netdevice_notifier`),
/// unregistered on drop.
///
/// # Invariants
///
/// `nb` is registered, with callback [`notifier_cb::<H>`] for some `H`.
pub(crate) struct NetDevNotifier {
    nb: Pin<KBox<Opaque<bindings::notifier_block>>>,
}

// SAFETY: the notifier chain synchronises registration and calls.
unsafe impl Send for NetDevNotifier {}
// SAFETY: no method works through `&self`.
unsafe impl Sync for NetDevNotifier {}

impl NetDevNotifier {
    /// Registers `H`'s notifier (replaying `REGISTER`/`UP` events for the
    /// netdevs already there, as the notifier core does).
    pub(crate) fn register<H: NetDevEvents>() -> kernel::error::Result<Self> {
        let nb = KBox::pin(
            Opaque::new(bindings::notifier_block { notifier_call: Some(notifier_cb::<H>), ..Default::default() }),
            GFP_KERNEL,
        )?;
        // SAFETY: `nb` is pinned in its box until unregistered in `drop`.
        kernel::error::to_result(unsafe { bindings::register_netdevice_notifier(nb.get()) })?;
        // INVARIANT: registered just above.
        Ok(Self { nb })
    }
}

impl Drop for NetDevNotifier {
    fn drop(&mut self) {
        // SAFETY: registered (type invariant); waits for running callbacks.
        unsafe { bindings::unregister_netdevice_notifier(self.nb.get()) };
    }
}

/// The notifier callback of [`NetDevNotifier::register::<H>`].
///
/// # Safety
///
/// Called by the netdev notifier chain with a `netdev_notifier_info`.
unsafe extern "C" fn notifier_cb<H: NetDevEvents>(
    _nb: *mut bindings::notifier_block,
    event: kernel::ffi::c_ulong,
    info: *mut kernel::ffi::c_void,
) -> kernel::ffi::c_int {
    // SAFETY: `info` is the notifier info of a netdev event, whose netdev
    // is alive for the call.
    if let Some(ndev) = unsafe { NetDevView::from_raw(ffi::rroce_netdev_notifier_info_to_dev(info)) } {
        H::event(event, ndev);
    }
    bindings::NOTIFY_DONE as kernel::ffi::c_int
}

/// The RTNL (`rtnl_lock`), held until the guard goes: what netdev
/// notifiers run under.  Process context only; never while holding a lock
/// a notifier takes.
///
/// # Invariants
///
/// Created by [`Rtnl::lock`], which took the RTNL; the drop releases it.
/// Not `Send`: released where it was taken.
pub(crate) struct Rtnl(core::marker::PhantomData<*mut ()>);

impl Rtnl {
    /// Takes the RTNL (sleeps).
    pub(crate) fn lock() -> Self {
        // SAFETY: process context (the caller's contract); paired with the
        // unlock in `drop`.
        unsafe { bindings::rtnl_lock() };
        // INVARIANT: taken just above.
        Rtnl(core::marker::PhantomData)
    }
}

impl Drop for Rtnl {
    fn drop(&mut self) {
        // SAFETY: by the type invariant this thread holds the RTNL.
        unsafe { bindings::rtnl_unlock() };
    }
}
