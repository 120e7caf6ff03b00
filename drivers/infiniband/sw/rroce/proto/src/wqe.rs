// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Binary formats of the entries of the mapped rings: send WQEs (SQ),
//! receive WQEs (RQ/SRQ) and completion entries (CQ).
//!
//! All fields are native-endian at fixed offsets (both sides run on the
//! same machine); there is no implicit padding: every byte is either a
//! field or reserved.  Encoders write reserved bytes as zero.
//!
//! # Send WQE (SQ entry)
//!
//! ```text
//! off size field
//!   0   8  wr_id
//!   8   1  opcode       SendOpcode (values of enum ibv_wr_opcode)
//!   9   1  flags        SEND_FENCE 1 | SEND_SIGNALED 2 | SEND_SOLICITED 4 |
//!                       SEND_INLINE 8 (values of enum ibv_send_flags)
//!  10   2  num_sge      number of SGEs after the header (0 if INLINE)
//!  12   4  inline_len   bytes of inline data after the header (0 unless INLINE)
//!  16   4  imm_or_inv   *_WITH_IMM: immediate data exactly as in
//!                       ibv_send_wr.imm_data (a __be32: the 4 bytes in memory
//!                       are the wire bytes);  SEND_WITH_INV, LOCAL_INV: the
//!                       rkey to invalidate (host order);  BIND_MW: the rkey
//!                       of the MW being bound
//!  20   4  rkey         RDMA/atomic remote key;  BIND_MW: the new rkey
//!  24   8  remote_addr  RDMA/atomic remote address;  BIND_MW: bind address
//!  32   8  compare_add  CMP_AND_SWP: compare;  FETCH_AND_ADD: add;
//!                       ATOMIC_WRITE: the 8 bytes to write, in memory
//!                       order (read as a native u64; no SGE);
//!                       FLUSH: the length of the range;
//!                       BIND_MW: bind length
//!  40   8  swap         CMP_AND_SWP: swap;  FLUSH: placement type bits
//!                       (bits 7:0) and selectivity level (bits 15:8)
//!  48   4  remote_qpn   UD: destination QPN (24 bits);  XRC initiator:
//!                       destination XRC SRQ number (24 bits);
//!                       BIND_MW: MR lkey
//!  52   4  remote_qkey  UD: Q_Key;  BIND_MW: access flags
//!  56   4  ah           UD: address handle number from create_ah;
//!                       BIND_MW: the type of the window as the poster
//!                       saw it, BIND_TYPE1 (1, `ibv_bind_mw`) or
//!                       BIND_TYPE2 (2, `IBV_WR_BIND_MW`)
//!  60   4  reserved     zero
//!  64      num_sge x SGE  or  inline_len bytes of inline data
//! ```
//!
//! # Receive WQE (RQ/SRQ entry)
//!
//! ```text
//!   0   8  wr_id
//!   8   2  num_sge
//!  10   6  reserved     zero
//!  16      num_sge x SGE
//! ```
//!
//! # SGE (16 bytes)
//!
//! ```text
//!   0   8  addr   4  8  length   12  4  lkey
//! ```
//!
//! # Entry sizes
//!
//! Entry sizes are multiples of [`WQE_ALIGN`] (64) so no two entries share a
//! cache line, but not necessarily powers of two:
//! `send = roundup64(64 + max(16 * max_send_sge, roundup16(max_inline)))`,
//! `recv = roundup64(16 + 16 * max_recv_sge)`.  The kernel reports back the
//! capacities that the rounded size really offers ([`send_caps`],
//! [`recv_max_sge`]).
//!
//! # Validation ([`decode_send`], [`decode_recv`])
//!
//! The kernel decodes only its private copy of an entry and rejects:
//! unknown opcodes, opcodes not allowed on the QP ([`OpcodeSet`]), unknown
//! flag bits, non-zero reserved bytes, more SGEs than the QP's maximum or
//! than fit in the entry, inline data that is longer than the maximum, does
//! not fit the entry, is combined with SGEs or flagged inconsistently, or
//! is used with an opcode that does not take local data (RDMA READ,
//! atomics), SGEs on LOCAL_INV/BIND_MW, atomics whose local buffer is not
//! exactly one 8-byte SGE, a UD destination QPN above 24 bits, and a total
//! length above the device's maximum message size.  Fields that an opcode
//! does not use are ignored, as are the SGE slots beyond `num_sge` and the
//! bytes after the inline data.  Remote address alignment of atomics and
//! all key checks are left to the MR/QP logic.
//!
//! # CQE (64 bytes)
//!
//! ```text
//!   0   8  wr_id
//!   8   1  status          WcStatus (ib_wc_status == ibv_wc_status)
//!   9   1  opcode          WcOpcode (ibv_wc_opcode)
//!  10   1  wc_flags        WC_GRH 1 | WC_WITH_IMM 2 | WC_IP_CSUM_OK 4 |
//!                          WC_WITH_INV 8 (enum ibv_wc_flags)
//!  11   1  sl
//!  12   4  byte_len
//!  16   4  imm_or_inv      WITH_IMM: as ibv_wc.imm_data (__be32, wire bytes in
//!                          memory);  WITH_INV: invalidated rkey (host order)
//!  20   4  qp_num
//!  24   4  src_qp
//!  28   4  vendor_err
//!  32   2  slid
//!  34   2  pkey_index
//!  36   1  dlid_path_bits
//!  37   1  network_hdr_type  UD receives: enum rdma_network_type (2 IPv4,
//!                          3 IPv6), for kernel consumers; else 0
//!  38   2  reserved        zero
//!  40   8  timestamp       CQs created with completion timestamps: the
//!                          kernel's CLOCK_MONOTONIC in ns when the CQE was
//!                          written (the "device clock", 1 GHz); else 0
//!  48  16  reserved        zero
//! ```
//!
//! 64 rather than 48 bytes: one CQE per cache line (the kernel writes CQE
//! n+1 while user space reads CQE n) and room for later fields.  The CQE is written by the trusted kernel; [`Cqe::decode`]
//! still checks the enumerations and flags and ignores reserved bytes.

/// Size of the send WQE header.
pub const SEND_HDR_BYTES: usize = 64;
/// Size of the receive WQE header.
pub const RECV_HDR_BYTES: usize = 16;
/// Size of one SGE.
pub const SGE_BYTES: usize = 16;
/// Size of one CQE.
pub const CQE_BYTES: usize = 64;
/// WQE entry sizes are multiples of this (one cache line).
pub const WQE_ALIGN: u32 = 64;
/// Largest message length RoCE allows (IBA C9-94: 2^31).
pub const MAX_MSG_SIZE: u32 = 1 << 31;
/// Largest 24-bit QPN.
pub const MAX_QPN: u32 = 0x00FF_FFFF;

/// Send flag: wait for prior RDMA READ/atomics before this WQE.
pub const SEND_FENCE: u8 = 1;
/// Send flag: generate a CQE on success.
pub const SEND_SIGNALED: u8 = 2;
/// Send flag: set the solicited-event bit.
pub const SEND_SOLICITED: u8 = 4;
/// Send flag: the data follows the header inline.
pub const SEND_INLINE: u8 = 8;
/// BIND_MW `ah` field: a type-1 bind (`ibv_bind_mw`).
pub const BIND_TYPE1: u32 = 1;
/// BIND_MW `ah` field: a type-2 bind (a posted `IBV_WR_BIND_MW`).
pub const BIND_TYPE2: u32 = 2;

/// All defined send flags.
pub const SEND_FLAGS_ALL: u8 = SEND_FENCE | SEND_SIGNALED | SEND_SOLICITED | SEND_INLINE;

/// CQE flag: a GRH is in the first 40 bytes of the receive buffer (UD).
pub const WC_GRH: u8 = 1;
/// CQE flag: `imm_or_inv` holds immediate data.
pub const WC_WITH_IMM: u8 = 2;
/// CQE flag: IP checksum verified.
pub const WC_IP_CSUM_OK: u8 = 4;
/// CQE flag: `imm_or_inv` holds the invalidated rkey.
pub const WC_WITH_INV: u8 = 8;
/// All defined CQE flags.
pub const WC_FLAGS_ALL: u8 = WC_GRH | WC_WITH_IMM | WC_IP_CSUM_OK | WC_WITH_INV;

/// Why a WQE or CQE was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WqeError {
    /// The entry is shorter than its header and declared payload, or an
    /// output buffer is too small.
    TooShort,
    /// Opcode value not defined.
    UnknownOpcode,
    /// Opcode defined but not allowed on this QP.
    OpcodeNotAllowed,
    /// Undefined flag bits set.
    BadFlags,
    /// Reserved bytes not zero.
    ReservedNotZero,
    /// More SGEs than the QP's maximum (or than a `u16`).
    TooManySge,
    /// The opcode requires no SGEs (LOCAL_INV, BIND_MW) but has some.
    UnexpectedSge,
    /// Inline flag and length inconsistent, inline with SGEs, or inline
    /// data on an opcode without local source data.
    BadInline,
    /// Inline data longer than the QP's maximum.
    InlineTooLong,
    /// Sum of lengths above the maximum message size.
    LengthOverflow,
    /// An atomic without exactly one 8-byte SGE.
    BadAtomic,
    /// UD destination QPN above 24 bits.
    BadQpn,
    /// BIND_MW with an `ah` field that is not a window type.
    BadBind,
    /// FLUSH with SGEs, no or unknown placement type bits, an unknown
    /// selectivity level, or a range longer than a RETH can name.
    BadFlush,
    /// CQE status value not defined.
    UnknownStatus,
}

use super::bytes::{ne16 as rd16, ne32 as rd32, ne64 as rd64, put as wr, u8_at as rd8};
pub use super::hdr::{FLUSH_GLOBAL, FLUSH_MR, FLUSH_PERSISTENT, FLUSH_RANGE};

#[inline]
fn all_zero(b: &[u8], range: core::ops::Range<usize>) -> bool {
    b.get(range).is_some_and(|s| s.iter().all(|&x| x == 0))
}

