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
    pub fn to_bytes(self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        b[0..4].copy_from_slice(&self.abi_version.to_ne_bytes());
        b[4..8].copy_from_slice(&self.reserved.to_ne_bytes());
        b[8..16].copy_from_slice(&self.features.to_ne_bytes());
        b
    }
}

const _: () = assert!(core::mem::size_of::<AllocUcontextResp>() == AllocUcontextResp::SIZE);

// ---- Create commands and responses of the mapped queues --------------
//
// Commands are the driver data the provider appends to the core uverbs
// command (`udata` in); a kernel reads `min(inlen, SIZE)` bytes into a
// zeroed buffer, so an older, shorter command reads as zero fields.
// Responses are the driver data after the core response (`udata` out).
// The provider maps each ring with
// `mmap(NULL, ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, cmd_fd,
// mmap_offset)`; the offset is the key of an `rdma_user_mmap_entry`.  The
// ring format is described in `ring`, the entry formats in `wqe`.

use super::bytes::{ne32 as get_u32, ne64 as get_u64, put};

/// Driver data of `create_cq`, `create_qp`, `create_srq` and `resize_cq`
/// commands: no flags are defined yet; the kernel rejects non-zero `flags`
/// or `reserved`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreateQueueCmd {
    /// Request flags (none defined, zero).
    pub flags: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

/// Driver data of `create_cq`.
pub type CreateCqCmd = CreateQueueCmd;
/// Driver data of `create_qp`.
pub type CreateQpCmd = CreateQueueCmd;
/// Driver data of `create_srq`.
pub type CreateSrqCmd = CreateQueueCmd;
/// Driver data of `resize_cq` (`IB_USER_VERBS_CMD_RESIZE_CQ`).
pub type ResizeCqCmd = CreateQueueCmd;

impl CreateQueueCmd {
    /// Serialized size in bytes.
    pub const SIZE: usize = 8;

    /// Native byte image.
    pub fn to_bytes(self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        put(&mut b, 0, self.flags.to_ne_bytes());
        put(&mut b, 4, self.reserved.to_ne_bytes());
        b
    }

    /// Parse a byte image.
    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        Self {
            flags: get_u32(b, 0),
            reserved: get_u32(b, 4),
        }
    }

    /// Whether this version of the kernel accepts the command.
    pub const fn is_valid(&self) -> bool {
        self.flags == 0 && self.reserved == 0
    }
}

const _: () = assert!(core::mem::size_of::<CreateQueueCmd>() == CreateQueueCmd::SIZE);

/// Driver data returned by `create_cq`: where and how to map the CQ ring.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreateCqResp {
    /// `mmap` offset of the ring.
    pub mmap_offset: u64,
    /// Bytes to map (`RingLayout::bytes_total`, page aligned).
    pub ring_bytes: u32,
    /// Ring slots (a power of two; the CQ holds this many CQEs).
    pub entries: u32,
    /// Bytes per CQE slot (`wqe::CQE_BYTES`).
    pub entry_size: u32,
    /// CQ number (for diagnostics).
    pub cqn: u32,
}

impl CreateCqResp {
    /// Serialized size in bytes.
    pub const SIZE: usize = 24;

    /// Native byte image, as `copy_to_user` sends it.
    pub fn to_bytes(self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        put(&mut b, 0, self.mmap_offset.to_ne_bytes());
        put(&mut b, 8, self.ring_bytes.to_ne_bytes());
        put(&mut b, 12, self.entries.to_ne_bytes());
        put(&mut b, 16, self.entry_size.to_ne_bytes());
        put(&mut b, 20, self.cqn.to_ne_bytes());
        b
    }

    /// Parse a byte image.
    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        Self {
            mmap_offset: get_u64(b, 0),
            ring_bytes: get_u32(b, 8),
            entries: get_u32(b, 12),
            entry_size: get_u32(b, 16),
            cqn: get_u32(b, 20),
        }
    }
}

const _: () = assert!(core::mem::size_of::<CreateCqResp>() == CreateCqResp::SIZE);

