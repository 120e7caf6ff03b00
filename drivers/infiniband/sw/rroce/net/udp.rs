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
//!
//! The registry is generic over what receives the datagrams: a
//! [`Receiver`] is allocated with each namespace's sockets and gets every
//! datagram they take, as an owned [`SkBuff`], in softirq context.

use core::ptr::{self, NonNull};
use kernel::bindings;
use kernel::error::to_result;
use kernel::ffi::{c_int, c_void};
use kernel::prelude::*;

use crate::ffi;
use crate::net::skb::SkBuff;
use crate::sync::kvec::swap_remove;

/// The IANA port of RoCEv2.
pub(crate) const ROCE_V2_PORT: u16 = 4791;

const EAFNOSUPPORT: c_int = 97;

/// What a namespace's sockets hand their datagrams to.
pub(crate) trait Receiver: Send + Sync + 'static {
    /// One datagram (IP header to the end; see [`SkBuff::prepare_rx`]).
    /// Softirq context, under RCU; the skb is freed when dropped.
    fn receive(&self, skb: SkBuff);
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
pub(crate) struct NetSock<R: Receiver> {
    net: *mut bindings::net,
    users: usize,
    dead: bool,
    sock4: *mut bindings::socket,
    sock6: *mut bindings::socket,
    /// What the receive callback sees through `sk_user_data`: a separate
    /// allocation, so that the registry's `&mut NetSock` never aliases the
    /// callbacks' shared references (they only use its atomics).
    rx: NonNull<R>,
}

impl<R: Receiver> NetSock<R> {
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
pub(crate) struct NetSockRef<R: Receiver>(*const NetSock<R>);

// SAFETY: the pointee is only read through atomics or under the registry lock.
unsafe impl<R: Receiver> Send for NetSockRef<R> {}
// SAFETY: as above.
unsafe impl<R: Receiver> Sync for NetSockRef<R> {}

/// All namespaces' sockets; lives in the driver's global state, under its lock.
pub(crate) struct NetSocks<R: Receiver>(KVec<KBox<NetSock<R>>>);

// SAFETY: the raw pointers inside are kernel objects usable from any thread;
// the registry is only touched under the driver's state mutex.
unsafe impl<R: Receiver> Send for NetSocks<R> {}

impl<R: Receiver> NetSocks<R> {
    pub(crate) const fn new() -> Self {
        Self(KVec::new())
    }

    /// Takes a reference to `net`'s sockets, opening them if needed.
    /// `rx` makes the receiver of a namespace's new sockets.
    pub(crate) fn get(&mut self, net: *mut bindings::net, rx: impl FnOnce() -> R) -> Result<NetSockRef<R>> {
        if let Some(e) = self.0.iter_mut().find(|e| !e.dead && e.net == net) {
            e.users += 1;
            return Ok(NetSockRef(&**e));
        }
        self.0.reserve(1, GFP_KERNEL)?;
        let rx = KBox::new(rx(), GFP_KERNEL)?;
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
            ffi::rroce_udp_tunnel_open(net, false, ROCE_V2_PORT, data, rx_callback::<R>, &mut e.sock4)
        })?;
        // SAFETY: as above.
        let err = unsafe {
            ffi::rroce_udp_tunnel_open(net, true, ROCE_V2_PORT, data, rx_callback::<R>, &mut e.sock6)
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
    pub(crate) fn put(&mut self, r: NetSockRef<R>) {
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

impl<R: Receiver> Drop for NetSock<R> {
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
unsafe extern "C" fn rx_callback<R: Receiver>(sk: *mut bindings::sock, skb: *mut bindings::sk_buff) -> c_int {
    // SAFETY: `sk` is valid per the function's contract.
    let rx = unsafe { ffi::rroce_sk_user_data(sk) }.cast::<R>().cast_const();
    // SAFETY: the UDP stack hands us an skb we own, its network header set.
    let skb = NonNull::new(skb).map(|skb| unsafe { SkBuff::from_rx(skb) });
    // SAFETY: `sk_user_data` is the `rx` of a `NetSock<R>` (the callback
    // was registered with the same `R`), freed only after the socket was
    // released and an RCU grace period passed; we are in an RCU read-side
    // section.
    if let (Some(rx), Some(skb)) = (unsafe { rx.as_ref() }, skb) {
        rx.receive(skb);
    }
    0
}
