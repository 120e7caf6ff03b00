// SPDX-License-Identifier: GPL-2.0
//! A sysfs parent for rroce devices whose netdev has none (veth, tun…).
//!
//! User space (rdma-core's tests, `rdma_cm` users) finds the Ethernet
//! interface of an RDMA device under `/sys/class/infiniband/DEV/device/net/`.
//! For a netdev with a bus parent (virtio-net, a PCI NIC) that parent already
//! has such a `net/` directory and becomes the RDMA device's parent too.  A
//! purely virtual netdev has no parent, so rroce makes a small root device
//! `/sys/devices/rroce.N` (N unique for the module's lifetime: the RDMA
//! device name may still turn out to be taken, and netdev names repeat
//! across namespaces) with a `net/IFNAME` link to the netdev.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::bindings;
use kernel::c_str;
use kernel::prelude::*;
use kernel::fmt;
use kernel::str::CString;

use crate::net::netdev::NetDevRef;

/// A synthetic parent device with its `net/IFNAME` link.
///
/// # Invariants
///
/// `dev` is a registered root device and `net` a kobject under it that holds
/// one link named `link_name`; both are owned by this object.  Their release
/// functions belong to the driver core, not to this module, so a late final
/// reference drop after module unload is harmless.
pub(crate) struct SynthParent {
    dev: NonNull<bindings::device>,
    net: NonNull<bindings::kobject>,
    link_name: [u8; 16],
}

// SAFETY: driver-core objects may be released from any thread.
unsafe impl Send for SynthParent {}
// SAFETY: no method mutates through a shared reference.
unsafe impl Sync for SynthParent {}

impl SynthParent {
    /// Creates `/sys/devices/rroce.N` with `net/IFNAME` pointing at `ndev`.
    pub(crate) fn new(ndev: &NetDevRef) -> Result<Self> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = CString::try_from_fmt(fmt!("rroce.{}", NEXT.fetch_add(1, Ordering::Relaxed)))?;
        // SAFETY: `name` is a valid C string; no owner module is recorded, so
        // no link back to this module is made.
        let dev = unsafe { bindings::__root_device_register(name.as_char_ptr(), core::ptr::null_mut()) };
        let dev = NonNull::new(kernel::error::from_err_ptr(dev)?).ok_or(ENOMEM)?;
        // SAFETY: `dev` was just registered, so its kobject is live.
        let net = unsafe {
            bindings::kobject_create_and_add(
                c_str!("net").as_char_ptr(),
                core::ptr::addr_of_mut!((*dev.as_ptr()).kobj),
            )
        };
        let Some(net) = NonNull::new(net) else {
            // SAFETY: `dev` is the root device registered above.
            unsafe { bindings::root_device_unregister(dev.as_ptr()) };
            return Err(ENOMEM);
        };
        let mut link_name = [0u8; 16];
        // SAFETY: `name_ptr` is NUL-terminated and at most IFNAMSIZ (16)
        // bytes long including the NUL.
        let ifname = unsafe { CStr::from_char_ptr(ndev.name_ptr()) };
        let bytes = ifname.as_bytes();
        let n = bytes.len().min(link_name.len() - 1);
        link_name[..n].copy_from_slice(&bytes[..n]);
        // SAFETY: `net` is live; the target kobject belongs to the netdev we
        // hold; `link_name` is NUL-terminated.
        let err = unsafe {
            bindings::sysfs_create_link(
                net.as_ptr(),
                core::ptr::addr_of_mut!((*ndev.device()).kobj),
                link_name.as_ptr(),
            )
        };
        if err != 0 {
            // SAFETY: both were created above and are dropped exactly once.
            unsafe {
                bindings::kobject_put(net.as_ptr());
                bindings::root_device_unregister(dev.as_ptr());
            }
            return Err(Error::from_errno(err));
        }
        // INVARIANT: all three objects were created above.
        Ok(Self { dev, net, link_name })
    }

    /// The `struct device` to use as the RDMA device's parent.
    pub(crate) fn device(&self) -> *mut bindings::device {
        self.dev.as_ptr()
    }
}

impl Drop for SynthParent {
    fn drop(&mut self) {
        // SAFETY: by the type invariant we own the link, the kobject and the
        // root device; each is released exactly once here.
        unsafe {
            bindings::sysfs_remove_link(self.net.as_ptr(), self.link_name.as_ptr());
            bindings::kobject_put(self.net.as_ptr());
            bindings::root_device_unregister(self.dev.as_ptr());
        }
    }
}