/// Driver data returned by `resize_cq` (after the core's
/// `ib_uverbs_resize_cq_resp`): the CQ's new ring, which replaces the old
/// one.  The old ring's offset stops working for new mappings; an existing
/// mapping of it stays valid until `munmap` but gets no new CQEs.  The
/// unpolled CQEs of the old ring are in the new one, at the same indices.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResizeCqResp {
    /// `mmap` offset of the new ring.
    pub mmap_offset: u64,
    /// Bytes to map (`RingLayout::bytes_total`, page aligned).
    pub ring_bytes: u32,
    /// Ring slots (a power of two; the CQ now holds this many CQEs).
    pub entries: u32,
    /// Bytes per CQE slot (`wqe::CQE_BYTES`).
    pub entry_size: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

impl ResizeCqResp {
    /// Serialized size in bytes.
    pub const SIZE: usize = 24;

    /// Native byte image, as `copy_to_user` sends it.
    pub fn to_bytes(self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        put(&mut b, 0, self.mmap_offset.to_ne_bytes());
        put(&mut b, 8, self.ring_bytes.to_ne_bytes());
        put(&mut b, 12, self.entries.to_ne_bytes());
        put(&mut b, 16, self.entry_size.to_ne_bytes());
        put(&mut b, 20, self.reserved.to_ne_bytes());
        b
    }

    /// Parse a byte image.
    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        Self {
            mmap_offset: get_u64(b, 0),
            ring_bytes: get_u32(b, 8),
            entries: get_u32(b, 12),
            entry_size: get_u32(b, 16),
            reserved: get_u32(b, 20),
        }
    }
}

const _: () = assert!(core::mem::size_of::<ResizeCqResp>() == ResizeCqResp::SIZE);

/// The answer to an SRQ resize (`modify_srq` with `IB_SRQ_MAX_WR`): the
/// new ring, as for a CQ resize; `entries` is the SRQ's new `max_wr`.
/// `modify_srq` has no response buffer, so the kernel writes it to the
/// address [`ModifySrqCmd::resp_addr`] names.
pub type ResizeSrqResp = ResizeCqResp;

/// Driver data of `modify_srq`: where a resize's [`ResizeSrqResp`] goes
/// (an address in the caller's memory; 0 when not resizing).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct ModifySrqCmd {
    /// User address of a [`ResizeSrqResp`].
    pub resp_addr: u64,
}

impl ModifySrqCmd {
    /// Serialized size in bytes.
    pub const SIZE: usize = 8;

    /// Native byte image.
    pub fn to_bytes(self) -> [u8; Self::SIZE] {
        self.resp_addr.to_ne_bytes()
    }

    /// Parse a byte image.
    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        Self {
            resp_addr: get_u64(b, 0),
        }
    }
}

const _: () = assert!(core::mem::size_of::<ModifySrqCmd>() == ModifySrqCmd::SIZE);

/// Driver data returned by `create_qp`: the SQ and RQ rings and the
/// capacities their entry sizes really offer (at least what was asked).
/// A QP attached to an SRQ has no RQ: `rq_entries == 0` and the other
/// `rq_*` fields are zero.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreateQpResp {
    /// `mmap` offset of the SQ ring.
    pub sq_offset: u64,
    /// `mmap` offset of the RQ ring (0 without RQ).
    pub rq_offset: u64,
    /// Bytes to map for the SQ.
    pub sq_bytes: u32,
    /// Bytes to map for the RQ (0 without RQ).
    pub rq_bytes: u32,
    /// SQ slots (a power of two).
    pub sq_entries: u32,
    /// RQ slots (a power of two, 0 without RQ).
    pub rq_entries: u32,
    /// Bytes per SQ slot (multiple of 64).
    pub sq_entry_size: u32,
    /// Bytes per RQ slot (multiple of 64, 0 without RQ).
    pub rq_entry_size: u32,
    /// SGEs per send WQE.
    pub max_send_sge: u32,
    /// SGEs per receive WQE.
    pub max_recv_sge: u32,
    /// Inline bytes per send WQE.
    pub max_inline: u32,
    /// QP number.
    pub qpn: u32,
    /// Flags (none defined yet, zero).
    pub flags: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

impl CreateQpResp {
    /// Serialized size in bytes.
    pub const SIZE: usize = 64;

