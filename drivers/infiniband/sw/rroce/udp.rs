// SPDX-License-Identifier: GPL-2.0
//! The RoCEv2 UDP sockets, one pair (IPv4, IPv6) per network namespace.
//!
//! C header: [`include/net/udp_tunnel.h`](srctree/include/net/udp_tunnel.h)
//!
//! A namespace gets its sockets when the first rroce device on one of its
//! netdevs is created and loses them with the last one, so `rdma_rxe` (which
//! binds port 4791 in `init_net` for as long as it is loaded) can run beside
//! rroce devices in other namespaces.  If a namespace dies while a device
//! still counts as a user (its unregistration is queued), the pernet exit
//! hook closes the sockets early and marks the entry dead.

use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::bindings;
use kernel::error::to_result;
use kernel::ffi::{c_int, c_void};
use kernel::prelude::*;

use crate::ffi;
use crate::sync::kvec::swap_remove;

/// The IANA port of RoCEv2.
pub(crate) const ROCE_V2_PORT: u16 = 4791;

const EAFNOSUPPORT: c_int = 97;

/// Receive counters of one namespace's sockets.
#[derive(Default)]
pub(crate) struct RxStats {
    /// Packets delivered to the sockets.
    pub(crate) packets: AtomicU64,
    /// Packets dropped because no queue pair could take them.
    pub(crate) dropped_no_qp: AtomicU64,
    /// Packets dropped because they are malformed (IP/UDP/BTH layout).
    pub(crate) dropped_malformed: AtomicU64,
    /// Packets dropped for a wrong ICRC.
    pub(crate) dropped_icrc: AtomicU64,
    /// Packets for which no rroce device was found.
    pub(crate) dropped_no_dev: AtomicU64,
}

/// The sockets of one namespace.
///
/// # Invariants
///
/// While `dead` is false, `sock4` is an open tunnel socket of `net` whose
/// `sk_user_data` points to `rx`, and `sock6` is either null or the same
/// for IPv6.  Once `dead`, both are null and `net` is a stale address.
/// `rx` is owned (from [`KBox::into_raw`]) and freed only after the sockets
/// are closed and an RCU grace period has passed.
pub(crate) struct NetSock {
    net: *mut bindings::net,
    users: usize,
    dead: bool,
    sock4: *mut bindings::socket,
    sock6: *mut bindings::socket,
    /// What the receive callback sees through `sk_user_data`: a separate
    /// allocation, so that the registry's `&mut NetSock` never aliases the
    /// callbacks' shared references (they only use its atomics).
    rx: NonNull<RxStats>,
}

impl NetSock {
    /// Closes the sockets; returns whether any was open.
    fn close(&mut self) -> bool {
        let mut closed = false;
        for sock in [&mut self.sock4, &mut self.sock6] {
            if !sock.is_null() {
                // SAFETY: per the invariant the socket is open and ours; it
                // is released exactly once because we null it right after.
                unsafe { bindings::udp_tunnel_sock_release(*sock) };
                *sock = ptr::null_mut();
                closed = true;
            }
        }
        self.dead = true;
        closed
    }
}

/// Handle of a user's reference to a [`NetSock`], returned by [`NetSocks::get`].
///
/// # Invariants
///
/// Points into a live entry of the [`NetSocks`] that issued it, and that
/// entry's `users` counts this handle until it is given back with
/// [`NetSocks::put`].
pub(crate) struct NetSockRef(*const NetSock);

// SAFETY: the pointee is only read through atomics or under the registry lock.
unsafe impl Send for NetSockRef {}
// SAFETY: as above.
unsafe impl Sync for NetSockRef {}

/// All namespaces' sockets; lives in the driver's global state, under its lock.
pub(crate) struct NetSocks(KVec<KBox<NetSock>>);

// SAFETY: the raw pointers inside are kernel objects usable from any thread;
// the registry is only touched under the driver's state mutex.
unsafe impl Send for NetSocks {}

impl NetSocks {
    pub(crate) const fn new() -> Self {
        Self(KVec::new())
    }