/// Send opcodes.  Values equal those of `enum ibv_wr_opcode`, so the
/// provider stores `wr->opcode` after checking it is defined here; values
/// not listed (IBV_WR_TSO = 10, DRIVER1 = 11, ATOMIC_WRITE = 15, ...) are
/// rejected for now.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOpcode {
    /// RDMA WRITE.
    RdmaWrite = 0,
    /// RDMA WRITE with immediate data.
    RdmaWriteWithImm = 1,
    /// SEND.
    Send = 2,
    /// SEND with immediate data.
    SendWithImm = 3,
    /// RDMA READ.
    RdmaRead = 4,
    /// Atomic compare and swap.
    AtomicCmpAndSwp = 5,
    /// Atomic fetch and add.
    AtomicFetchAndAdd = 6,
    /// Local invalidate.
    LocalInv = 7,
    /// Bind a type-2 memory window.
    BindMw = 8,
    /// SEND with invalidate.
    SendWithInv = 9,
    /// Fast registration of a kernel MR (`IB_WR_REG_MR`); kernel QPs only,
    /// not in [`SendOpcode::ALL`] nor `ibv_wr_opcode` (see [`OpcodeSet::RC_KERNEL`]).
    /// Fields: `rkey` the new key, `remote_addr` the iova, `compare_add`
    /// the length, `swap` page size (low 32 bits) and page count (high 32
    /// bits), `remote_qkey` the access flags.
    RegMr = 12,
    /// IBTA 1.5 FLUSH: make the earlier writes to `length` (`compare_add`)
    /// bytes at `remote_addr`, or to the whole region of `rkey`, globally
    /// visible and/or persistent (`swap`: placement type and selectivity
    /// level, see [`SendWqe::flush_params`]); no SGE; RC only.
    Flush = 14,
    /// IBTA 1.5 ATOMIC WRITE: 8 bytes (in `compare_add`, no SGE) written
    /// to `remote_addr` (8-byte aligned) as one unit; RC only.
    AtomicWrite = 15,
}

impl SendOpcode {
    /// Every opcode of `ibv_wr_opcode` rroce has, in value order.
    pub const ALL: [Self; 12] = [
        Self::RdmaWrite,
        Self::RdmaWriteWithImm,
        Self::Send,
        Self::SendWithImm,
        Self::RdmaRead,
        Self::AtomicCmpAndSwp,
        Self::AtomicFetchAndAdd,
        Self::LocalInv,
        Self::BindMw,
        Self::SendWithInv,
        Self::Flush,
        Self::AtomicWrite,
    ];

    /// The opcode with value `v`.
    pub const fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::RdmaWrite,
            1 => Self::RdmaWriteWithImm,
            2 => Self::Send,
            3 => Self::SendWithImm,
            4 => Self::RdmaRead,
            5 => Self::AtomicCmpAndSwp,
            6 => Self::AtomicFetchAndAdd,
            7 => Self::LocalInv,
            8 => Self::BindMw,
            9 => Self::SendWithInv,
            12 => Self::RegMr,
            14 => Self::Flush,
            15 => Self::AtomicWrite,
            _ => return None,
        })
    }

    /// Bit of this opcode in an [`OpcodeSet`] (values are below 16).
    pub const fn bit(self) -> u16 {
        1 << (self as u8)
    }

    /// Whether `imm_or_inv` carries immediate data.
    pub const fn has_imm(self) -> bool {
        matches!(self, Self::RdmaWriteWithImm | Self::SendWithImm)
    }

    /// Whether `imm_or_inv` carries an rkey to invalidate.
    pub const fn has_inv(self) -> bool {
        matches!(self, Self::SendWithInv | Self::LocalInv)
    }

    /// Whether the opcode is an atomic.
    pub const fn is_atomic(self) -> bool {
        matches!(self, Self::AtomicCmpAndSwp | Self::AtomicFetchAndAdd)
    }

    /// Whether the opcode is local (no packet).
    pub const fn is_local(self) -> bool {
        matches!(self, Self::LocalInv | Self::BindMw | Self::RegMr)
    }

    /// Whether the SGEs are a *source* that may be replaced by inline data.
    pub const fn allows_inline(self) -> bool {
        matches!(
            self,
            Self::RdmaWrite
                | Self::RdmaWriteWithImm
                | Self::Send
                | Self::SendWithImm
                | Self::SendWithInv
        )
    }

    /// Opcode of the completion of this WQE.
    pub const fn wc_opcode(self) -> WcOpcode {
        match self {
            Self::RdmaWrite | Self::RdmaWriteWithImm => WcOpcode::RdmaWrite,
            Self::Send | Self::SendWithImm | Self::SendWithInv => WcOpcode::Send,
            Self::RdmaRead => WcOpcode::RdmaRead,
            Self::AtomicCmpAndSwp => WcOpcode::CompSwap,
            Self::AtomicFetchAndAdd => WcOpcode::FetchAdd,
            Self::LocalInv => WcOpcode::LocalInv,
            Self::BindMw => WcOpcode::BindMw,
            Self::RegMr => WcOpcode::RegMr,
            Self::AtomicWrite => WcOpcode::AtomicWrite,
            Self::Flush => WcOpcode::Flush,
        }
    }
}

/// A set of send opcodes (bit `n` = opcode value `n`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpcodeSet(pub u16);

impl OpcodeSet {
    /// Opcodes of an RC QP: all of `ibv_wr_opcode` rroce has.
    pub const RC: Self = Self(0x03FF | SendOpcode::Flush.bit() | SendOpcode::AtomicWrite.bit());
    /// Opcodes of a UC QP: no RDMA READ, no atomics, and no SEND with
    /// invalidate (UC has no opcode for it on the wire).
    pub const UC: Self = Self(
        SendOpcode::RdmaWrite.bit()
            | SendOpcode::RdmaWriteWithImm.bit()
            | SendOpcode::Send.bit()
            | SendOpcode::SendWithImm.bit()
            | SendOpcode::LocalInv.bit()
            | SendOpcode::BindMw.bit(),
    );
    /// Opcodes of a kernel RC QP: all, and fast registration.
    pub const RC_KERNEL: Self = Self(Self::RC.0 | SendOpcode::RegMr.bit());
    /// Opcodes of an XRC initiator: RC's but ATOMIC_WRITE and FLUSH (XRC
    /// has no opcodes for them on the wire).
    pub const XRC: Self =
        Self(Self::RC.0 & !(SendOpcode::Flush.bit() | SendOpcode::AtomicWrite.bit()));
    /// Opcodes of a UD/GSI QP.
    pub const UD: Self = Self(SendOpcode::Send.bit() | SendOpcode::SendWithImm.bit());

    /// Whether `op` is in the set.
    pub const fn contains(self, op: SendOpcode) -> bool {
        self.0 & op.bit() != 0
    }
}

/// Scatter/gather element.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sge {
    /// Virtual address in the MR.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key of the MR.
    pub lkey: u32,
}

impl Sge {
    /// Byte image.
    pub fn to_bytes(self) -> [u8; SGE_BYTES] {
        let mut b = [0u8; SGE_BYTES];
        wr(&mut b, 0, self.addr.to_ne_bytes());
        wr(&mut b, 8, self.length.to_ne_bytes());
        wr(&mut b, 12, self.lkey.to_ne_bytes());
        b
    }

    /// Parse a byte image.
    pub fn from_bytes(b: &[u8; SGE_BYTES]) -> Self {
        Self {
            addr: rd64(b, 0),
            length: rd32(b, 8),
            lkey: rd32(b, 12),
        }
    }
}

/// Sum of SGE lengths of `count` SGEs at `data`, or `None` if above `max`.
fn sum_sges(data: &[u8], count: usize, max: u32) -> Option<u32> {
    let mut total: u64 = 0;
    for c in data.chunks_exact(SGE_BYTES).take(count) {
        total = total.checked_add(u64::from(rd32(c, 8)))?;
        if total > u64::from(max) {
            return None;
        }
    }
    u32::try_from(total).ok()
}

/// Iterator over SGEs in a byte area.
#[derive(Clone, Debug)]
pub struct SgeIter<'a> {
    chunks: core::slice::ChunksExact<'a, u8>,
    left: usize,
}

impl<'a> SgeIter<'a> {
    fn new(data: &'a [u8], count: usize) -> Self {
        Self {
            chunks: data.chunks_exact(SGE_BYTES),
            left: count,
        }
    }
}

impl Iterator for SgeIter<'_> {
    type Item = Sge;

    fn next(&mut self) -> Option<Sge> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let c = self.chunks.next()?.first_chunk::<SGE_BYTES>()?;
        Some(Sge::from_bytes(c))
    }
}

/// Header of a send WQE (see the module documentation for the layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendWqe {
    /// User cookie, returned in the CQE.
    pub wr_id: u64,
    /// Operation.
    pub opcode: SendOpcode,
    /// `SEND_*` flags.
    pub flags: u8,
    /// Number of SGEs.
    pub num_sge: u16,
    /// Bytes of inline data.
    pub inline_len: u32,
    /// Immediate data / rkey to invalidate / MW rkey.
    pub imm_or_inv: u32,
    /// Remote key / new MW rkey.
    pub rkey: u32,
    /// Remote address / bind address.
    pub remote_addr: u64,
    /// Atomic compare or add operand / bind length.
    pub compare_add: u64,
    /// Atomic swap operand.
    pub swap: u64,
    /// UD destination QPN / bind MR lkey.
    pub remote_qpn: u32,
    /// UD Q_Key / bind access flags.
    pub remote_qkey: u32,
    /// UD address handle number.
    pub ah: u32,
}

/// What a FLUSH WQE asks for ([`SendWqe::flush_params`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlushParams {
    /// Placement type bits: [`FLUSH_GLOBAL`], [`FLUSH_PERSISTENT`] or both.
    pub placement: u8,
    /// Selectivity level: [`FLUSH_RANGE`] or [`FLUSH_MR`].
    pub level: u8,
    /// Bytes of the range (0 for [`FLUSH_MR`]: the whole region).
    pub len: u32,
}