    /// Native byte image, as `copy_to_user` sends it.
    pub fn to_bytes(self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        put(&mut b, 0, self.sq_offset.to_ne_bytes());
        put(&mut b, 8, self.rq_offset.to_ne_bytes());
        let words = [
            self.sq_bytes,
            self.rq_bytes,
            self.sq_entries,
            self.rq_entries,
            self.sq_entry_size,
            self.rq_entry_size,
            self.max_send_sge,
            self.max_recv_sge,
            self.max_inline,
            self.qpn,
            self.flags,
            self.reserved,
        ];
        for (i, w) in words.iter().enumerate() {
            put(&mut b, 16 + 4 * i, w.to_ne_bytes());
        }
        b
    }

    /// Parse a byte image.
    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        Self {
            sq_offset: get_u64(b, 0),
            rq_offset: get_u64(b, 8),
            sq_bytes: get_u32(b, 16),
            rq_bytes: get_u32(b, 20),
            sq_entries: get_u32(b, 24),
            rq_entries: get_u32(b, 28),
            sq_entry_size: get_u32(b, 32),
            rq_entry_size: get_u32(b, 36),
            max_send_sge: get_u32(b, 40),
            max_recv_sge: get_u32(b, 44),
            max_inline: get_u32(b, 48),
            qpn: get_u32(b, 52),
            flags: get_u32(b, 56),
            reserved: get_u32(b, 60),
        }
    }
}

const _: () = assert!(core::mem::size_of::<CreateQpResp>() == CreateQpResp::SIZE);

/// Driver data returned by `create_srq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreateSrqResp {
    /// `mmap` offset of the ring.
    pub mmap_offset: u64,
    /// Bytes to map.
    pub ring_bytes: u32,
    /// Ring slots (a power of two).
    pub entries: u32,
    /// Bytes per slot (multiple of 64).
    pub entry_size: u32,
    /// SGEs per receive WQE.
    pub max_sge: u32,
    /// SRQ number.
    pub srqn: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

impl CreateSrqResp {
    /// Serialized size in bytes.
    pub const SIZE: usize = 32;

    /// Native byte image, as `copy_to_user` sends it.
    pub fn to_bytes(self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        put(&mut b, 0, self.mmap_offset.to_ne_bytes());
        put(&mut b, 8, self.ring_bytes.to_ne_bytes());
        put(&mut b, 12, self.entries.to_ne_bytes());
        put(&mut b, 16, self.entry_size.to_ne_bytes());
        put(&mut b, 20, self.max_sge.to_ne_bytes());
        put(&mut b, 24, self.srqn.to_ne_bytes());
        put(&mut b, 28, self.reserved.to_ne_bytes());
        b
    }

    /// Parse a byte image.
    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        Self {
            mmap_offset: get_u64(b, 0),
            ring_bytes: get_u32(b, 8),
            entries: get_u32(b, 12),
            entry_size: get_u32(b, 16),
            max_sge: get_u32(b, 20),
            srqn: get_u32(b, 24),
            reserved: get_u32(b, 28),
        }
    }
}

const _: () = assert!(core::mem::size_of::<CreateSrqResp>() == CreateSrqResp::SIZE);

/// Driver data returned by `create_ah` for user AHs: the number that UD
/// send WQEs carry in their `ah` field.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreateAhResp {
    /// AH number (never 0 for a valid AH).
    pub ah_num: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

impl CreateAhResp {
    /// Serialized size in bytes.
    pub const SIZE: usize = 8;

    /// Native byte image, as `copy_to_user` sends it.
    pub fn to_bytes(self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        put(&mut b, 0, self.ah_num.to_ne_bytes());
        put(&mut b, 4, self.reserved.to_ne_bytes());
        b
    }

    /// Parse a byte image.
    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        Self {
            ah_num: get_u32(b, 0),
            reserved: get_u32(b, 4),
        }
    }
}

const _: () = assert!(core::mem::size_of::<CreateAhResp>() == CreateAhResp::SIZE);

#[cfg(test)]
mod queue_abi_tests {
    use super::*;

    #[test]
    fn cmd_round_trip_and_validity() {
        let c = CreateQpCmd::default();
        assert!(c.is_valid());
        assert_eq!(CreateQueueCmd::from_bytes(&c.to_bytes()), c);
        let bad = CreateCqCmd {
            flags: 1,
            reserved: 0,
        };
        assert!(!bad.is_valid());
        assert!(!CreateSrqCmd::from_bytes(&[0, 0, 0, 0, 1, 0, 0, 0]).is_valid());
    }