    /// Takes a reference to `net`'s sockets, opening them if needed.
    pub(crate) fn get(&mut self, net: *mut bindings::net) -> Result<NetSockRef> {
        if let Some(e) = self.0.iter_mut().find(|e| !e.dead && e.net == net) {
            e.users += 1;
            return Ok(NetSockRef(&**e));
        }
        self.0.reserve(1, GFP_KERNEL)?;
        let rx = KBox::new(RxStats::default(), GFP_KERNEL)?;
        // From here on dropping `e` closes the sockets and frees `rx`.
        let mut e = KBox::new(
            NetSock {
                net,
                users: 1,
                dead: false,
                sock4: ptr::null_mut(),
                sock6: ptr::null_mut(),
                rx: NonNull::from(KBox::leak(rx)),
            },
            GFP_KERNEL,
        )?;
        let data = e.rx.as_ptr().cast::<c_void>();
        // SAFETY: `net` is the live namespace of a netdev the caller holds;
        // `data` stays valid until the socket is released (`close`) and an
        // RCU grace period has passed (`put`/`net_exit` free it after
        // `synchronize_rcu`).
        to_result(unsafe {
            ffi::rroce_udp_tunnel_open(net, false, ROCE_V2_PORT, data, rx_callback, &mut e.sock4)
        })?;
        // SAFETY: as above.
        let err = unsafe {
            ffi::rroce_udp_tunnel_open(net, true, ROCE_V2_PORT, data, rx_callback, &mut e.sock6)
        };
        if err != 0 && err != -EAFNOSUPPORT {
            // Dropping `e` closes the IPv4 socket.
            return Err(Error::from_errno(err));
        }
        let r = NetSockRef(&*e);
        // Cannot fail: capacity was reserved above.
        self.0.push(e, GFP_KERNEL)?;
        Ok(r)
    }

    /// Gives back a reference; closes the sockets with the last one.
    pub(crate) fn put(&mut self, r: NetSockRef) {
        let Some(i) = self.0.iter().position(|e| ptr::eq(&**e, r.0)) else {
            return;
        };
        let e = &mut self.0[i];
        e.users = e.users.saturating_sub(1);
        if e.users == 0 {
            // Dropping closes the sockets and waits out the receivers.
            drop(swap_remove(&mut self.0, i));
        }
    }

    /// A namespace is going away: close its sockets now.
    pub(crate) fn net_exit(&mut self, net: *mut bindings::net) {
        let Some(i) = self.0.iter().position(|e| !e.dead && e.net == net) else {
            return;
        };
        self.0[i].close();
        if self.0[i].users == 0 {
            drop(swap_remove(&mut self.0, i));
        }
    }
}

impl Drop for NetSock {
    fn drop(&mut self) {
        // Whether closed now or earlier (`net_exit`), receive callbacks may
        // still be reading this object through `sk_user_data`: wait them
        // out before the memory goes.
        self.close();
        // SAFETY: objects are dropped in process context only.
        unsafe { bindings::synchronize_rcu() };
        // SAFETY: by the type invariant `rx` came from `KBox::into_raw`;
        // the sockets are closed and their callbacks are over.
        drop(unsafe { KBox::from_raw(self.rx.as_ptr()) });
    }
}

/// `encap_rcv` of the tunnel sockets: every RoCEv2 datagram of the namespace.
///
/// Returns 0: the skb is consumed.
///
/// # Safety
///
/// Called by the UDP stack in softirq context under RCU with a valid socket
/// and an skb we own.
unsafe extern "C" fn rx_callback(sk: *mut bindings::sock, skb: *mut bindings::sk_buff) -> c_int {
    // SAFETY: `sk` is valid per the function's contract.
    let rx = unsafe { ffi::rroce_sk_user_data(sk) }.cast::<RxStats>().cast_const();
    // SAFETY: `sk_user_data` is the `rx` of a `NetSock`, freed only after
    // the socket was released and an RCU grace period passed; we are in an
    // RCU read-side section.
    if let Some(rx) = unsafe { rx.as_ref() } {
        rx.packets.fetch_add(1, Ordering::Relaxed);
        let mut data: *mut u8 = ptr::null_mut();
        let mut len: kernel::ffi::c_uint = 0;
        // SAFETY: we own `skb`.
        if unsafe { ffi::rroce_skb_linear(skb, &mut data, &mut len) } == 0 && !data.is_null() {
            // SAFETY: the skb is linear; `len` bytes from its network
            // header are ours to read until we free it.
            let pkt = unsafe { core::slice::from_raw_parts(data, len as usize) };
            // SAFETY: `skb` is valid.
            let in_dev = unsafe { ffi::rroce_skb_dev(skb) };
            let counter = match crate::dp::rx(in_dev, pkt) {
                Ok(()) => None,
                Err(crate::dp::RxDrop::Malformed) => Some(&rx.dropped_malformed),
                Err(crate::dp::RxDrop::Icrc) => Some(&rx.dropped_icrc),
                Err(crate::dp::RxDrop::NoDevice) => Some(&rx.dropped_no_dev),
                Err(crate::dp::RxDrop::NoQp) => Some(&rx.dropped_no_qp),
            };
            if let Some(c) = counter {
                c.fetch_add(1, Ordering::Relaxed);
            }
        } else {
            rx.dropped_malformed.fetch_add(1, Ordering::Relaxed);
        }
    }
    // SAFETY: we own `skb`.
    unsafe { ffi::rroce_kfree_skb(skb) };
    0
}