impl SendWqe {
    /// A FLUSH of `len` bytes at `remote_addr` of `rkey` (or of the whole
    /// region, with `level` [`FLUSH_MR`]) with placement type bits
    /// `placement`.  Not checked: [`SendWqe::flush_params`] does that.
    pub const fn flush(
        wr_id: u64,
        rkey: u32,
        remote_addr: u64,
        len: u64,
        placement: u8,
        level: u8,
    ) -> Self {
        let mut w = Self::new(wr_id, SendOpcode::Flush);
        w.rkey = rkey;
        w.remote_addr = remote_addr;
        w.compare_add = len;
        w.swap = placement as u64 | (level as u64) << 8;
        w
    }

    /// The parameters of a FLUSH, or `None` if they are not valid: no
    /// placement type bit or an unknown one, an unknown selectivity level,
    /// other bits of `swap` set, or a range longer than a RETH can name.
    pub fn flush_params(&self) -> Option<FlushParams> {
        let placement = (self.swap & 0xFF) as u8;
        let level = ((self.swap >> 8) & 0xFF) as u8;
        let known = FLUSH_GLOBAL | FLUSH_PERSISTENT;
        if self.swap >> 16 != 0 || placement == 0 || placement & !known != 0 || level > FLUSH_MR {
            return None;
        }
        let len = if level == FLUSH_MR {
            0
        } else {
            u32::try_from(self.compare_add).ok()?
        };
        Some(FlushParams {
            placement,
            level,
            len,
        })
    }

    /// A header with every field zero but `wr_id` and `opcode`.
    pub const fn new(wr_id: u64, opcode: SendOpcode) -> Self {
        Self {
            wr_id,
            opcode,
            flags: 0,
            num_sge: 0,
            inline_len: 0,
            imm_or_inv: 0,
            rkey: 0,
            remote_addr: 0,
            compare_add: 0,
            swap: 0,
            remote_qpn: 0,
            remote_qkey: 0,
            ah: 0,
        }
    }

    /// Byte image of the header, fields as they are (no checks).
    pub fn to_bytes(self) -> [u8; SEND_HDR_BYTES] {
        let mut b = [0u8; SEND_HDR_BYTES];
        wr(&mut b, 0, self.wr_id.to_ne_bytes());
        wr(&mut b, 8, [self.opcode as u8]);
        wr(&mut b, 9, [self.flags]);
        wr(&mut b, 10, self.num_sge.to_ne_bytes());
        wr(&mut b, 12, self.inline_len.to_ne_bytes());
        wr(&mut b, 16, self.imm_or_inv.to_ne_bytes());
        wr(&mut b, 20, self.rkey.to_ne_bytes());
        wr(&mut b, 24, self.remote_addr.to_ne_bytes());
        wr(&mut b, 32, self.compare_add.to_ne_bytes());
        wr(&mut b, 40, self.swap.to_ne_bytes());
        wr(&mut b, 48, self.remote_qpn.to_ne_bytes());
        wr(&mut b, 52, self.remote_qkey.to_ne_bytes());
        wr(&mut b, 56, self.ah.to_ne_bytes());
        b
    }

    /// Parse a header: only the opcode is checked (see [`decode_send`]
    /// for full validation).
    pub fn from_bytes(b: &[u8; SEND_HDR_BYTES]) -> Result<Self, WqeError> {
        Ok(Self {
            wr_id: rd64(b, 0),
            opcode: SendOpcode::from_u8(rd8(b, 8)).ok_or(WqeError::UnknownOpcode)?,
            flags: rd8(b, 9),
            num_sge: rd16(b, 10),
            inline_len: rd32(b, 12),
            imm_or_inv: rd32(b, 16),
            rkey: rd32(b, 20),
            remote_addr: rd64(b, 24),
            compare_add: rd64(b, 32),
            swap: rd64(b, 40),
            remote_qpn: rd32(b, 48),
            remote_qkey: rd32(b, 52),
            ah: rd32(b, 56),
        })
    }
}

/// Local data of a send WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendPayload<'a> {
    /// Scatter/gather list.
    Sges(&'a [Sge]),
    /// Inline bytes.
    Inline(&'a [u8]),
}

/// Write a send WQE into `out` (an entry, or a staging buffer): `hdr`
/// followed by the payload.  `num_sge`, `inline_len` and the
/// [`SEND_INLINE`] flag are taken from `payload`, not from `hdr`.  Returns
/// the bytes written; the rest of `out` is left alone.  Checks only what
/// is needed to write a consistent entry (the kernel validates the rest).
pub fn write_send_wqe(
    out: &mut [u8],
    hdr: &SendWqe,
    payload: SendPayload<'_>,
) -> Result<usize, WqeError> {
    let mut h = *hdr;
    let data_len = match payload {
        SendPayload::Sges(s) => {
            h.num_sge = u16::try_from(s.len()).map_err(|_| WqeError::TooManySge)?;
            h.inline_len = 0;
            h.flags &= !SEND_INLINE;
            s.len().checked_mul(SGE_BYTES).ok_or(WqeError::TooManySge)?
        }
        SendPayload::Inline(d) => {
            h.num_sge = 0;
            h.inline_len = u32::try_from(d.len()).map_err(|_| WqeError::InlineTooLong)?;
            h.flags |= SEND_INLINE;
            d.len()
        }
    };
    let total = SEND_HDR_BYTES
        .checked_add(data_len)
        .ok_or(WqeError::TooShort)?;
    let dst = out.get_mut(..total).ok_or(WqeError::TooShort)?;
    let (head, data) = dst.split_at_mut(SEND_HDR_BYTES);
    head.copy_from_slice(&h.to_bytes());
    match payload {
        SendPayload::Sges(s) => {
            for (c, sge) in data.chunks_exact_mut(SGE_BYTES).zip(s) {
                c.copy_from_slice(&sge.to_bytes());
            }
        }
        SendPayload::Inline(d) => data.copy_from_slice(d),
    }
    Ok(total)
}

/// What a send queue accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendLimits {
    /// Maximum SGEs per WQE (the QP's `max_send_sge`).
    pub max_sge: u16,
    /// Maximum inline bytes (the QP's `max_inline_data`).
    pub max_inline: u32,
    /// Maximum message length (device `max_msg_sz`, at most 2^31).
    pub max_msg_size: u32,
    /// Opcodes allowed on the QP.
    pub opcodes: OpcodeSet,
    /// `remote_qpn` addresses the message and must fit 24 bits: the
    /// destination QPN of a UD/GSI QP, the destination XRC SRQ number of
    /// an XRC initiator.
    pub ud: bool,
}

/// Where the bytes of a send WQE's message come from
/// ([`SendWqeView::source`]).
#[derive(Clone, Debug)]
pub enum MsgSource<'a> {
    /// Inline data, in the entry.
    Inline(&'a [u8]),
    /// The 8 bytes of an ATOMIC WRITE, carried in the header.
    Value([u8; 8]),
    /// The SGEs (local memory).
    Sges(SgeIter<'a>),
}

/// A validated send WQE: the header and a view of its payload inside the
/// (private) entry copy it was decoded from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendWqeView<'a> {
    /// The header.
    pub wqe: SendWqe,
    /// Total length of the local data (sum of SGE lengths or inline
    /// length), at most `max_msg_size`.
    pub length: u32,
    data: &'a [u8],
}

impl<'a> SendWqeView<'a> {
    /// The SGEs (empty for inline WQEs).
    pub fn sges(&self) -> SgeIter<'a> {
        SgeIter::new(self.data, usize::from(self.wqe.num_sge))
    }

    /// SGE number `i`.
    pub fn sge(&self, i: usize) -> Option<Sge> {
        if i >= usize::from(self.wqe.num_sge) {
            return None;
        }
        self.data
            .chunks_exact(SGE_BYTES)
            .nth(i)
            .and_then(|c| c.first_chunk::<SGE_BYTES>())
            .map(Sge::from_bytes)
    }

    /// Where the bytes of the message come from.
    pub fn source(&self) -> MsgSource<'a> {
        if self.wqe.opcode == SendOpcode::AtomicWrite {
            return MsgSource::Value(self.wqe.compare_add.to_ne_bytes());
        }
        match self.inline_data() {
            Some(d) => MsgSource::Inline(d),
            None => MsgSource::Sges(self.sges()),
        }
    }

    /// The inline data, if the WQE is inline.
    pub fn inline_data(&self) -> Option<&'a [u8]> {
        if self.wqe.flags & SEND_INLINE == 0 {
            return None;
        }
        let n = usize::try_from(self.wqe.inline_len).ok()?;
        self.data.get(..n)
    }
}