    #[test]
    fn resp_round_trips_and_offsets() {
        let cq = CreateCqResp {
            mmap_offset: 0x1122_3344_5566_7788,
            ring_bytes: 8192,
            entries: 64,
            entry_size: 64,
            cqn: 7,
        };
        let b = cq.to_bytes();
        assert_eq!(&b[0..8], &0x1122_3344_5566_7788u64.to_ne_bytes());
        assert_eq!(&b[20..24], &7u32.to_ne_bytes());
        assert_eq!(CreateCqResp::from_bytes(&b), cq);

        let qp = CreateQpResp {
            sq_offset: 1 << 12,
            rq_offset: 2 << 12,
            sq_bytes: 3,
            rq_bytes: 4,
            sq_entries: 5,
            rq_entries: 6,
            sq_entry_size: 7,
            rq_entry_size: 8,
            max_send_sge: 9,
            max_recv_sge: 10,
            max_inline: 11,
            qpn: 12,
            flags: 13,
            reserved: 14,
        };
        let b = qp.to_bytes();
        for (i, v) in (3u32..=14).enumerate() {
            assert_eq!(&b[16 + 4 * i..20 + 4 * i], &v.to_ne_bytes());
        }
        assert_eq!(CreateQpResp::from_bytes(&b), qp);

        let srq = CreateSrqResp {
            mmap_offset: 3 << 12,
            ring_bytes: 4096,
            entries: 16,
            entry_size: 64,
            max_sge: 3,
            srqn: 9,
            reserved: 0,
        };
        let b = srq.to_bytes();
        assert_eq!(&b[24..28], &9u32.to_ne_bytes());
        assert_eq!(CreateSrqResp::from_bytes(&b), srq);

        let ah = CreateAhResp {
            ah_num: 42,
            reserved: 0,
        };
        assert_eq!(CreateAhResp::from_bytes(&ah.to_bytes()), ah);
    }

    #[test]
    fn resize_cq_abi() {
        let r = ResizeCqResp {
            mmap_offset: 0x0102_0304_0506_7000,
            ring_bytes: 0x0001_1000,
            entries: 1024,
            entry_size: 64,
            reserved: 0xA5A5_5A5A,
        };
        let b = r.to_bytes();
        assert_eq!(b.len(), 24);
        assert_eq!(&b[0..8], &0x0102_0304_0506_7000u64.to_ne_bytes());
        assert_eq!(&b[8..12], &0x0001_1000u32.to_ne_bytes());
        assert_eq!(&b[12..16], &1024u32.to_ne_bytes());
        assert_eq!(&b[16..20], &64u32.to_ne_bytes());
        assert_eq!(&b[20..24], &0xA5A5_5A5Au32.to_ne_bytes());
        assert_eq!(ResizeCqResp::from_bytes(&b), r);
        assert_eq!(ResizeCqResp::from_bytes(&[0; 24]), ResizeCqResp::default());
        let m = ModifySrqCmd {
            resp_addr: 0x7fff_1234_5678,
        };
        assert_eq!(ModifySrqCmd::from_bytes(&m.to_bytes()), m);
        assert_eq!(&m.to_bytes(), &0x7fff_1234_5678u64.to_ne_bytes());
        // The geometry fields sit where they sit in the create response,
        // so one parser shape serves both.
        let c = CreateCqResp {
            mmap_offset: r.mmap_offset,
            ring_bytes: r.ring_bytes,
            entries: r.entries,
            entry_size: r.entry_size,
            cqn: 0,
        };
        assert_eq!(&c.to_bytes()[..20], &b[..20]);
        // The command is the create commands' flags/reserved pair.
        assert_eq!(ResizeCqCmd::SIZE, 8);
        assert!(ResizeCqCmd::default().is_valid());
        assert_eq!(ResizeCqCmd::default().to_bytes(), [0u8; 8]);
        assert!(!ResizeCqCmd::from_bytes(&[1, 0, 0, 0, 0, 0, 0, 0]).is_valid());
        assert!(!ResizeCqCmd::from_bytes(&[0, 0, 0, 0, 0, 0, 0, 0x80]).is_valid());
    }
}

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
