// SPDX-License-Identifier: GPL-2.0
//! Multicast groups of UD QPs: `attach_mcast` / `detach_mcast`.
//!
//! C header: [`include/linux/igmp.h`](srctree/include/linux/igmp.h)
//!
//! Each device has a small table of groups, a group being a multicast GID
//! (an IPv4-mapped or IPv6 multicast address, as RoCEv2 carries them) and
//! the UD QPs attached to it.  The first attach of a group joins the IP
//! multicast group on the device's netdev (so the IP layer accepts datagrams
//! to it and the NIC's address filter passes them), the last detach leaves
//! it.  A UD datagram addressed to QP 0xFFFFFF is delivered to every QP
//! attached to the group of its destination address.
//!
//! Attach and detach (process context) are serialised by a mutex, which is
//! held across the join (that takes the RTNL); the receive path reads the
//! table under a BH spinlock.

#![forbid(unsafe_code)]

use core::pin::Pin;
use kernel::prelude::*;
use kernel::sync::Mutex;

use crate::net::netdev::NetDevRef;
use crate::sync::lock::{new_spinlock_bh, SpinLockBh};

/// Groups per device (`max_mcast_grp`).
pub(crate) const MAX_GROUPS: usize = 64;
/// QPs per group (`max_mcast_qp_attach`).
pub(crate) const MAX_QP_PER_GROUP: usize = 16;
/// Destination QP number of multicast datagrams.
pub(crate) const MCAST_QPN: u32 = 0xFF_FFFF;

#[derive(Clone, Copy, Default)]
struct Group {
    mgid: [u8; 16],
    /// QPs attached; a group with none is a free slot.
    n: usize,
    qpns: [u32; MAX_QP_PER_GROUP],
}

impl Group {
    fn qpns(&self) -> &[u32] {
        self.qpns.get(..self.n).unwrap_or(&[])
    }
}

/// The multicast groups of one device.
pub(crate) struct McastTable {
    groups: Pin<KBox<SpinLockBh<KVVec<Group>>>>,
    ctl: Pin<KBox<Mutex<()>>>,
}

/// Whether `gid` is a multicast GID (IPv4-mapped 224/4, or ff00::/8).
pub(crate) fn is_multicast(gid: &[u8; 16]) -> bool {
    let v4mapped = gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff;
    if v4mapped {
        gid[12] & 0xf0 == 0xe0
    } else {
        gid[0] == 0xff
    }
}

impl McastTable {
    pub(crate) fn new() -> Result<Self> {
        let mut v = KVVec::with_capacity(MAX_GROUPS, GFP_KERNEL)?;
        for _ in 0..MAX_GROUPS {
            v.push(Group::default(), GFP_KERNEL)?;
        }
        Ok(Self {
            groups: KBox::pin_init(new_spinlock_bh!(v, "rroce_mcast"), GFP_KERNEL)?,
            ctl: KBox::pin_init(kernel::new_mutex!(()), GFP_KERNEL)?,
        })
    }

    /// Attaches QP `qpn` to group `mgid`; joins the IP group on `ndev` for
    /// the group's first QP.  Attaching twice is not an error.
    pub(crate) fn attach(&self, ndev: &NetDevRef, mgid: &[u8; 16], qpn: u32) -> Result {
        if !is_multicast(mgid) {
            return Err(EINVAL);
        }
        let _ctl = self.ctl.lock();
        let new_group = {
            let mut g = self.groups.lock();
            if let Some(grp) = g.iter_mut().find(|x| x.n > 0 && x.mgid == *mgid) {
                if grp.qpns().contains(&qpn) {
                    return Ok(());
                }
                let slot = grp.qpns.get_mut(grp.n).ok_or(ENOMEM)?;
                *slot = qpn;
                grp.n += 1;
                return Ok(());
            }
            let grp = g.iter_mut().find(|x| x.n == 0).ok_or(ENOMEM)?;
            *grp = Group { mgid: *mgid, n: 1, ..Default::default() };
            grp.qpns[0] = qpn;
            true
        };
        if new_group {
            if let Err(e) = ndev.mcast_join(mgid, true) {
                let mut g = self.groups.lock();
                if let Some(grp) = g.iter_mut().find(|x| x.n > 0 && x.mgid == *mgid) {
                    *grp = Group::default();
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// Detaches QP `qpn` from group `mgid` (`EINVAL` if it is not
    /// attached); leaves the IP group with its last QP.
    pub(crate) fn detach(&self, ndev: &NetDevRef, mgid: &[u8; 16], qpn: u32) -> Result {
        let _ctl = self.ctl.lock();
        let emptied = {
            let mut g = self.groups.lock();
            let grp = g.iter_mut().find(|x| x.n > 0 && x.mgid == *mgid).ok_or(EINVAL)?;
            let i = grp.qpns().iter().position(|&q| q == qpn).ok_or(EINVAL)?;
            let last = grp.n - 1;
            grp.qpns.swap(i, last);
            grp.n = last;
            grp.n == 0
        };
        if emptied {
            // Leaving cannot fail in a way the caller could act on.
            let _ = ndev.mcast_join(mgid, false);
        }
        Ok(())
    }

    /// Detaches QP `qpn` from every group (it is being destroyed).
    pub(crate) fn forget_qp(&self, ndev: &NetDevRef, qpn: u32) {
        loop {
            let m = {
                let g = self.groups.lock();
                g.iter().find(|x| x.qpns().contains(&qpn)).map(|x| x.mgid)
            };
            let Some(m) = m else { break };
            if self.detach(ndev, &m, qpn).is_err() {
                break;
            }
        }
    }

    /// The QPs attached to `mgid`, copied into `out`; how many.
    pub(crate) fn members(&self, mgid: &[u8; 16], out: &mut [u32; MAX_QP_PER_GROUP]) -> usize {
        let g = self.groups.lock();
        match g.iter().find(|x| x.n > 0 && x.mgid == *mgid) {
            Some(grp) => {
                let q = grp.qpns();
                if let Some(dst) = out.get_mut(..q.len()) {
                    dst.copy_from_slice(q);
                }
                q.len()
            }
            None => 0,
        }
    }
}