/// Validate a send WQE in `entry` (the kernel's private copy of one SQ
/// entry; it may be longer than the WQE).
pub fn decode_send<'a>(entry: &'a [u8], lim: &SendLimits) -> Result<SendWqeView<'a>, WqeError> {
    let hb = entry
        .first_chunk::<SEND_HDR_BYTES>()
        .ok_or(WqeError::TooShort)?;
    let wqe = SendWqe::from_bytes(hb)?;
    let op = wqe.opcode;
    if !lim.opcodes.contains(op) {
        return Err(WqeError::OpcodeNotAllowed);
    }
    if wqe.flags & !SEND_FLAGS_ALL != 0 {
        return Err(WqeError::BadFlags);
    }
    if !all_zero(entry, 60..64) {
        return Err(WqeError::ReservedNotZero);
    }
    // (A local operation's field 48 is something else: BIND_MW's lkey.)
    if lim.ud && !op.is_local() && wqe.remote_qpn > MAX_QPN {
        return Err(WqeError::BadQpn);
    }
    if op == SendOpcode::BindMw && !matches!(wqe.ah, BIND_TYPE1 | BIND_TYPE2) {
        return Err(WqeError::BadBind);
    }
    let data = entry.get(SEND_HDR_BYTES..).ok_or(WqeError::TooShort)?;
    let max_msg = lim.max_msg_size.min(MAX_MSG_SIZE);
    let length = if wqe.flags & SEND_INLINE != 0 {
        if wqe.num_sge != 0 || !op.allows_inline() {
            return Err(WqeError::BadInline);
        }
        if wqe.inline_len > lim.max_inline {
            return Err(WqeError::InlineTooLong);
        }
        if wqe.inline_len > max_msg {
            return Err(WqeError::LengthOverflow);
        }
        let n = usize::try_from(wqe.inline_len).map_err(|_| WqeError::TooShort)?;
        if data.len() < n {
            return Err(WqeError::TooShort);
        }
        wqe.inline_len
    } else {
        if wqe.inline_len != 0 {
            return Err(WqeError::BadInline);
        }
        if wqe.num_sge > lim.max_sge {
            return Err(WqeError::TooManySge);
        }
        let n = usize::from(wqe.num_sge);
        if data.len() / SGE_BYTES < n {
            return Err(WqeError::TooShort);
        }
        if op.is_local() && n != 0 {
            return Err(WqeError::UnexpectedSge);
        }
        let length = sum_sges(data, n, max_msg).ok_or(WqeError::LengthOverflow)?;
        if op.is_atomic() && (n != 1 || length != 8) {
            return Err(WqeError::BadAtomic);
        }
        if op == SendOpcode::AtomicWrite {
            // The 8 bytes travel in the header (`compare_add`).
            if n != 0 {
                return Err(WqeError::UnexpectedSge);
            }
            if wqe.remote_addr & 7 != 0 {
                return Err(WqeError::BadAtomic);
            }
            // (A limit below 8 bytes refuses it like any longer message.)
            if max_msg < 8 {
                return Err(WqeError::LengthOverflow);
            }
            8
        } else if op == SendOpcode::Flush {
            // No local data: the range is in the header.
            if n != 0 || wqe.flush_params().is_none() {
                return Err(WqeError::BadFlush);
            }
            0
        } else {
            length
        }
    };
    Ok(SendWqeView { wqe, length, data })
}

/// Header of a receive WQE.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvWqe {
    /// User cookie, returned in the CQE.
    pub wr_id: u64,
    /// Number of SGEs.
    pub num_sge: u16,
}

impl RecvWqe {
    /// Byte image of the header.
    pub fn to_bytes(self) -> [u8; RECV_HDR_BYTES] {
        let mut b = [0u8; RECV_HDR_BYTES];
        wr(&mut b, 0, self.wr_id.to_ne_bytes());
        wr(&mut b, 8, self.num_sge.to_ne_bytes());
        b
    }

    /// Parse a header (reserved bytes are not checked here).
    pub fn from_bytes(b: &[u8; RECV_HDR_BYTES]) -> Self {
        Self {
            wr_id: rd64(b, 0),
            num_sge: rd16(b, 8),
        }
    }
}

/// Write a receive WQE with `sges` into `out`; returns the bytes written.
pub fn write_recv_wqe(out: &mut [u8], wr_id: u64, sges: &[Sge]) -> Result<usize, WqeError> {
    let num_sge = u16::try_from(sges.len()).map_err(|_| WqeError::TooManySge)?;
    let total = sges
        .len()
        .checked_mul(SGE_BYTES)
        .and_then(|d| d.checked_add(RECV_HDR_BYTES))
        .ok_or(WqeError::TooManySge)?;
    let dst = out.get_mut(..total).ok_or(WqeError::TooShort)?;
    let (head, data) = dst.split_at_mut(RECV_HDR_BYTES);
    head.copy_from_slice(&RecvWqe { wr_id, num_sge }.to_bytes());
    for (c, sge) in data.chunks_exact_mut(SGE_BYTES).zip(sges) {
        c.copy_from_slice(&sge.to_bytes());
    }
    Ok(total)
}

/// What a receive queue accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvLimits {
    /// Maximum SGEs per WQE.
    pub max_sge: u16,
    /// Maximum message length (at most 2^31).
    pub max_msg_size: u32,
}

/// A validated receive WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvWqeView<'a> {
    /// The header.
    pub wqe: RecvWqe,
    /// Sum of the SGE lengths.
    pub length: u32,
    data: &'a [u8],
}

impl<'a> RecvWqeView<'a> {
    /// The SGEs.
    pub fn sges(&self) -> SgeIter<'a> {
        SgeIter::new(self.data, usize::from(self.wqe.num_sge))
    }
}

/// Validate a receive WQE in `entry` (private copy of one RQ/SRQ entry).
pub fn decode_recv<'a>(entry: &'a [u8], lim: &RecvLimits) -> Result<RecvWqeView<'a>, WqeError> {
    let hb = entry
        .first_chunk::<RECV_HDR_BYTES>()
        .ok_or(WqeError::TooShort)?;
    let wqe = RecvWqe::from_bytes(hb);
    if !all_zero(entry, 10..16) {
        return Err(WqeError::ReservedNotZero);
    }
    if wqe.num_sge > lim.max_sge {
        return Err(WqeError::TooManySge);
    }
    let data = entry.get(RECV_HDR_BYTES..).ok_or(WqeError::TooShort)?;
    let n = usize::from(wqe.num_sge);
    if data.len() / SGE_BYTES < n {
        return Err(WqeError::TooShort);
    }
    let max_msg = lim.max_msg_size.min(MAX_MSG_SIZE);
    let length = sum_sges(data, n, max_msg).ok_or(WqeError::LengthOverflow)?;
    Ok(RecvWqeView { wqe, length, data })
}

#[inline]
fn round_up(v: u64, a: u64) -> Option<u64> {
    v.checked_add(a - 1).map(|x| x / a * a)
}

/// SQ entry size for the given capacities, `None` if it overflows `u32`.
pub fn send_entry_size(max_sge: u32, max_inline: u32) -> Option<u32> {
    let sges = u64::from(max_sge) * SGE_BYTES as u64;
    let inline = round_up(u64::from(max_inline), 16)?;
    let total = round_up(
        sges.max(inline) + SEND_HDR_BYTES as u64,
        u64::from(WQE_ALIGN),
    )?;
    u32::try_from(total).ok()
}

/// RQ/SRQ entry size for `max_sge` SGEs, `None` if it overflows `u32`.
pub fn recv_entry_size(max_sge: u32) -> Option<u32> {
    let total = round_up(
        u64::from(max_sge) * SGE_BYTES as u64 + RECV_HDR_BYTES as u64,
        u64::from(WQE_ALIGN),
    )?;
    u32::try_from(total).ok()
}

/// `(max_sge, max_inline)` that an SQ entry of `entry_size` bytes holds
/// (`max_sge` clamped to `u16::MAX`).
pub fn send_caps(entry_size: u32) -> (u16, u32) {
    let data = entry_size.saturating_sub(SEND_HDR_BYTES as u32);
    let sge = u16::try_from(data / SGE_BYTES as u32).unwrap_or(u16::MAX);
    (sge, data)
}

/// SGEs that an RQ/SRQ entry of `entry_size` bytes holds (clamped).
pub fn recv_max_sge(entry_size: u32) -> u16 {
    let data = entry_size.saturating_sub(RECV_HDR_BYTES as u32);
    u16::try_from(data / SGE_BYTES as u32).unwrap_or(u16::MAX)
}

/// Completion status; values of `enum ib_wc_status` / `enum ibv_wc_status`.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum WcStatus {
    Success = 0,
    LocLenErr = 1,
    LocQpOpErr = 2,
    LocEecOpErr = 3,
    LocProtErr = 4,
    WrFlushErr = 5,
    MwBindErr = 6,
    BadRespErr = 7,
    LocAccessErr = 8,
    RemInvReqErr = 9,
    RemAccessErr = 10,
    RemOpErr = 11,
    RetryExcErr = 12,
    RnrRetryExcErr = 13,
    LocRddViolErr = 14,
    RemInvRdReqErr = 15,
    RemAbortErr = 16,
    InvEecnErr = 17,
    InvEecStateErr = 18,
    FatalErr = 19,
    RespTimeoutErr = 20,
    GeneralErr = 21,
}

impl WcStatus {
    /// The status with value `v`.
    pub const fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::Success,
            1 => Self::LocLenErr,
            2 => Self::LocQpOpErr,
            3 => Self::LocEecOpErr,
            4 => Self::LocProtErr,
            5 => Self::WrFlushErr,
            6 => Self::MwBindErr,
            7 => Self::BadRespErr,
            8 => Self::LocAccessErr,
            9 => Self::RemInvReqErr,
            10 => Self::RemAccessErr,
            11 => Self::RemOpErr,
            12 => Self::RetryExcErr,
            13 => Self::RnrRetryExcErr,
            14 => Self::LocRddViolErr,
            15 => Self::RemInvRdReqErr,
            16 => Self::RemAbortErr,
            17 => Self::InvEecnErr,
            18 => Self::InvEecStateErr,
            19 => Self::FatalErr,
            20 => Self::RespTimeoutErr,
            21 => Self::GeneralErr,
            _ => return None,
        })
    }
}

/// Completion opcode; values of `enum ibv_wc_opcode` (== `ib_wc_opcode`).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WcOpcode {
    /// SEND (any variant).
    Send = 0,
    /// RDMA WRITE (with or without immediate).
    RdmaWrite = 1,
    /// RDMA READ.
    RdmaRead = 2,
    /// Atomic compare and swap.
    CompSwap = 3,
    /// Atomic fetch and add.
    FetchAdd = 4,
    /// Memory window bind.
    BindMw = 5,
    /// Local invalidate.
    LocalInv = 6,
    /// IBTA 1.5 FLUSH (`IBV_WC_FLUSH`).
    Flush = 8,
    /// IBTA 1.5 ATOMIC WRITE (`IBV_WC_ATOMIC_WRITE`).
    AtomicWrite = 9,
    /// Fast registration (`IB_WC_REG_MR`; kernel consumers only).
    RegMr = 10,
    /// Receive of a SEND.
    Recv = 128,
    /// Receive of an RDMA WRITE with immediate.
    RecvRdmaWithImm = 129,
}

