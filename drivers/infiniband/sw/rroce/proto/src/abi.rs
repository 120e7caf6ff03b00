// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! The user ABI between `rroce.ko` and `librroce-rdmav34.so`.
//!
//! One definition, compiled into both sides.  Every struct is `#[repr(C)]`,
//! has no implicit padding and only fixed-size integer fields, so its bytes
//! mean the same in the kernel and in userspace.

/// Version of the driver-private uverbs ABI (`ib_device_ops::uverbs_abi_ver`).
///
/// The provider accepts exactly this version.
pub const ABI_VERSION: u32 = 1;

/// Prefix of every rroce device name; the provider claims only these.
pub const DEVICE_NAME_PREFIX: &str = "rroce";

/// Driver data returned by `alloc_ucontext` (after the core's response).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocUcontextResp {
    /// Equal to [`ABI_VERSION`].
    pub abi_version: u32,
    /// Reserved, zero.
    pub reserved: u32,
    /// Feature bits of the driver (none defined yet).
    pub features: u64,
}

impl AllocUcontextResp {
    /// Serialized size in bytes.
    pub const SIZE: usize = 16;

    /// Little-endian-free native byte image, as `copy_to_user` sends it.
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        b[0..4].copy_from_slice(&self.abi_version.to_ne_bytes());
        b[4..8].copy_from_slice(&self.reserved.to_ne_bytes());
        b[8..16].copy_from_slice(&self.features.to_ne_bytes());
        b
    }
}

const _: () = assert!(core::mem::size_of::<AllocUcontextResp>() == AllocUcontextResp::SIZE);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ucontext_resp_bytes() {
        let r = AllocUcontextResp {
            abi_version: ABI_VERSION,
            reserved: 0,
            features: 0x0102_0304_0506_0708,
        };
        let b = r.to_bytes();
        assert_eq!(&b[0..4], &ABI_VERSION.to_ne_bytes());
        assert_eq!(&b[8..16], &0x0102_0304_0506_0708u64.to_ne_bytes());
    }
}