impl WcOpcode {
    /// The opcode with value `v`.
    pub const fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::Send,
            1 => Self::RdmaWrite,
            2 => Self::RdmaRead,
            3 => Self::CompSwap,
            4 => Self::FetchAdd,
            5 => Self::BindMw,
            6 => Self::LocalInv,
            8 => Self::Flush,
            9 => Self::AtomicWrite,
            10 => Self::RegMr,
            128 => Self::Recv,
            129 => Self::RecvRdmaWithImm,
            _ => return None,
        })
    }
}

/// A completion entry (see the module documentation for the layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cqe {
    /// `wr_id` of the completed WQE.
    pub wr_id: u64,
    /// Status.
    pub status: WcStatus,
    /// Operation.
    pub opcode: WcOpcode,
    /// `WC_*` flags.
    pub wc_flags: u8,
    /// Service level.
    pub sl: u8,
    /// Received bytes (receives) / transferred bytes.
    pub byte_len: u32,
    /// Immediate data (as in `ibv_wc.imm_data`) or invalidated rkey.
    pub imm_or_inv: u32,
    /// Local QPN.
    pub qp_num: u32,
    /// Source QPN (UD receives).
    pub src_qp: u32,
    /// Driver-specific error detail.
    pub vendor_err: u32,
    /// Source LID (0 on RoCE).
    pub slid: u16,
    /// P_Key index (UD/GSI receives).
    pub pkey_index: u16,
    /// DLID path bits (0 on RoCE).
    pub dlid_path_bits: u8,
    /// `enum rdma_network_type` of the packet a UD receive came with (0
    /// otherwise); for kernel consumers, who parse the GRH area with it.
    pub network_hdr_type: u8,
    /// Completion time (CLOCK_MONOTONIC, ns) on a CQ that asked for it,
    /// else 0.
    pub timestamp: u64,
}

impl Cqe {
    /// A CQE with every field zero but `wr_id`, `status`, `opcode` and
    /// `qp_num`.
    pub const fn new(wr_id: u64, status: WcStatus, opcode: WcOpcode, qp_num: u32) -> Self {
        Self {
            wr_id,
            status,
            opcode,
            wc_flags: 0,
            sl: 0,
            byte_len: 0,
            imm_or_inv: 0,
            qp_num,
            src_qp: 0,
            vendor_err: 0,
            slid: 0,
            pkey_index: 0,
            dlid_path_bits: 0,
            network_hdr_type: 0,
            timestamp: 0,
        }
    }

    /// Byte image (reserved bytes zero).
    pub fn to_bytes(self) -> [u8; CQE_BYTES] {
        let mut b = [0u8; CQE_BYTES];
        wr(&mut b, 0, self.wr_id.to_ne_bytes());
        wr(&mut b, 8, [self.status as u8]);
        wr(&mut b, 9, [self.opcode as u8]);
        wr(&mut b, 10, [self.wc_flags]);
        wr(&mut b, 11, [self.sl]);
        wr(&mut b, 12, self.byte_len.to_ne_bytes());
        wr(&mut b, 16, self.imm_or_inv.to_ne_bytes());
        wr(&mut b, 20, self.qp_num.to_ne_bytes());
        wr(&mut b, 24, self.src_qp.to_ne_bytes());
        wr(&mut b, 28, self.vendor_err.to_ne_bytes());
        wr(&mut b, 32, self.slid.to_ne_bytes());
        wr(&mut b, 34, self.pkey_index.to_ne_bytes());
        wr(&mut b, 36, [self.dlid_path_bits]);
        wr(&mut b, 37, [self.network_hdr_type]);
        wr(&mut b, 40, self.timestamp.to_ne_bytes());
        b
    }

    /// Parse a CQE (status, opcode and flags checked; reserved ignored).
    pub fn decode(b: &[u8; CQE_BYTES]) -> Result<Self, WqeError> {
        let wc_flags = rd8(b, 10);
        if wc_flags & !WC_FLAGS_ALL != 0 {
            return Err(WqeError::BadFlags);
        }
        Ok(Self {
            wr_id: rd64(b, 0),
            status: WcStatus::from_u8(rd8(b, 8)).ok_or(WqeError::UnknownStatus)?,
            opcode: WcOpcode::from_u8(rd8(b, 9)).ok_or(WqeError::UnknownOpcode)?,
            wc_flags,
            sl: rd8(b, 11),
            byte_len: rd32(b, 12),
            imm_or_inv: rd32(b, 16),
            qp_num: rd32(b, 20),
            src_qp: rd32(b, 24),
            vendor_err: rd32(b, 28),
            slid: rd16(b, 32),
            pkey_index: rd16(b, 34),
            dlid_path_bits: rd8(b, 36),
            network_hdr_type: rd8(b, 37),
            timestamp: rd64(b, 40),
        })
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            self.0 = x;
            x.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    const RC: SendLimits = SendLimits {
        max_sge: 4,
        max_inline: 256,
        max_msg_size: MAX_MSG_SIZE,
        opcodes: OpcodeSet::RC,
        ud: false,
    };

    const RQ: RecvLimits = RecvLimits {
        max_sge: 4,
        max_msg_size: MAX_MSG_SIZE,
    };

    fn sample_hdr(op: SendOpcode) -> SendWqe {
        let mut h = SendWqe {
            wr_id: 0x0102_0304_0506_0708,
            opcode: op,
            flags: SEND_SIGNALED | SEND_SOLICITED | SEND_FENCE,
            num_sge: 0,
            inline_len: 0,
            imm_or_inv: u32::from_ne_bytes([0x12, 0x34, 0x56, 0x78]),
            rkey: 0xAABB_CCDD,
            remote_addr: 0x1000_2000_3000_4000,
            compare_add: 0x1111_2222_3333_4444,
            swap: 0x5555_6666_7777_8888,
            remote_qpn: 0x00AB_CDEF,
            remote_qkey: 0x8001_0000,
            ah: if matches!(op, SendOpcode::BindMw) {
                BIND_TYPE2
            } else {
                17
            },
        };
        if op == SendOpcode::Flush {
            // 4 KiB, global placement, range
            h.compare_add = 4096;
            h.swap = u64::from(FLUSH_GLOBAL);
        }
        h
    }

    fn sges_for(op: SendOpcode) -> Vec<Sge> {
        if op.is_local() || matches!(op, SendOpcode::AtomicWrite | SendOpcode::Flush) {
            Vec::new()
        } else if op.is_atomic() {
            std::vec![Sge {
                addr: 0x7000,
                length: 8,
                lkey: 5
            }]
        } else {
            (0..3)
                .map(|i| Sge {
                    addr: 0x10_0000 + i * 0x1000,
                    length: 100 + i as u32,
                    lkey: 0x40 + i as u32,
                })
                .collect()
        }
    }

    #[test]
    fn abi_numbering() {
        // enum ibv_wr_opcode / ibv_send_flags / ibv_wc_* from verbs.h.
        assert_eq!(SendOpcode::RdmaWrite as u8, 0);
        assert_eq!(SendOpcode::Send as u8, 2);
        assert_eq!(SendOpcode::RdmaRead as u8, 4);
        assert_eq!(SendOpcode::LocalInv as u8, 7);
        assert_eq!(SendOpcode::SendWithInv as u8, 9);
        assert_eq!(
            (SEND_FENCE, SEND_SIGNALED, SEND_SOLICITED, SEND_INLINE),
            (1, 2, 4, 8)
        );
        assert_eq!(
            (WC_GRH, WC_WITH_IMM, WC_IP_CSUM_OK, WC_WITH_INV),
            (1, 2, 4, 8)
        );
        assert_eq!(WcStatus::WrFlushErr as u8, 5);
        assert_eq!(WcStatus::RetryExcErr as u8, 12);
        assert_eq!(WcStatus::GeneralErr as u8, 21);
        assert_eq!(WcOpcode::LocalInv as u8, 6);
        assert_eq!(WcOpcode::Recv as u8, 128);
        assert_eq!(WcOpcode::RecvRdmaWithImm as u8, 129);
        for (i, op) in SendOpcode::ALL.iter().enumerate() {
            if i < 10 {
                assert_eq!(*op as usize, i);
            }
            assert_eq!(SendOpcode::from_u8(*op as u8), Some(*op));
            assert!(OpcodeSet::RC.contains(*op));
        }
        assert_eq!(SendOpcode::AtomicWrite as u8, 15); // IBV_WR_ATOMIC_WRITE
        assert_eq!(WcOpcode::AtomicWrite as u8, 9); // IBV_WC_ATOMIC_WRITE
        assert!(!OpcodeSet::UC.contains(SendOpcode::AtomicWrite));
        assert_eq!(SendOpcode::Flush as u8, 14); // IBV_WR_FLUSH
        assert_eq!(WcOpcode::Flush as u8, 8); // IBV_WC_FLUSH
        assert!(!OpcodeSet::UC.contains(SendOpcode::Flush));
        for v in (10..=255u8).filter(|&v| v != 12 && v != 14 && v != 15) {
            assert_eq!(SendOpcode::from_u8(v), None);
        }
        assert_eq!(SendOpcode::from_u8(12), Some(SendOpcode::RegMr));
        assert!(!OpcodeSet::RC.contains(SendOpcode::RegMr));
        assert!(OpcodeSet::RC_KERNEL.contains(SendOpcode::RegMr));
        assert!(SendOpcode::RegMr.is_local());
        assert_eq!(SendOpcode::RegMr.wc_opcode(), WcOpcode::RegMr);
        for v in 0..=255u8 {
            if let Some(s) = WcStatus::from_u8(v) {
                assert_eq!(s as u8, v);
            } else {
                assert!(v > 21);
            }
            if let Some(o) = WcOpcode::from_u8(v) {
                assert_eq!(o as u8, v);
            }
        }
        assert!(!OpcodeSet::UC.contains(SendOpcode::RdmaRead));
        assert!(!OpcodeSet::UC.contains(SendOpcode::AtomicFetchAndAdd));
        assert!(!OpcodeSet::UC.contains(SendOpcode::SendWithInv));
        assert!(OpcodeSet::UC.contains(SendOpcode::RdmaWriteWithImm));
        assert!(OpcodeSet::UD.contains(SendOpcode::SendWithImm));
        assert!(!OpcodeSet::UD.contains(SendOpcode::RdmaWrite));
        assert_eq!(
            SendOpcode::RdmaWriteWithImm.wc_opcode(),
            WcOpcode::RdmaWrite
        );
        assert_eq!(SendOpcode::SendWithInv.wc_opcode(), WcOpcode::Send);
        assert_eq!(SendOpcode::AtomicCmpAndSwp.wc_opcode(), WcOpcode::CompSwap);
        assert_eq!(SendOpcode::BindMw.wc_opcode(), WcOpcode::BindMw);
        assert!(SendOpcode::SendWithImm.has_imm() && !SendOpcode::Send.has_imm());
        assert!(SendOpcode::LocalInv.has_inv() && SendOpcode::SendWithInv.has_inv());
    }

    #[test]
    fn send_header_offsets() {
        let h = sample_hdr(SendOpcode::SendWithImm);
        let b = h.to_bytes();
        assert_eq!(&b[0..8], &0x0102_0304_0506_0708u64.to_ne_bytes());
        assert_eq!(b[8], 3);
        assert_eq!(b[9], SEND_SIGNALED | SEND_SOLICITED | SEND_FENCE);
        // Immediate data keeps its memory (= wire) byte order.
        assert_eq!(&b[16..20], &[0x12, 0x34, 0x56, 0x78]);
        assert_eq!(&b[20..24], &0xAABB_CCDDu32.to_ne_bytes());
        assert_eq!(&b[24..32], &0x1000_2000_3000_4000u64.to_ne_bytes());
        assert_eq!(&b[32..40], &0x1111_2222_3333_4444u64.to_ne_bytes());
        assert_eq!(&b[40..48], &0x5555_6666_7777_8888u64.to_ne_bytes());
        assert_eq!(&b[48..52], &0x00AB_CDEFu32.to_ne_bytes());
        assert_eq!(&b[52..56], &0x8001_0000u32.to_ne_bytes());
        assert_eq!(&b[56..60], &17u32.to_ne_bytes());
        assert_eq!(&b[60..64], &[0; 4]);
        assert_eq!(SendWqe::from_bytes(&b), Ok(h));
        let s = Sge {
            addr: 1,
            length: 2,
            lkey: 3,
        }
        .to_bytes();
        assert_eq!(&s[8..12], &2u32.to_ne_bytes());
        assert_eq!(&s[12..16], &3u32.to_ne_bytes());
    }

    #[test]
    fn atomic_write_wqe_rules() {
        let mut hdr = sample_hdr(SendOpcode::AtomicWrite);
        hdr.remote_addr = 0x1000;
        let mut entry = [0u8; 256];
        write_send_wqe(&mut entry, &hdr, SendPayload::Sges(&[])).unwrap();
        let v = decode_send(&entry, &RC).unwrap();
        assert_eq!((v.length, v.wqe.compare_add), (8, hdr.compare_add));
        assert!(matches!(v.source(), MsgSource::Value(b) if b == hdr.compare_add.to_ne_bytes()));
        // the value is in the header: an SGE is refused
        let sge = Sge {
            addr: 0x7000,
            length: 8,
            lkey: 5,
        };
        write_send_wqe(&mut entry, &hdr, SendPayload::Sges(&[sge])).unwrap();
        assert_eq!(
            decode_send(&entry, &RC).err(),
            Some(WqeError::UnexpectedSge)
        );
        // the target must be 8-byte aligned
        hdr.remote_addr = 0x1004;
        write_send_wqe(&mut entry, &hdr, SendPayload::Sges(&[])).unwrap();
        assert_eq!(decode_send(&entry, &RC).err(), Some(WqeError::BadAtomic));
        // RC only
        hdr.remote_addr = 0x1000;
        write_send_wqe(&mut entry, &hdr, SendPayload::Sges(&[])).unwrap();
        let uc = SendLimits {
            opcodes: OpcodeSet::UC,
            ..RC
        };
        assert_eq!(
            decode_send(&entry, &uc).err(),
            Some(WqeError::OpcodeNotAllowed)
        );
        // inline is not a way to carry it either
        assert!(!SendOpcode::AtomicWrite.allows_inline());
    }

    #[test]
    fn flush_wqe_rules() {
        let w = SendWqe::flush(
            5,
            0x77,
            0x1000,
            64,
            FLUSH_GLOBAL | FLUSH_PERSISTENT,
            FLUSH_RANGE,
        );
        let mut entry = [0u8; 128];
        write_send_wqe(&mut entry, &w, SendPayload::Sges(&[])).unwrap();
        let v = decode_send(&entry, &RC).unwrap();
        assert_eq!((v.length, v.wqe), (0, w));
        assert_eq!(
            v.wqe.flush_params(),
            Some(FlushParams {
                placement: 3,
                level: FLUSH_RANGE,
                len: 64
            })
        );
        // the whole region: the length is not used
        let m = SendWqe::flush(5, 0x77, 0, u64::MAX, FLUSH_PERSISTENT, FLUSH_MR);
        assert_eq!(
            m.flush_params().map(|p| (p.level, p.len)),
            Some((FLUSH_MR, 0))
        );
        // refused: no or unknown placement bits, unknown level, other bits,
        // a range beyond 32 bits, an SGE
        for bad in [
            SendWqe::flush(5, 0x77, 0x1000, 64, 0, FLUSH_RANGE),
            SendWqe::flush(5, 0x77, 0x1000, 64, 4, FLUSH_RANGE),
            SendWqe::flush(5, 0x77, 0x1000, 64, FLUSH_GLOBAL, 2),
            SendWqe {
                swap: 1 | 1 << 16,
                ..w
            },
            SendWqe::flush(5, 0x77, 0x1000, 1 << 32, FLUSH_GLOBAL, FLUSH_RANGE),
        ] {
            assert_eq!(bad.flush_params(), None, "{bad:?}");
            write_send_wqe(&mut entry, &bad, SendPayload::Sges(&[])).unwrap();
            assert_eq!(decode_send(&entry, &RC).err(), Some(WqeError::BadFlush));
        }
        let sge = Sge {
            addr: 0x7000,
            length: 8,
            lkey: 5,
        };
        write_send_wqe(&mut entry, &w, SendPayload::Sges(&[sge])).unwrap();
        assert_eq!(decode_send(&entry, &RC).err(), Some(WqeError::BadFlush));
        // RC only, never inline
        write_send_wqe(&mut entry, &w, SendPayload::Sges(&[])).unwrap();
        let uc = SendLimits {
            opcodes: OpcodeSet::UC,
            ..RC
        };
        assert_eq!(
            decode_send(&entry, &uc).err(),
            Some(WqeError::OpcodeNotAllowed)
        );
        assert!(!SendOpcode::Flush.allows_inline());
        assert_eq!(SendOpcode::Flush.wc_opcode(), WcOpcode::Flush);
    }

    #[test]
    fn send_round_trip_every_opcode() {
        for op in SendOpcode::ALL {
            let hdr = sample_hdr(op);
            let sges = sges_for(op);
            let mut entry = [0xEEu8; 256];
            let n = write_send_wqe(&mut entry, &hdr, SendPayload::Sges(&sges)).unwrap();
            assert_eq!(n, 64 + 16 * sges.len());
            let v = decode_send(&entry, &RC).unwrap();
            let mut want = hdr;
            want.num_sge = sges.len() as u16;
            assert_eq!(v.wqe, want);
            assert_eq!(v.sges().collect::<Vec<_>>(), sges);
            assert_eq!(v.sge(0), sges.first().copied());
            assert_eq!(v.sge(sges.len()), None);
            assert_eq!(v.inline_data(), None);
            let want_len = if op == SendOpcode::AtomicWrite {
                8 // the value in the header
            } else {
                sges.iter().map(|s| s.length).sum::<u32>()
            };
            assert_eq!(v.length, want_len);
            // Also decodes from an entry of exactly the written size.
            assert_eq!(decode_send(&entry[..n], &RC).unwrap().wqe, want);

            if op.allows_inline() {
                let data: Vec<u8> = (0..37u8).collect();
                let n = write_send_wqe(&mut entry, &hdr, SendPayload::Inline(&data)).unwrap();
                assert_eq!(n, 64 + 37);
                let v = decode_send(&entry, &RC).unwrap();
                assert_eq!(v.wqe.flags & SEND_INLINE, SEND_INLINE);
                assert_eq!(v.wqe.inline_len, 37);
                assert_eq!(v.wqe.num_sge, 0);
                assert_eq!(v.inline_data(), Some(&data[..]));
                assert_eq!(v.length, 37);
                assert_eq!(v.sges().count(), 0);
                // Switching back to SGEs clears the inline flag.
                write_send_wqe(&mut entry, &hdr, SendPayload::Sges(&sges)).unwrap();
                assert_eq!(decode_send(&entry, &RC).unwrap().wqe.flags & SEND_INLINE, 0);
            } else {
                write_send_wqe(&mut entry, &hdr, SendPayload::Inline(&[1, 2, 3])).unwrap();
                assert_eq!(decode_send(&entry, &RC), Err(WqeError::BadInline));
            }
        }
    }

    fn send_err(edit: impl Fn(&mut [u8]), lim: &SendLimits) -> Result<(), WqeError> {
        let sges = [
            Sge {
                addr: 0x1000,
                length: 8,
                lkey: 1,
            },
            Sge {
                addr: 0x2000,
                length: 8,
                lkey: 1,
            },
        ];
        let mut e = [0u8; 192];
        write_send_wqe(
            &mut e,
            &SendWqe::new(1, SendOpcode::Send),
            SendPayload::Sges(&sges),
        )
        .unwrap();
        edit(&mut e);
        decode_send(&e, lim).map(|_| ())
    }

    #[test]
    fn send_validation_errors() {
        use WqeError::*;
        let ud = SendLimits {
            opcodes: OpcodeSet::UD,
            ud: true,
            ..RC
        };
        assert_eq!(send_err(|_| {}, &RC), Ok(()));
        assert_eq!(send_err(|_| {}, &ud), Ok(()));
        assert_eq!(decode_send(&[0u8; 63], &RC).err(), Some(TooShort));
        assert_eq!(send_err(|e| e[8] = 10, &RC), Err(UnknownOpcode));
        assert_eq!(send_err(|e| e[8] = 255, &RC), Err(UnknownOpcode));
        assert_eq!(send_err(|e| e[8] = 4, &ud), Err(OpcodeNotAllowed));
        assert_eq!(send_err(|e| e[9] = 0x10, &RC), Err(BadFlags));
        assert_eq!(send_err(|e| e[63] = 1, &RC), Err(ReservedNotZero));
        assert_eq!(
            send_err(
                |e| e[48..52].copy_from_slice(&0x0100_0000u32.to_ne_bytes()),
                &ud
            ),
            Err(BadQpn)
        );
        // The QPN is not a UD field on RC.
        assert_eq!(
            send_err(|e| e[48..52].copy_from_slice(&u32::MAX.to_ne_bytes()), &RC),
            Ok(())
        );
        // An XRC initiator's remote SRQ number: 24 bits; no ATOMIC_WRITE,
        // no FLUSH; BIND_MW's field 48 is the region's lkey (any value).
        let xrc = SendLimits {
            opcodes: OpcodeSet::XRC,
            ud: true,
            ..RC
        };
        assert_eq!(
            send_err(
                |e| e[48..52].copy_from_slice(&0x00FF_FFFFu32.to_ne_bytes()),
                &xrc
            ),
            Ok(())
        );
        assert_eq!(
            send_err(
                |e| e[48..52].copy_from_slice(&0x0100_0000u32.to_ne_bytes()),
                &xrc
            ),
            Err(BadQpn)
        );
        assert!(!OpcodeSet::XRC.contains(SendOpcode::AtomicWrite));
        assert!(!OpcodeSet::XRC.contains(SendOpcode::Flush));
        assert!(OpcodeSet::XRC.contains(SendOpcode::RdmaRead));
        assert!(OpcodeSet::XRC.contains(SendOpcode::BindMw));
        let mut b = [0u8; 64];
        let mut h = SendWqe::new(1, SendOpcode::BindMw);
        (h.remote_qpn, h.ah, h.compare_add) = (u32::MAX, BIND_TYPE2, 4096);
        write_send_wqe(&mut b, &h, SendPayload::Sges(&[])).unwrap();
        assert_eq!(
            decode_send(&b, &xrc).map(|v| v.wqe.remote_qpn),
            Ok(u32::MAX)
        );
        let one_sge = SendLimits { max_sge: 1, ..RC };
        assert_eq!(send_err(|_| {}, &one_sge), Err(TooManySge));
        // SGEs declared beyond the entry.
        assert_eq!(
            send_err(
                |e| e[10..12].copy_from_slice(&9u16.to_ne_bytes()),
                &SendLimits { max_sge: 9, ..RC }
            ),
            Err(TooShort)
        );
        // Inline length without the flag, flag with SGEs.
        assert_eq!(send_err(|e| e[12] = 1, &RC), Err(BadInline));
        assert_eq!(send_err(|e| e[9] |= SEND_INLINE, &RC), Err(BadInline));
        // Inline: too long, beyond the entry, beyond the message size.
        let inline = |len: u32| {
            move |e: &mut [u8]| {
                e[9] |= SEND_INLINE;
                e[10..12].copy_from_slice(&0u16.to_ne_bytes());
                e[12..16].copy_from_slice(&len.to_ne_bytes());
            }
        };
        assert_eq!(send_err(inline(128), &RC), Ok(()));
        assert_eq!(send_err(inline(257), &RC), Err(InlineTooLong));
        assert_eq!(send_err(inline(129), &RC), Err(TooShort));
        assert_eq!(
            send_err(
                inline(100),
                &SendLimits {
                    max_msg_size: 99,
                    ..RC
                }
            ),
            Err(LengthOverflow)
        );
        assert_eq!(
            send_err(
                inline(u32::MAX),
                &SendLimits {
                    max_inline: u32::MAX,
                    ..RC
                }
            ),
            Err(LengthOverflow)
        );
        // Length sum above the maximum (16 bytes total here).
        assert_eq!(
            send_err(
                |_| {},
                &SendLimits {
                    max_msg_size: 15,
                    ..RC
                }
            ),
            Err(LengthOverflow)
        );
        assert_eq!(
            send_err(
                |e| {
                    e[72..76].copy_from_slice(&0x8000_0000u32.to_ne_bytes());
                    e[88..92].copy_from_slice(&0x8000_0000u32.to_ne_bytes());
                },
                &SendLimits {
                    max_msg_size: u32::MAX,
                    ..RC
                }
            ),
            Err(LengthOverflow)
        );
        assert_eq!(
            send_err(|e| e[72..76].copy_from_slice(&u32::MAX.to_ne_bytes()), &RC),
            Err(LengthOverflow)
        );
        // Exactly 2^31 is fine.
        assert_eq!(
            send_err(
                |e| {
                    e[72..76].copy_from_slice(&0x4000_0000u32.to_ne_bytes());
                    e[88..92].copy_from_slice(&0x4000_0000u32.to_ne_bytes());
                },
                &RC
            ),
            Ok(())
        );
        // Local operations take no SGEs.
        assert_eq!(send_err(|e| e[8] = 7, &RC), Err(UnexpectedSge));
        let bind = |e: &mut [u8], ty: u32| {
            e[8] = 8;
            e[56..60].copy_from_slice(&ty.to_ne_bytes());
        };
        assert_eq!(send_err(|e| bind(e, BIND_TYPE1), &RC), Err(UnexpectedSge));
        // BIND_MW: `ah` names the window type, 1 or 2.
        for ty in [0, 3, u32::MAX] {
            assert_eq!(send_err(|e| bind(e, ty), &RC), Err(BadBind));
        }
        let no_sge = |e: &mut [u8], ty: u32| {
            bind(e, ty);
            e[10..12].copy_from_slice(&0u16.to_ne_bytes());
        };
        assert_eq!(send_err(|e| no_sge(e, BIND_TYPE1), &RC), Ok(()));
        assert_eq!(send_err(|e| no_sge(e, BIND_TYPE2), &RC), Ok(()));
        // Atomics: exactly one 8-byte SGE.
        assert_eq!(send_err(|e| e[8] = 5, &RC), Err(BadAtomic));
        assert_eq!(
            send_err(
                |e| {
                    e[8] = 6;
                    e[10..12].copy_from_slice(&1u16.to_ne_bytes());
                },
                &RC
            ),
            Ok(())
        );
        assert_eq!(
            send_err(
                |e| {
                    e[8] = 6;
                    e[10..12].copy_from_slice(&1u16.to_ne_bytes());
                    e[72] = 16;
                },
                &RC
            ),
            Err(BadAtomic)
        );
        assert_eq!(
            send_err(
                |e| {
                    e[8] = 5;
                    e[10..12].copy_from_slice(&0u16.to_ne_bytes());
                },
                &RC
            ),
            Err(BadAtomic)
        );
    }

    #[test]
    fn write_errors() {
        let hdr = SendWqe::new(1, SendOpcode::Send);
        let mut small = [0u8; 79];
        let sge = [Sge::default()];
        assert_eq!(
            write_send_wqe(&mut small, &hdr, SendPayload::Sges(&sge)),
            Err(WqeError::TooShort)
        );
        assert_eq!(
            write_send_wqe(&mut small, &hdr, SendPayload::Inline(&[0u8; 16])),
            Err(WqeError::TooShort)
        );
        assert_eq!(
            write_send_wqe(&mut small, &hdr, SendPayload::Inline(&[0u8; 15])),
            Ok(79)
        );
        let many = std::vec![Sge::default(); 70_000];
        assert_eq!(
            write_send_wqe(&mut small, &hdr, SendPayload::Sges(&many)),
            Err(WqeError::TooManySge)
        );
        assert_eq!(
            write_recv_wqe(&mut small, 1, &many),
            Err(WqeError::TooManySge)
        );
        assert_eq!(
            write_recv_wqe(&mut small[..31], 1, &sge),
            Err(WqeError::TooShort)
        );
        assert_eq!(write_recv_wqe(&mut small, 1, &sge), Ok(32));
    }

    #[test]
    fn recv_round_trip_and_errors() {
        let sges = [
            Sge {
                addr: 0xA000,
                length: 4096,
                lkey: 9,
            },
            Sge {
                addr: 0xB000,
                length: 1,
                lkey: 10,
            },
        ];
        let mut e = [0x55u8; 128];
        assert_eq!(write_recv_wqe(&mut e, 77, &sges), Ok(48));
        assert_eq!(&e[0..8], &77u64.to_ne_bytes());
        assert_eq!(&e[8..10], &2u16.to_ne_bytes());
        assert_eq!(&e[10..16], &[0; 6]);
        let v = decode_recv(&e, &RQ).unwrap();
        assert_eq!(
            v.wqe,
            RecvWqe {
                wr_id: 77,
                num_sge: 2
            }
        );
        assert_eq!(v.length, 4097);
        assert_eq!(v.sges().collect::<Vec<_>>(), sges.to_vec());
        assert_eq!(decode_recv(&e[..48], &RQ).unwrap().length, 4097);
        assert_eq!(decode_recv(&e[..47], &RQ).err(), Some(WqeError::TooShort));
        assert_eq!(decode_recv(&e[..15], &RQ).err(), Some(WqeError::TooShort));
        let lim1 = RecvLimits { max_sge: 1, ..RQ };
        assert_eq!(decode_recv(&e, &lim1).err(), Some(WqeError::TooManySge));
        let small = RecvLimits {
            max_msg_size: 4096,
            ..RQ
        };
        assert_eq!(
            decode_recv(&e, &small).err(),
            Some(WqeError::LengthOverflow)
        );
        let mut r = e;
        r[12] = 1;
        assert_eq!(decode_recv(&r, &RQ).err(), Some(WqeError::ReservedNotZero));
        let mut r = e;
        r[24..28].copy_from_slice(&u32::MAX.to_ne_bytes());
        r[40..44].copy_from_slice(&u32::MAX.to_ne_bytes());
        let huge = RecvLimits {
            max_msg_size: u32::MAX,
            ..RQ
        };
        assert_eq!(decode_recv(&r, &huge).err(), Some(WqeError::LengthOverflow));
        // Zero SGEs: a valid zero-length receive.
        let mut z = [0u8; 64];
        write_recv_wqe(&mut z, 5, &[]).unwrap();
        assert_eq!(decode_recv(&z, &RQ).unwrap().length, 0);
    }

    #[test]
    fn entry_sizes() {
        assert_eq!(send_entry_size(0, 0), Some(64));
        assert_eq!(send_entry_size(1, 0), Some(128));
        assert_eq!(send_entry_size(4, 64), Some(128));
        assert_eq!(send_entry_size(5, 0), Some(192));
        assert_eq!(send_entry_size(0, 1), Some(128));
        assert_eq!(send_entry_size(0, 400), Some(512));
        assert_eq!(send_entry_size(32, 0), Some(576));
        assert_eq!(send_entry_size(u32::MAX, 0), None);
        assert_eq!(send_entry_size(0, u32::MAX), None);
        assert_eq!(recv_entry_size(0), Some(64));
        assert_eq!(recv_entry_size(1), Some(64));
        assert_eq!(recv_entry_size(3), Some(64));
        assert_eq!(recv_entry_size(4), Some(128));
        assert_eq!(recv_entry_size(u32::MAX), None);
        assert_eq!(send_caps(128), (4, 64));
        assert_eq!(send_caps(0), (0, 0));
        assert_eq!(send_caps(u32::MAX).0, u16::MAX);
        assert_eq!(recv_max_sge(64), 3);
        assert_eq!(recv_max_sge(0), 0);
        assert_eq!(recv_max_sge(u32::MAX), u16::MAX);
        let mut rng = Rng(99);
        for _ in 0..10_000 {
            let sge = rng.below(300) as u32;
            let inl = rng.below(5000) as u32;
            let s = send_entry_size(sge, inl).unwrap();
            assert_eq!(s % WQE_ALIGN, 0);
            let (cs, ci) = send_caps(s);
            assert!(u32::from(cs) >= sge && ci >= inl);
            assert!(s - 64 < 64 + 16 * sge.max(inl.div_ceil(16)));
            let r = recv_entry_size(sge).unwrap();
            assert_eq!(r % WQE_ALIGN, 0);
            assert!(u32::from(recv_max_sge(r)) >= sge);
        }
    }

    #[test]
    fn cqe_round_trip_and_errors() {
        let mut c = Cqe::new(0xFEED, WcStatus::Success, WcOpcode::RecvRdmaWithImm, 0x12);
        c.wc_flags = WC_WITH_IMM | WC_GRH;
        c.sl = 3;
        c.byte_len = 4096;
        c.imm_or_inv = u32::from_ne_bytes([0xDE, 0xAD, 0xBE, 0xEF]);
        c.src_qp = 0x00FF_FFFF;
        c.vendor_err = 0x77;
        c.slid = 0xBEEF;
        c.pkey_index = 5;
        c.dlid_path_bits = 0x7F;
        let b = c.to_bytes();
        assert_eq!(&b[0..8], &0xFEEDu64.to_ne_bytes());
        assert_eq!((b[8], b[9], b[10], b[11]), (0, 129, 3, 3));
        assert_eq!(&b[12..16], &4096u32.to_ne_bytes());
        assert_eq!(&b[16..20], &[0xDE, 0xAD, 0xBE, 0xEF]);
        assert_eq!(&b[20..24], &0x12u32.to_ne_bytes());
        assert_eq!(&b[24..28], &0x00FF_FFFFu32.to_ne_bytes());
        assert_eq!(&b[28..32], &0x77u32.to_ne_bytes());
        assert_eq!(&b[32..34], &0xBEEFu16.to_ne_bytes());
        assert_eq!(&b[34..36], &5u16.to_ne_bytes());
        assert_eq!(b[36], 0x7F);
        assert!(b[37..].iter().all(|&x| x == 0));
        assert_eq!(Cqe::decode(&b), Ok(c));
        c.timestamp = 0x0123_4567_89AB_CDEF;
        let t = c.to_bytes();
        assert_eq!(&t[40..48], &0x0123_4567_89AB_CDEFu64.to_ne_bytes());
        assert!(t[37..40].iter().chain(&t[48..]).all(|&x| x == 0));
        assert_eq!(Cqe::decode(&t), Ok(c));
        for s in 0..=21u8 {
            for o in [0u8, 1, 2, 3, 4, 5, 6, 128, 129] {
                let c = Cqe::new(
                    u64::from(s),
                    WcStatus::from_u8(s).unwrap(),
                    WcOpcode::from_u8(o).unwrap(),
                    1,
                );
                assert_eq!(Cqe::decode(&c.to_bytes()), Ok(c));
            }
        }
        let mut bad = b;
        bad[8] = 22;
        assert_eq!(Cqe::decode(&bad), Err(WqeError::UnknownStatus));
        let mut bad = b;
        bad[9] = 7;
        assert_eq!(Cqe::decode(&bad), Err(WqeError::UnknownOpcode));
        let mut bad = b;
        bad[10] = 0x10;
        assert_eq!(Cqe::decode(&bad), Err(WqeError::BadFlags));
        // Reserved bytes are ignored by the reader.
        let mut res = t;
        res[63] = 0xFF;
        assert_eq!(Cqe::decode(&res), Ok(c));
    }

    /// Random bytes (biased towards plausible headers) never panic the
    /// decoders, and whatever they accept satisfies the limits.
    #[test]
    fn fuzz_decoders() {
        let mut rng = Rng(0x1234_5678_9ABC_DEF1);
        let mut buf = [0u8; 320];
        let (mut ok_send, mut ok_recv, mut ok_cqe) = (0u32, 0u32, 0u32);
        for iter in 0..50_000 {
            for b in buf.iter_mut() {
                *b = rng.next() as u8;
            }
            if iter % 2 == 0 {
                // Make the header plausible so the deeper checks run.
                buf[8] = rng.below(12) as u8;
                buf[9] &= if rng.below(2) == 0 { 0x0F } else { 0x1F };
                let n = rng.below(8) as u16;
                buf[10..12].copy_from_slice(&n.to_ne_bytes());
                let il = if buf[9] & SEND_INLINE != 0 {
                    rng.below(300) as u32
                } else {
                    0
                };
                buf[12..16].copy_from_slice(&il.to_ne_bytes());
                buf[60..64].fill(0);
                for i in 0..8 {
                    let off = 72 + 16 * i;
                    let l = rng.below(1 << 20) as u32;
                    buf[off..off + 4].copy_from_slice(&l.to_ne_bytes());
                }
                buf[48..52]
                    .copy_from_slice(&(rng.next() as u32 >> (rng.below(9) as u32)).to_ne_bytes());
            }
            let len = rng.below(buf.len() as u64 + 1) as usize;
            let lim = SendLimits {
                max_sge: rng.below(10) as u16,
                max_inline: rng.below(400) as u32,
                max_msg_size: match rng.below(3) {
                    0 => MAX_MSG_SIZE,
                    1 => u32::MAX,
                    _ => rng.below(1 << 21) as u32,
                },
                opcodes: OpcodeSet(rng.next() as u16),
                ud: rng.below(2) == 0,
            };
            if let Ok(v) = decode_send(&buf[..len], &lim) {
                ok_send += 1;
                assert!(v.length <= lim.max_msg_size.min(MAX_MSG_SIZE));
                assert!(lim.opcodes.contains(v.wqe.opcode));
                assert_eq!(v.wqe.flags & !SEND_FLAGS_ALL, 0);
                if let Some(d) = v.inline_data() {
                    assert_eq!(d.len() as u32, v.wqe.inline_len);
                    assert!(v.wqe.inline_len <= lim.max_inline);
                    assert_eq!(v.wqe.num_sge, 0);
                } else {
                    assert!(v.wqe.num_sge <= lim.max_sge);
                    let sges: Vec<Sge> = v.sges().collect();
                    assert_eq!(sges.len(), usize::from(v.wqe.num_sge));
                    let sum: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
                    assert_eq!(sum, u64::from(v.length));
                }
                if lim.ud && !v.wqe.opcode.is_local() {
                    assert!(v.wqe.remote_qpn <= MAX_QPN);
                }
            }
            let rlim = RecvLimits {
                max_sge: rng.below(20) as u16,
                max_msg_size: rng.next() as u32,
            };
            if iter % 2 == 0 {
                buf[8..10].copy_from_slice(&(rng.below(20) as u16).to_ne_bytes());
                buf[10..16].fill(0);
            }
            if let Ok(v) = decode_recv(&buf[..len], &rlim) {
                ok_recv += 1;
                assert!(v.wqe.num_sge <= rlim.max_sge);
                assert!(v.length <= rlim.max_msg_size.min(MAX_MSG_SIZE));
                assert_eq!(v.sges().count(), usize::from(v.wqe.num_sge));
            }
            let cqe: &[u8; CQE_BYTES] = buf.first_chunk().unwrap();
            if let Ok(c) = Cqe::decode(cqe) {
                ok_cqe += 1;
                assert_eq!(Cqe::decode(&c.to_bytes()), Ok(c));
            }
        }
        std::println!("accepted: send {ok_send} recv {ok_recv} cqe {ok_cqe}");
        assert!(ok_send > 100 && ok_recv > 100 && ok_cqe > 10);
    }
}
