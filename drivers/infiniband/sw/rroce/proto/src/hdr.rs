// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Parsing and building of the BTH and the extension transport headers.
//!
//! All multi-byte fields are big-endian on the wire.  Parsers read from a
//! `&[u8]` and never copy payload; builders write into a caller-supplied
//! `&mut [u8]` and return the number of bytes written.  Nothing here panics on
//! any input: lengths are checked before every access and every read goes
//! through `get()`/`first_chunk()`.
//!
//! [`parse_packet`] takes a UDP payload (starting at the BTH and ending with
//! the 4-byte ICRC) and validates it.  It does not check the ICRC itself
//! (see `icrc`), nor anything that needs QP state (PSN, P_Key, Q_Key,
//! opcode sequence).

use super::opcode::{
    self, ExtHdrs, OpInfo, Position, AETH_LEN, ATOMIC_ACK_ETH_LEN, ATOMIC_ETH_LEN, BTH_LEN,
    DETH_LEN, FETH_LEN, ICRC_LEN, IETH_LEN, IMMDT_LEN, RETH_LEN, XRCETH_LEN,
};

/// Largest value of a 24-bit field (QPN, PSN, MSN).
pub const MAX_24: u32 = 0x00FF_FFFF;

/// The default full-membership P_Key.
pub const DEFAULT_PKEY: u16 = 0xFFFF;

/// Q_Key of the GSI QP (QP1).
pub const GSI_QKEY: u32 = 0x8001_0000;
use super::bytes::{
    be16 as rd16, be24 as rd24, be32 as rd32, be64 as rd64, put as wr, put_be24 as wr24,
    u8_at as rd8,
};
use super::split::Pieces;

/// Pad bytes needed after a payload of `len` bytes: `(-len) & 3`.
#[inline]
pub const fn pad_count(len: usize) -> u8 {
    (len.wrapping_neg() & 3) as u8
}

/// Why a header could not be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BuildError {
    /// The output buffer is shorter than the headers.
    BufferTooShort,
    /// The opcode is not in the opcode table.
    UnknownOpcode,
    /// A field is out of range (24-bit QPN/PSN/MSN, pad > 3, TVer > 15).
    FieldRange,
    /// The opcode needs an extension header that was not supplied.
    MissingHeader,
    /// An extension header was supplied that the opcode does not carry.
    UnexpectedHeader,
}

/// Base Transport Header (12 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Bth {
    /// Opcode (transport in bits 7:5, operation in bits 4:0).
    pub opcode: u8,
    /// Solicited event.
    pub se: bool,
    /// MigReq.  Not validated on receive (hardware sets it in ACKs).
    pub mig_req: bool,
    /// Pad count, 0..=3.
    pub pad: u8,
    /// Transport header version, 0..=15 (must be 0).
    pub tver: u8,
    /// Partition key.
    pub pkey: u16,
    /// Forward ECN.
    pub fecn: bool,
    /// Backward ECN.
    pub becn: bool,
    /// Destination QP number (24 bits).
    pub dest_qpn: u32,
    /// Acknowledge request.
    pub ack_req: bool,
    /// Packet sequence number (24 bits).
    pub psn: u32,
}

impl Bth {
    /// Length on the wire.
    pub const LEN: usize = BTH_LEN;

    /// Parse the first 12 bytes of `b`; `None` if `b` is shorter.
    ///
    /// Reserved bits are ignored.
    pub fn parse(b: &[u8]) -> Option<Bth> {
        let b = b.first_chunk::<BTH_LEN>()?;
        let f1 = rd8(b, 1);
        let f4 = rd8(b, 4);
        Some(Bth {
            opcode: rd8(b, 0),
            se: f1 & 0x80 != 0,
            mig_req: f1 & 0x40 != 0,
            pad: (f1 >> 4) & 0x3,
            tver: f1 & 0x0F,
            pkey: rd16(b, 2),
            fecn: f4 & 0x80 != 0,
            becn: f4 & 0x40 != 0,
            dest_qpn: rd24(b, 5),
            ack_req: rd8(b, 8) & 0x80 != 0,
            psn: rd24(b, 9),
        })
    }

    /// Write the header into the first 12 bytes of `b` (reserved bits 0).
    pub fn write(&self, b: &mut [u8]) -> Result<usize, BuildError> {
        if self.pad > 3 || self.tver > 0xF || self.dest_qpn > MAX_24 || self.psn > MAX_24 {
            return Err(BuildError::FieldRange);
        }
        let b = b
            .first_chunk_mut::<BTH_LEN>()
            .ok_or(BuildError::BufferTooShort)?;
        let f1 =
            (u8::from(self.se) << 7) | (u8::from(self.mig_req) << 6) | (self.pad << 4) | self.tver;
        let f4 = (u8::from(self.fecn) << 7) | (u8::from(self.becn) << 6);
        wr(b, 0, [self.opcode, f1]);
        wr(b, 2, self.pkey.to_be_bytes());
        wr(b, 4, [f4]);
        wr24(b, 5, self.dest_qpn);
        wr(b, 8, [u8::from(self.ack_req) << 7]);
        wr24(b, 9, self.psn);
        Ok(BTH_LEN)
    }
}

/// RDMA Extended Transport Header (16 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Reth {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// DMA length: the length of the whole message.
    pub len: u32,
}

impl Reth {
    /// Length on the wire.
    pub const LEN: usize = RETH_LEN;

    /// Parse the first 16 bytes of `b`.
    pub fn parse(b: &[u8]) -> Option<Reth> {
        let b = b.first_chunk::<RETH_LEN>()?;
        Some(Reth {
            va: rd64(b, 0),
            rkey: rd32(b, 8),
            len: rd32(b, 12),
        })
    }

    /// Write the header into the first 16 bytes of `b`.
    pub fn write(&self, b: &mut [u8]) -> Result<usize, BuildError> {
        let b = b
            .first_chunk_mut::<RETH_LEN>()
            .ok_or(BuildError::BufferTooShort)?;
        wr(b, 0, self.va.to_be_bytes());
        wr(b, 8, self.rkey.to_be_bytes());
        wr(b, 12, self.len.to_be_bytes());
        Ok(RETH_LEN)
    }
}

/// AETH syndrome: ACK with credit count 0x1F ("invalid/unlimited").
pub const AETH_ACK_UNLIMITED: u8 = 0x1F;
/// NAK code: PSN sequence error.
pub const NAK_PSN_SEQ_ERROR: u8 = 0;
/// NAK code: invalid request.
pub const NAK_INVALID_REQUEST: u8 = 1;
/// NAK code: remote access error.
pub const NAK_REMOTE_ACCESS_ERROR: u8 = 2;
/// NAK code: remote operational error.
pub const NAK_REMOTE_OPERATIONAL_ERROR: u8 = 3;
/// NAK code: invalid RD request.
pub const NAK_INVALID_RD_REQUEST: u8 = 4;

/// The decoded AETH syndrome byte (bits 7:5 type, bits 4:0 value).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// ACK (type 000) with a credit code (0x1F = unlimited/invalid).
    Ack {
        /// Credit code 0..=0x1F.
        credits: u8,
    },
    /// RNR NAK (type 001) with the RNR timer code.
    RnrNak {
        /// Timer code 0..=0x1F.
        timer: u8,
    },
    /// NAK (type 011) with its code (see the `NAK_*` constants).
    Nak {
        /// NAK code 0..=0x1F.
        code: u8,
    },
    /// Reserved type (010, 1xx); the whole byte.
    Reserved(u8),
}

impl Syndrome {
    /// Decode a syndrome byte.
    pub const fn decode(s: u8) -> Syndrome {
        let v = s & 0x1F;
        match s >> 5 {
            0 => Syndrome::Ack { credits: v },
            1 => Syndrome::RnrNak { timer: v },
            3 => Syndrome::Nak { code: v },
            _ => Syndrome::Reserved(s),
        }
    }

    /// Encode to a syndrome byte (values are masked to 5 bits).
    pub const fn encode(self) -> u8 {
        match self {
            Syndrome::Ack { credits } => credits & 0x1F,
            Syndrome::RnrNak { timer } => 0x20 | (timer & 0x1F),
            Syndrome::Nak { code } => 0x60 | (code & 0x1F),
            Syndrome::Reserved(s) => s,
        }
    }
}

/// ACK Extended Transport Header (4 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Aeth {
    /// Syndrome byte (see [`Syndrome`]).
    pub syndrome: u8,
    /// Message sequence number (24 bits).
    pub msn: u32,
}

impl Aeth {
    /// Length on the wire.
    pub const LEN: usize = AETH_LEN;

    /// Parse the first 4 bytes of `b`.
    pub fn parse(b: &[u8]) -> Option<Aeth> {
        let b = b.first_chunk::<AETH_LEN>()?;
        Some(Aeth {
            syndrome: rd8(b, 0),
            msn: rd24(b, 1),
        })
    }

    /// Write the header into the first 4 bytes of `b`.
    pub fn write(&self, b: &mut [u8]) -> Result<usize, BuildError> {
        if self.msn > MAX_24 {
            return Err(BuildError::FieldRange);
        }
        let b = b
            .first_chunk_mut::<AETH_LEN>()
            .ok_or(BuildError::BufferTooShort)?;
        wr(b, 0, [self.syndrome]);
        wr24(b, 1, self.msn);
        Ok(AETH_LEN)
    }

    /// The decoded syndrome.
    pub const fn decoded(&self) -> Syndrome {
        Syndrome::decode(self.syndrome)
    }
}

/// FLUSH Extended Transport Header (4 bytes, IBTA 1.5): the placement
/// type in bits 3:0, the selectivity level in bits 5:4, the rest reserved
/// (kept as received, written as given).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Feth(pub u32);

/// FLUSH placement type bit: make the data globally visible.
pub const FLUSH_GLOBAL: u8 = 1;
/// FLUSH placement type bit: make the data persistent.
pub const FLUSH_PERSISTENT: u8 = 2;
/// FLUSH selectivity level: the range the RETH names.
pub const FLUSH_RANGE: u8 = 0;
/// FLUSH selectivity level: the whole region the RETH's R_Key names.
pub const FLUSH_MR: u8 = 1;

impl Feth {
    /// Length on the wire.
    pub const LEN: usize = FETH_LEN;

    /// The header for placement type bits `placement` (bits 3:0 kept) and
    /// selectivity level `level` (bits 1:0 kept).
    pub const fn new(placement: u8, level: u8) -> Feth {
        Feth((placement as u32 & 0xF) | ((level as u32 & 3) << 4))
    }

    /// The placement type bits ([`FLUSH_GLOBAL`], [`FLUSH_PERSISTENT`]).
    pub const fn placement(self) -> u8 {
        (self.0 & 0xF) as u8
    }

    /// The selectivity level ([`FLUSH_RANGE`], [`FLUSH_MR`]).
    pub const fn level(self) -> u8 {
        ((self.0 >> 4) & 3) as u8
    }

    /// Parse the first 4 bytes of `b`.
    pub fn parse(b: &[u8]) -> Option<Feth> {
        let b = b.first_chunk::<FETH_LEN>()?;
        Some(Feth(rd32(b, 0)))
    }

    /// Write the header into the first 4 bytes of `b`.
    pub fn write(&self, b: &mut [u8]) -> Result<usize, BuildError> {
        let b = b
            .first_chunk_mut::<FETH_LEN>()
            .ok_or(BuildError::BufferTooShort)?;
        wr(b, 0, self.0.to_be_bytes());
        Ok(FETH_LEN)
    }
}

/// Invalidate Extended Transport Header (4 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ieth {
    /// The rkey to invalidate.
    pub rkey: u32,
}

impl Ieth {
    /// Length on the wire.
    pub const LEN: usize = IETH_LEN;

    /// Parse the first 4 bytes of `b`.
    pub fn parse(b: &[u8]) -> Option<Ieth> {
        let b = b.first_chunk::<IETH_LEN>()?;
        Some(Ieth { rkey: rd32(b, 0) })
    }

    /// Write the header into the first 4 bytes of `b`.
    pub fn write(&self, b: &mut [u8]) -> Result<usize, BuildError> {
        let b = b
            .first_chunk_mut::<IETH_LEN>()
            .ok_or(BuildError::BufferTooShort)?;
        wr(b, 0, self.rkey.to_be_bytes());
        Ok(IETH_LEN)
    }
}

/// Immediate data (4 bytes).
///
/// `imm` is the big-endian reading of the four wire bytes, so the bytes are
/// `imm.to_be_bytes()`; the kernel's `__be32 ex.imm_data` is
/// `imm.to_be()` in native memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ImmDt {
    /// The immediate value.
    pub imm: u32,
}

impl ImmDt {
    /// Length on the wire.
    pub const LEN: usize = IMMDT_LEN;

    /// Parse the first 4 bytes of `b`.
    pub fn parse(b: &[u8]) -> Option<ImmDt> {
        let b = b.first_chunk::<IMMDT_LEN>()?;
        Some(ImmDt { imm: rd32(b, 0) })
    }

    /// Write the header into the first 4 bytes of `b`.
    pub fn write(&self, b: &mut [u8]) -> Result<usize, BuildError> {
        let b = b
            .first_chunk_mut::<IMMDT_LEN>()
            .ok_or(BuildError::BufferTooShort)?;
        wr(b, 0, self.imm.to_be_bytes());
        Ok(IMMDT_LEN)
    }
}

/// Datagram Extended Transport Header (8 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Deth {
    /// Queue key.
    pub qkey: u32,
    /// Source QP number (24 bits).
    pub src_qpn: u32,
}

impl Deth {
    /// Length on the wire.
    pub const LEN: usize = DETH_LEN;

    /// Parse the first 8 bytes of `b` (the reserved byte is ignored).
    pub fn parse(b: &[u8]) -> Option<Deth> {
        let b = b.first_chunk::<DETH_LEN>()?;
        Some(Deth {
            qkey: rd32(b, 0),
            src_qpn: rd24(b, 5),
        })
    }

    /// Write the header into the first 8 bytes of `b`.
    pub fn write(&self, b: &mut [u8]) -> Result<usize, BuildError> {
        if self.src_qpn > MAX_24 {
            return Err(BuildError::FieldRange);
        }
        let b = b
            .first_chunk_mut::<DETH_LEN>()
            .ok_or(BuildError::BufferTooShort)?;
        wr(b, 0, self.qkey.to_be_bytes());
        wr(b, 4, [0]);
        wr24(b, 5, self.src_qpn);
        Ok(DETH_LEN)
    }
}

/// Atomic Extended Transport Header (28 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AtomicEth {
    /// Remote virtual address (8-byte aligned for a valid request).
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap value (CmpSwap) or addend (FetchAdd).
    pub swap_add: u64,
    /// Compare value (CmpSwap; ignored by FetchAdd).
    pub compare: u64,
}

impl AtomicEth {
    /// Length on the wire.
    pub const LEN: usize = ATOMIC_ETH_LEN;

    /// Parse the first 28 bytes of `b`.
    pub fn parse(b: &[u8]) -> Option<AtomicEth> {
        let b = b.first_chunk::<ATOMIC_ETH_LEN>()?;
        Some(AtomicEth {
            va: rd64(b, 0),
            rkey: rd32(b, 8),
            swap_add: rd64(b, 12),
            compare: rd64(b, 20),
        })
    }

    /// Write the header into the first 28 bytes of `b`.
    pub fn write(&self, b: &mut [u8]) -> Result<usize, BuildError> {
        let b = b
            .first_chunk_mut::<ATOMIC_ETH_LEN>()
            .ok_or(BuildError::BufferTooShort)?;
        wr(b, 0, self.va.to_be_bytes());
        wr(b, 8, self.rkey.to_be_bytes());
        wr(b, 12, self.swap_add.to_be_bytes());
        wr(b, 20, self.compare.to_be_bytes());
        Ok(ATOMIC_ETH_LEN)
    }
}

/// Atomic ACK Extended Transport Header (8 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AtomicAckEth {
    /// The original value at the remote address.
    pub orig: u64,
}

impl AtomicAckEth {
    /// Length on the wire.
    pub const LEN: usize = ATOMIC_ACK_ETH_LEN;

    /// Parse the first 8 bytes of `b`.
    pub fn parse(b: &[u8]) -> Option<AtomicAckEth> {
        let b = b.first_chunk::<ATOMIC_ACK_ETH_LEN>()?;
        Some(AtomicAckEth { orig: rd64(b, 0) })
    }

    /// Write the header into the first 8 bytes of `b`.
    pub fn write(&self, b: &mut [u8]) -> Result<usize, BuildError> {
        let b = b
            .first_chunk_mut::<ATOMIC_ACK_ETH_LEN>()
            .ok_or(BuildError::BufferTooShort)?;
        wr(b, 0, self.orig.to_be_bytes());
        Ok(ATOMIC_ACK_ETH_LEN)
    }
}

/// XRC ETH: the XRC SRQ a request of an XRC initiator is for (24 bits;
/// the top byte is reserved, sent as zero and ignored).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Xrceth {
    /// The destination XRC SRQ number.
    pub srqn: u32,
}

impl Xrceth {
    /// Parse from the first 4 bytes of `b`.
    pub fn parse(b: &[u8]) -> Option<Xrceth> {
        let a = b.first_chunk::<XRCETH_LEN>()?;
        Some(Xrceth {
            srqn: u32::from_be_bytes(*a) & 0x00FF_FFFF,
        })
    }

    /// Write to the first 4 bytes of `b`; returns the length written.
    pub fn write(&self, b: &mut [u8]) -> Result<usize, BuildError> {
        let a = b
            .first_chunk_mut::<XRCETH_LEN>()
            .ok_or(BuildError::BufferTooShort)?;
        *a = (self.srqn & 0x00FF_FFFF).to_be_bytes();
        Ok(XRCETH_LEN)
    }
}

/// The extension headers of one packet; `Some` exactly for those its opcode
/// carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ext {
    /// DETH (UD).
    pub deth: Option<Deth>,
    /// XRCETH (XRC requests).
    pub xrceth: Option<Xrceth>,
    /// FETH (FLUSH).
    pub feth: Option<Feth>,
    /// RETH (WRITE First/Only, READ request).
    pub reth: Option<Reth>,
    /// AtomicETH (CmpSwap, FetchAdd).
    pub atomic_eth: Option<AtomicEth>,
    /// AETH (ACK, READ response First/Last/Only, ATOMIC ACK).
    pub aeth: Option<Aeth>,
    /// AtomicAckETH (ATOMIC ACK).
    pub atomic_ack_eth: Option<AtomicAckEth>,
    /// ImmDt (… with immediate).
    pub immdt: Option<ImmDt>,
    /// IETH (SEND … with invalidate).
    pub ieth: Option<Ieth>,
}

impl Ext {
    /// The set of headers present.
    pub const fn present(&self) -> ExtHdrs {
        let mut h = ExtHdrs::NONE;
        if self.deth.is_some() {
            h = h.with(ExtHdrs::DETH);
        }
        if self.xrceth.is_some() {
            h = h.with(ExtHdrs::XRCETH);
        }
        if self.feth.is_some() {
            h = h.with(ExtHdrs::FETH);
        }
        if self.reth.is_some() {
            h = h.with(ExtHdrs::RETH);
        }
        if self.atomic_eth.is_some() {
            h = h.with(ExtHdrs::ATOMIC_ETH);
        }
        if self.aeth.is_some() {
            h = h.with(ExtHdrs::AETH);
        }
        if self.atomic_ack_eth.is_some() {
            h = h.with(ExtHdrs::ATOMIC_ACK_ETH);
        }
        if self.immdt.is_some() {
            h = h.with(ExtHdrs::IMMDT);
        }
        if self.ieth.is_some() {
            h = h.with(ExtHdrs::IETH);
        }
        h
    }

    /// Parse the headers `hdrs` laid out in wire order from the start of `b`
    /// (the byte after the BTH).  `None` if `b` is too short.
    ///
    /// One test per header in wire order ([`ExtHdrs::ORDER`]; a test
    /// checks the two agree), not a loop over that table: this runs for
    /// every packet received, and the loop copied the table and matched
    /// each entry again.
    pub fn parse(hdrs: ExtHdrs, b: &[u8]) -> Option<Ext> {
        let mut e = Ext::default();
        let mut rest = b;
        if hdrs.contains(ExtHdrs::DETH) {
            e.deth = Some(Deth::parse(rest)?);
            rest = rest.get(DETH_LEN..)?;
        }
        if hdrs.contains(ExtHdrs::XRCETH) {
            e.xrceth = Some(Xrceth::parse(rest)?);
            rest = rest.get(XRCETH_LEN..)?;
        }
        if hdrs.contains(ExtHdrs::FETH) {
            e.feth = Some(Feth::parse(rest)?);
            rest = rest.get(FETH_LEN..)?;
        }
        if hdrs.contains(ExtHdrs::RETH) {
            e.reth = Some(Reth::parse(rest)?);
            rest = rest.get(RETH_LEN..)?;
        }
        if hdrs.contains(ExtHdrs::ATOMIC_ETH) {
            e.atomic_eth = Some(AtomicEth::parse(rest)?);
            rest = rest.get(ATOMIC_ETH_LEN..)?;
        }
        if hdrs.contains(ExtHdrs::AETH) {
            e.aeth = Some(Aeth::parse(rest)?);
            rest = rest.get(AETH_LEN..)?;
        }
        if hdrs.contains(ExtHdrs::ATOMIC_ACK_ETH) {
            e.atomic_ack_eth = Some(AtomicAckEth::parse(rest)?);
            rest = rest.get(ATOMIC_ACK_ETH_LEN..)?;
        }
        if hdrs.contains(ExtHdrs::IMMDT) {
            e.immdt = Some(ImmDt::parse(rest)?);
            rest = rest.get(IMMDT_LEN..)?;
        }
        if hdrs.contains(ExtHdrs::IETH) {
            e.ieth = Some(Ieth::parse(rest)?);
        }
        Some(e)
    }

    /// Write the present headers in wire order to the start of `b`; returns
    /// the bytes written.  (Like [`Ext::parse`], one step per header.)
    pub fn write(&self, b: &mut [u8]) -> Result<usize, BuildError> {
        fn put(
            b: &mut [u8],
            off: &mut usize,
            w: impl FnOnce(&mut [u8]) -> Result<usize, BuildError>,
        ) -> Result<(), BuildError> {
            let n = w(b.get_mut(*off..).ok_or(BuildError::BufferTooShort)?)?;
            *off = off.checked_add(n).ok_or(BuildError::BufferTooShort)?;
            Ok(())
        }
        let mut off = 0usize;
        if let Some(x) = self.deth {
            put(b, &mut off, |s| x.write(s))?;
        }
        if let Some(x) = self.xrceth {
            put(b, &mut off, |s| x.write(s))?;
        }
        if let Some(x) = self.feth {
            put(b, &mut off, |s| x.write(s))?;
        }
        if let Some(x) = self.reth {
            put(b, &mut off, |s| x.write(s))?;
        }
        if let Some(x) = self.atomic_eth {
            put(b, &mut off, |s| x.write(s))?;
        }
        if let Some(x) = self.aeth {
            put(b, &mut off, |s| x.write(s))?;
        }
        if let Some(x) = self.atomic_ack_eth {
            put(b, &mut off, |s| x.write(s))?;
        }
        if let Some(x) = self.immdt {
            put(b, &mut off, |s| x.write(s))?;
        }
        if let Some(x) = self.ieth {
            put(b, &mut off, |s| x.write(s))?;
        }
        Ok(off)
    }
}

/// Why a received packet was dropped by [`parse_packet`].
///
/// Each reason has an index for a per-reason drop counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ParseError {
    /// Shorter than BTH + ICRC.
    TooShort = 0,
    /// TVer is not 0.
    BadTVer = 1,
    /// The opcode is not in the opcode table.
    UnknownOpcode = 2,
    /// Shorter than the opcode's headers + ICRC.
    Truncated = 3,
    /// Length not a multiple of 4 bytes (payload + pad must be).
    Misaligned = 4,
    /// Pad count larger than the data, or non-zero where no pad is allowed
    /// (First/Middle packets, opcodes without payload).
    BadPad = 5,
    /// Data after the headers of an opcode that carries no payload.
    UnexpectedPayload = 6,
}

impl ParseError {
    /// Number of variants (size of a counter array).
    pub const COUNT: usize = 7;

    /// Every variant, in index order.
    pub const ALL: [ParseError; ParseError::COUNT] = [
        ParseError::TooShort,
        ParseError::BadTVer,
        ParseError::UnknownOpcode,
        ParseError::Truncated,
        ParseError::Misaligned,
        ParseError::BadPad,
        ParseError::UnexpectedPayload,
    ];

    /// Index in `0..COUNT`.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// A short name for counters and logs.
    pub const fn name(self) -> &'static str {
        match self {
            ParseError::TooShort => "too_short",
            ParseError::BadTVer => "bad_tver",
            ParseError::UnknownOpcode => "unknown_opcode",
            ParseError::Truncated => "truncated",
            ParseError::Misaligned => "misaligned",
            ParseError::BadPad => "bad_pad",
            ParseError::UnexpectedPayload => "unexpected_payload",
        }
    }
}

/// A validated packet: the decoded headers and where the payload is.
///
/// Offsets are from the start of the slice given to [`parse_packet`] (the
/// BTH).  Layout: `[0, payload_off)` headers, `[payload_off,
/// payload_off + payload_len)` payload, then `pad` pad bytes, then the ICRC
/// at `icrc_off` (4 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parsed {
    /// The BTH.
    pub bth: Bth,
    /// The opcode description.
    pub info: &'static OpInfo,
    /// The extension headers.
    pub ext: Ext,
    /// Offset of the payload (= length of all headers).
    pub payload_off: usize,
    /// Payload length without pad.
    pub payload_len: usize,
    /// Pad bytes after the payload (from the BTH, validated).
    pub pad: usize,
    /// Offset of the ICRC (= packet length - 4).
    pub icrc_off: usize,
    /// The ICRC as read from the wire, little-endian (compare with the
    /// value computed by `icrc`).
    pub icrc: u32,
}

impl Parsed {
    /// The payload within `pkt` (the same slice given to [`parse_packet`]);
    /// empty if `pkt` is a different, shorter slice.
    pub fn payload<'a>(&self, pkt: &'a [u8]) -> &'a [u8] {
        self.payload_off
            .checked_add(self.payload_len)
            .and_then(|end| pkt.get(self.payload_off..end))
            .unwrap_or(&[])
    }

    /// The payload within `pkt` (the packet given to [`parse_of`], in one
    /// piece or two) if it lies in one piece; `None` if it straddles them.
    #[inline]
    pub fn payload_of<'a>(&self, pkt: impl Pieces<'a>) -> Option<&'a [u8]> {
        let end = self.payload_off.checked_add(self.payload_len)?;
        pkt.piece(self.payload_off, end)
    }
}

/// Parse and validate a RoCEv2 UDP payload: BTH, extension headers, payload,
/// pad and the 4-byte ICRC trailer.
///
/// Checks, in order: at least BTH + ICRC ([`ParseError::TooShort`]), TVer 0,
/// known opcode, long enough for the opcode's headers + ICRC, total length a
/// multiple of 4, pad count consistent, no data for opcodes without payload.
/// MigReq, reserved bits, FECN/BECN and the ICRC value are not checked.
pub fn parse_packet(pkt: &[u8]) -> Result<Parsed, ParseError> {
    parse_of(pkt)
}

/// [`parse_packet`] of a packet in one piece or two (see [`Pieces`]), its
/// BTH and extension headers in the first (else [`ParseError::Truncated`]
/// or [`ParseError::TooShort`]).
#[inline]
pub fn parse_of<'a>(pkt: impl Pieces<'a>) -> Result<Parsed, ParseError> {
    let min = BTH_LEN + ICRC_LEN;
    if pkt.total() < min {
        return Err(ParseError::TooShort);
    }
    let bth = Bth::parse(pkt.first()).ok_or(ParseError::TooShort)?;
    if bth.tver != 0 {
        return Err(ParseError::BadTVer);
    }
    let info = opcode::lookup(bth.opcode).ok_or(ParseError::UnknownOpcode)?;
    let hdr_len = info.hdr_len();
    let icrc_off = pkt
        .total()
        .checked_sub(ICRC_LEN)
        .ok_or(ParseError::TooShort)?;
    // Data after the headers: payload + pad.
    let data = icrc_off.checked_sub(hdr_len).ok_or(ParseError::Truncated)?;
    if pkt.total() & 3 != 0 {
        return Err(ParseError::Misaligned);
    }
    let pad = usize::from(bth.pad);
    if !info.payload {
        if pad != 0 {
            return Err(ParseError::BadPad);
        }
        if data != 0 {
            return Err(ParseError::UnexpectedPayload);
        }
    } else if pad > data || (pad != 0 && !info.position.is_end()) {
        return Err(ParseError::BadPad);
    }
    // The ICRC before the extension headers: then the large `Ext` is built
    // where it ends up, not kept aside across the read.
    let icrc = pkt
        .four(icrc_off)
        .map(u32::from_le_bytes)
        .ok_or(ParseError::TooShort)?;
    let ext = pkt
        .first()
        .get(BTH_LEN..)
        .and_then(|s| Ext::parse(info.hdrs, s))
        .ok_or(ParseError::Truncated)?;
    Ok(Parsed {
        bth,
        info,
        ext,
        payload_off: hdr_len,
        payload_len: data.wrapping_sub(pad),
        pad,
        icrc_off,
        icrc,
    })
}

/// Write the BTH and the extension headers of `bth.opcode` into `buf`;
/// returns the header length (the payload offset).
///
/// `ext` must hold exactly the headers the opcode carries.  The BTH is
/// written as given (set `bth.pad` with [`pad_count`]).
pub fn build_headers(buf: &mut [u8], bth: &Bth, ext: &Ext) -> Result<usize, BuildError> {
    let info = opcode::lookup(bth.opcode).ok_or(BuildError::UnknownOpcode)?;
    let have = ext.present();
    if !have.contains(info.hdrs) {
        return Err(BuildError::MissingHeader);
    }
    if !info.hdrs.contains(have) {
        return Err(BuildError::UnexpectedHeader);
    }
    let hdr_len = info.hdr_len();
    if buf.len() < hdr_len {
        return Err(BuildError::BufferTooShort);
    }
    let n = bth.write(buf)?;
    let rest = buf.get_mut(n..).ok_or(BuildError::BufferTooShort)?;
    let m = ext.write(rest)?;
    n.checked_add(m).ok_or(BuildError::BufferTooShort)
}

/// Total UDP payload length of a packet with opcode `opcode` and
/// `payload_len` bytes of payload: headers + payload + pad + ICRC.
///
/// `None` for an unknown opcode, a payload on an opcode without payload, or
/// on overflow.
pub fn packet_len(opcode: u8, payload_len: usize) -> Option<usize> {
    let info = opcode::lookup(opcode)?;
    if !info.payload && payload_len != 0 {
        return None;
    }
    info.hdr_len()
        .checked_add(payload_len)?
        .checked_add(usize::from(pad_count(payload_len)))?
        .checked_add(ICRC_LEN)
}

/// Whether a payload of `len` bytes is legal for position `pos` at path MTU
/// `pmtu` bytes: First/Middle exactly `pmtu`, Last `1..=pmtu`, Only
/// `0..=pmtu`.
pub const fn payload_len_ok(pos: Position, len: usize, pmtu: usize) -> bool {
    match pos {
        Position::First | Position::Middle => len == pmtu,
        Position::Last => len >= 1 && len <= pmtu,
        Position::Only => len <= pmtu,
    }
}

#[cfg(test)]
mod tests {
    use super::super::opcode::*;
    use super::*;

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn u32(&mut self) -> u32 {
            (self.next() >> 32) as u32
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// The UC SEND_ONLY packet of the second ICRC known-answer test.
    const UC_PKT_BTH: [u8; 12] = [0x24, 0x60, 0xff, 0xff, 0, 0, 0, 211, 0, 0xcf, 0x17, 0x10];

    #[test]
    fn bth_known_bytes() {
        let b = Bth::parse(&UC_PKT_BTH).unwrap();
        assert_eq!(b.opcode, 0x24);
        assert!(!b.se);
        assert!(b.mig_req);
        assert_eq!(b.pad, 2);
        assert_eq!(b.tver, 0);
        assert_eq!(b.pkey, 0xffff);
        assert!(!b.fecn && !b.becn);
        assert_eq!(b.dest_qpn, 211);
        assert!(!b.ack_req);
        assert_eq!(b.psn, 13_571_856);
        let mut out = [0u8; 12];
        assert_eq!(b.write(&mut out), Ok(12));
        assert_eq!(out, UC_PKT_BTH);
    }

    #[test]
    fn bth_all_bits() {
        let b = Bth {
            opcode: 0xAB,
            se: true,
            mig_req: false,
            pad: 3,
            tver: 0xA,
            pkey: 0x1234,
            fecn: true,
            becn: false,
            dest_qpn: 0xABCDEF,
            ack_req: true,
            psn: 0x123456,
        };
        let mut out = [0x55u8; 14];
        assert_eq!(b.write(&mut out), Ok(12));
        assert_eq!(
            out,
            [0xAB, 0xBA, 0x12, 0x34, 0x80, 0xAB, 0xCD, 0xEF, 0x80, 0x12, 0x34, 0x56, 0x55, 0x55]
        );
        assert_eq!(Bth::parse(&out), Some(b));
        // Reserved bits are ignored when parsing.
        let mut raw = out;
        raw[4] |= 0x3F;
        raw[8] |= 0x7F;
        assert_eq!(Bth::parse(&raw), Some(b));
        let b2 = Bth {
            becn: true,
            fecn: false,
            mig_req: true,
            ..b
        };
        b2.write(&mut out).unwrap();
        assert_eq!(out[1], 0x80 | 0x40 | 0x30 | 0xA);
        assert_eq!(out[4], 0x40);
    }

    #[test]
    fn bth_errors() {
        let ok = Bth::default();
        assert_eq!(ok.write(&mut [0u8; 11]), Err(BuildError::BufferTooShort));
        assert_eq!(Bth::parse(&[0u8; 11]), None);
        for bad in [
            Bth { pad: 4, ..ok },
            Bth { tver: 16, ..ok },
            Bth {
                dest_qpn: 1 << 24,
                ..ok
            },
            Bth { psn: 1 << 24, ..ok },
        ] {
            assert_eq!(bad.write(&mut [0u8; 12]), Err(BuildError::FieldRange));
        }
    }

    #[test]
    fn flush_headers_known_bytes() {
        // FETH (persistent placement, whole-region selectivity), then RETH.
        let f = Feth::new(FLUSH_PERSISTENT | FLUSH_GLOBAL, FLUSH_MR);
        assert_eq!((f.placement(), f.level(), f.0), (3, 1, 0x13));
        let ext = Ext {
            feth: Some(f),
            reth: Some(Reth {
                va: 0x1000,
                rkey: 0x0203_0405,
                len: 64,
            }),
            ..Ext::default()
        };
        let bth = Bth {
            opcode: opcode::RC_FLUSH,
            dest_qpn: 17,
            ack_req: true,
            psn: 5,
            ..Bth::default()
        };
        let mut b = [0u8; 32];
        assert_eq!(build_headers(&mut b, &bth, &ext), Ok(32));
        assert_eq!(&b[12..16], &[0, 0, 0, 0x13]);
        assert_eq!(&b[16..24], &0x1000u64.to_be_bytes());
        assert_eq!(&b[24..28], &[2, 3, 4, 5]);
        assert_eq!(&b[28..32], &64u32.to_be_bytes());
        let hdrs = lookup(opcode::RC_FLUSH).unwrap().hdrs;
        assert_eq!(Ext::parse(hdrs, &b[12..]), Some(ext));
        assert_eq!(Ext::parse(hdrs, &b[12..31]), None);
        // Reserved FETH bits are kept, the accessors mask them.
        let r = Feth::parse(&[0xFF, 0xFF, 0xFF, 0xC5]).unwrap();
        assert_eq!((r.placement(), r.level(), r.0), (5, 0, 0xFFFF_FFC5));
    }

    #[test]
    fn ext_headers_known_bytes() {
        let mut b = [0u8; 28];
        let r = Reth {
            va: 0x0102_0304_0506_0708,
            rkey: 0x1112_1314,
            len: 0x2122_2324,
        };
        assert_eq!(r.write(&mut b), Ok(16));
        assert_eq!(
            &b[..16],
            &[1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x12, 0x13, 0x14, 0x21, 0x22, 0x23, 0x24]
        );
        assert_eq!(Reth::parse(&b), Some(r));

        let a = Aeth {
            syndrome: 0x61,
            msn: 0xABCDEF,
        };
        assert_eq!(a.write(&mut b), Ok(4));
        assert_eq!(&b[..4], &[0x61, 0xAB, 0xCD, 0xEF]);
        assert_eq!(Aeth::parse(&b), Some(a));
        assert_eq!(
            a.decoded(),
            Syndrome::Nak {
                code: NAK_INVALID_REQUEST
            }
        );
        assert_eq!(
            Aeth {
                syndrome: 0,
                msn: 1 << 24
            }
            .write(&mut b),
            Err(BuildError::FieldRange)
        );

        let d = Deth {
            qkey: GSI_QKEY,
            src_qpn: 1,
        };
        b = [0xEE; 28];
        assert_eq!(d.write(&mut b), Ok(8));
        assert_eq!(&b[..8], &[0x80, 0x01, 0x00, 0x00, 0, 0, 0, 1]);
        assert_eq!(Deth::parse(&b), Some(d));
        assert_eq!(
            Deth {
                qkey: 0,
                src_qpn: 1 << 24
            }
            .write(&mut b),
            Err(BuildError::FieldRange)
        );

        let at = AtomicEth {
            va: 0x1000,
            rkey: 0xAABBCCDD,
            swap_add: 0x0102030405060708,
            compare: 0x1112131415161718,
        };
        assert_eq!(at.write(&mut b), Ok(28));
        assert_eq!(&b[8..12], &[0xAA, 0xBB, 0xCC, 0xDD]);
        assert_eq!(&b[12..20], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(
            &b[20..28],
            &[0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18]
        );
        assert_eq!(AtomicEth::parse(&b), Some(at));
        assert_eq!(AtomicEth::parse(&b[..27]), None);
        assert_eq!(at.write(&mut b[..27]), Err(BuildError::BufferTooShort));

        let aa = AtomicAckEth {
            orig: 0xDEADBEEF_CAFEF00D,
        };
        assert_eq!(aa.write(&mut b), Ok(8));
        assert_eq!(&b[..8], &[0xDE, 0xAD, 0xBE, 0xEF, 0xCA, 0xFE, 0xF0, 0x0D]);
        assert_eq!(AtomicAckEth::parse(&b), Some(aa));

        let i = ImmDt { imm: 0x01020304 };
        assert_eq!(i.write(&mut b), Ok(4));
        assert_eq!(&b[..4], &[1, 2, 3, 4]);
        assert_eq!(ImmDt::parse(&b), Some(i));
        let ie = Ieth { rkey: 0x0A0B0C0D };
        assert_eq!(ie.write(&mut b), Ok(4));
        assert_eq!(&b[..4], &[0xA, 0xB, 0xC, 0xD]);
        assert_eq!(Ieth::parse(&b), Some(ie));
        assert_eq!(Ieth::parse(&b[..3]), None);
        assert_eq!(ImmDt::parse(&[]), None);
        assert_eq!(Aeth::parse(&[1, 2, 3]), None);
        assert_eq!(Reth::parse(&[0; 15]), None);
        assert_eq!(Deth::parse(&[0; 7]), None);
        assert_eq!(AtomicAckEth::parse(&[0; 7]), None);
    }

    #[test]
    fn syndromes() {
        for s in 0..=255u8 {
            let d = Syndrome::decode(s);
            assert_eq!(d.encode(), s);
            match s >> 5 {
                0 => assert_eq!(d, Syndrome::Ack { credits: s & 0x1F }),
                1 => assert_eq!(d, Syndrome::RnrNak { timer: s & 0x1F }),
                3 => assert_eq!(d, Syndrome::Nak { code: s & 0x1F }),
                _ => assert_eq!(d, Syndrome::Reserved(s)),
            }
        }
        assert_eq!(
            Syndrome::Ack {
                credits: AETH_ACK_UNLIMITED
            }
            .encode(),
            0x1F
        );
        assert_eq!(
            Syndrome::Nak {
                code: NAK_PSN_SEQ_ERROR
            }
            .encode(),
            0x60
        );
        assert_eq!(
            Syndrome::Nak {
                code: NAK_REMOTE_ACCESS_ERROR
            }
            .encode(),
            0x62
        );
        assert_eq!(
            Syndrome::Nak {
                code: NAK_REMOTE_OPERATIONAL_ERROR
            }
            .encode(),
            0x63
        );
        assert_eq!(
            Syndrome::Nak {
                code: NAK_INVALID_RD_REQUEST
            }
            .encode(),
            0x64
        );
        assert_eq!(Syndrome::RnrNak { timer: 0xFF }.encode(), 0x3F);
    }

    #[test]
    fn pad_and_len() {
        assert_eq!(pad_count(0), 0);
        assert_eq!(pad_count(1), 3);
        assert_eq!(pad_count(2), 2);
        assert_eq!(pad_count(3), 1);
        assert_eq!(pad_count(4), 0);
        assert_eq!(pad_count(usize::MAX), 1);
        assert_eq!(packet_len(RC_SEND_ONLY, 0), Some(16));
        assert_eq!(packet_len(RC_SEND_ONLY, 5), Some(12 + 5 + 3 + 4));
        assert_eq!(packet_len(RC_ACKNOWLEDGE, 0), Some(20));
        assert_eq!(packet_len(RC_ACKNOWLEDGE, 1), None);
        assert_eq!(packet_len(0x15, 0), None);
        assert_eq!(packet_len(RC_SEND_ONLY, usize::MAX), None);
        assert_eq!(
            packet_len(UD_SEND_ONLY_WITH_IMMEDIATE, 256),
            Some(12 + 8 + 4 + 256 + 4)
        );
        assert!(payload_len_ok(Position::First, 1024, 1024));
        assert!(!payload_len_ok(Position::Middle, 1023, 1024));
        assert!(!payload_len_ok(Position::Last, 0, 1024));
        assert!(payload_len_ok(Position::Last, 1, 1024));
        assert!(!payload_len_ok(Position::Last, 1025, 1024));
        assert!(payload_len_ok(Position::Only, 0, 1024));
        assert!(!payload_len_ok(Position::Only, 1025, 1024));
    }

    /// An `Ext` with random contents for exactly the headers in `h`.
    fn random_ext(r: &mut Rng, h: ExtHdrs) -> Ext {
        let mut e = Ext::default();
        if h.contains(ExtHdrs::DETH) {
            e.deth = Some(Deth {
                qkey: r.u32(),
                src_qpn: r.u32() & MAX_24,
            });
        }
        if h.contains(ExtHdrs::XRCETH) {
            e.xrceth = Some(Xrceth {
                srqn: r.u32() & MAX_24,
            });
        }
        if h.contains(ExtHdrs::FETH) {
            e.feth = Some(Feth(r.u32()));
        }
        if h.contains(ExtHdrs::RETH) {
            e.reth = Some(Reth {
                va: r.next(),
                rkey: r.u32(),
                len: r.u32(),
            });
        }
        if h.contains(ExtHdrs::ATOMIC_ETH) {
            e.atomic_eth = Some(AtomicEth {
                va: r.next(),
                rkey: r.u32(),
                swap_add: r.next(),
                compare: r.next(),
            });
        }
        if h.contains(ExtHdrs::AETH) {
            e.aeth = Some(Aeth {
                syndrome: r.u32() as u8,
                msn: r.u32() & MAX_24,
            });
        }
        if h.contains(ExtHdrs::ATOMIC_ACK_ETH) {
            e.atomic_ack_eth = Some(AtomicAckEth { orig: r.next() });
        }
        if h.contains(ExtHdrs::IMMDT) {
            e.immdt = Some(ImmDt { imm: r.u32() });
        }
        if h.contains(ExtHdrs::IETH) {
            e.ieth = Some(Ieth { rkey: r.u32() });
        }
        e
    }

    fn random_bth(r: &mut Rng, opcode: u8) -> Bth {
        Bth {
            opcode,
            se: r.u32() & 1 != 0,
            mig_req: r.u32() & 1 != 0,
            pad: 0,
            tver: 0,
            pkey: r.u32() as u16,
            fecn: r.u32() & 1 != 0,
            becn: r.u32() & 1 != 0,
            dest_qpn: r.u32() & MAX_24,
            ack_req: r.u32() & 1 != 0,
            psn: r.u32() & MAX_24,
        }
    }

    /// Build a full packet (headers, payload, pad, ICRC placeholder).
    fn build(buf: &mut [u8], bth: &Bth, ext: &Ext, payload: &[u8]) -> usize {
        let n = build_headers(buf, bth, ext).unwrap();
        buf[n..n + payload.len()].copy_from_slice(payload);
        let pad = usize::from(bth.pad);
        let end = n + payload.len() + pad;
        buf[n + payload.len()..end].fill(0);
        buf[end..end + 4].copy_from_slice(&0x1234_5678u32.to_le_bytes());
        end + 4
    }

    #[test]
    fn xrceth() {
        // An XRC SEND Only: BTH, XRCETH, payload; the reserved top byte of
        // the XRCETH is ignored on input and sent as zero.
        let bth = Bth {
            opcode: 0xA4,
            pad: 0,
            pkey: DEFAULT_PKEY,
            dest_qpn: 0x12,
            psn: 7,
            ..Default::default()
        };
        let ext = Ext {
            xrceth: Some(Xrceth { srqn: 0xFF12_3456 }),
            ..Default::default()
        };
        let mut b = [0u8; 64];
        let n = build_headers(&mut b, &bth, &ext).unwrap();
        assert_eq!(n, BTH_LEN + XRCETH_LEN);
        assert_eq!(b[12..16], [0x00, 0x12, 0x34, 0x56]);
        b[12] = 0xEE;
        let end = n + 8 + ICRC_LEN;
        let p = parse_packet(&b[..end]).unwrap();
        assert_eq!(p.ext.xrceth, Some(Xrceth { srqn: 0x12_3456 }));
        assert_eq!((p.payload_off, p.payload_len), (16, 8));
        // The XRCETH is required.
        let none = Ext::default();
        assert_eq!(
            build_headers(&mut b, &bth, &none),
            Err(BuildError::MissingHeader)
        );
    }

    #[test]
    fn roundtrip_every_opcode() {
        let mut r = Rng(7);
        let mut buf = [0u8; 2048];
        for code in 0..=255u8 {
            let Some(info) = lookup(code) else { continue };
            for _ in 0..50 {
                let plen = if info.payload {
                    match info.position {
                        Position::First | Position::Middle => 256,
                        _ => r.below(300),
                    }
                } else {
                    0
                };
                let mut payload = [0u8; 300];
                for b in payload.iter_mut() {
                    *b = r.u32() as u8;
                }
                let mut bth = random_bth(&mut r, code);
                bth.pad = pad_count(plen);
                let ext = random_ext(&mut r, info.hdrs);
                let len = build(&mut buf, &bth, &ext, &payload[..plen]);
                assert_eq!(Some(len), packet_len(code, plen));
                let p = parse_packet(&buf[..len]).unwrap_or_else(|e| panic!("{code:#x}: {e:?}"));
                assert_eq!(p.bth, bth);
                assert_eq!(p.ext, ext);
                assert_eq!(p.info.opcode, code);
                assert_eq!(p.payload_off, info.hdr_len());
                assert_eq!(p.payload_len, plen);
                assert_eq!(p.pad, usize::from(bth.pad));
                assert_eq!(p.icrc_off, len - 4);
                assert_eq!(p.icrc, 0x1234_5678);
                assert_eq!(p.payload(&buf[..len]), &payload[..plen]);
                assert_eq!(p.payload(&buf[..3]), &[] as &[u8]);
            }
        }
    }

    #[test]
    fn offsets_of_headers() {
        let mut buf = [0u8; 64];
        let bth = Bth {
            opcode: UD_SEND_ONLY_WITH_IMMEDIATE,
            dest_qpn: 1,
            ..Bth::default()
        };
        let ext = Ext {
            deth: Some(Deth {
                qkey: 0x11223344,
                src_qpn: 0x556677,
            }),
            immdt: Some(ImmDt { imm: 0xAABBCCDD }),
            ..Ext::default()
        };
        assert_eq!(build_headers(&mut buf, &bth, &ext), Ok(24));
        assert_eq!(
            &buf[12..24],
            &[0x11, 0x22, 0x33, 0x44, 0, 0x55, 0x66, 0x77, 0xAA, 0xBB, 0xCC, 0xDD]
        );

        let bth = Bth {
            opcode: RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
            ..Bth::default()
        };
        let ext = Ext {
            reth: Some(Reth {
                va: 1,
                rkey: 2,
                len: 3,
            }),
            immdt: Some(ImmDt { imm: 4 }),
            ..Ext::default()
        };
        assert_eq!(build_headers(&mut buf, &bth, &ext), Ok(32));
        assert_eq!(
            &buf[12..32],
            &[0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4]
        );

        let bth = Bth {
            opcode: RC_ATOMIC_ACKNOWLEDGE,
            ..Bth::default()
        };
        let ext = Ext {
            aeth: Some(Aeth {
                syndrome: 0x1F,
                msn: 9,
            }),
            atomic_ack_eth: Some(AtomicAckEth {
                orig: 0x0102030405060708,
            }),
            ..Ext::default()
        };
        assert_eq!(build_headers(&mut buf, &bth, &ext), Ok(24));
        assert_eq!(&buf[12..24], &[0x1F, 0, 0, 9, 1, 2, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn build_errors() {
        let mut buf = [0u8; 64];
        let send = Bth {
            opcode: RC_SEND_ONLY,
            ..Bth::default()
        };
        let imm = Ext {
            immdt: Some(ImmDt { imm: 1 }),
            ..Ext::default()
        };
        assert_eq!(
            build_headers(&mut buf, &send, &imm),
            Err(BuildError::UnexpectedHeader)
        );
        let send_imm = Bth {
            opcode: RC_SEND_ONLY_WITH_IMMEDIATE,
            ..send
        };
        assert_eq!(
            build_headers(&mut buf, &send_imm, &Ext::default()),
            Err(BuildError::MissingHeader)
        );
        assert_eq!(
            build_headers(&mut buf[..15], &send_imm, &imm),
            Err(BuildError::BufferTooShort)
        );
        assert_eq!(build_headers(&mut buf[..16], &send_imm, &imm), Ok(16));
        let unknown = Bth {
            opcode: 0x15,
            ..send
        };
        assert_eq!(
            build_headers(&mut buf, &unknown, &Ext::default()),
            Err(BuildError::UnknownOpcode)
        );
        let bad = Bth {
            psn: 1 << 24,
            ..send_imm
        };
        assert_eq!(
            build_headers(&mut buf, &bad, &imm),
            Err(BuildError::FieldRange)
        );
        // Header too short for a field error to matter: buffer check first.
        assert_eq!(
            build_headers(&mut [], &send, &Ext::default()),
            Err(BuildError::BufferTooShort)
        );
        assert_eq!(Ext::default().write(&mut []), Ok(0));
        assert_eq!(imm.write(&mut [0; 3]), Err(BuildError::BufferTooShort));
    }

    fn pkt(opcode: u8, pad: u8, tver: u8, after_hdrs: usize) -> ([u8; 128], usize) {
        let mut b = [0u8; 128];
        let bth = Bth {
            opcode,
            pad: pad & 3,
            ..Bth::default()
        };
        bth.write(&mut b).unwrap();
        b[1] = (b[1] & 0xF0) | tver;
        let hl = lookup(opcode).map_or(12, |i| i.hdr_len());
        (b, hl + after_hdrs + 4)
    }

    #[test]
    fn parse_errors() {
        use ParseError::*;
        assert_eq!(parse_packet(&[]), Err(TooShort));
        assert_eq!(parse_packet(&[0; 15]), Err(TooShort));
        let (b, l) = pkt(RC_SEND_ONLY, 0, 0, 0);
        assert_eq!(l, 16);
        assert!(parse_packet(&b[..l]).is_ok());
        let (b, l) = pkt(RC_SEND_ONLY, 0, 1, 0);
        assert_eq!(parse_packet(&b[..l]), Err(BadTVer));
        let (b, l) = pkt(0x15, 0, 0, 0);
        assert_eq!(parse_packet(&b[..l]), Err(UnknownOpcode));
        let (b, l) = pkt(0x81 + 1, 0, 0, 0);
        assert_eq!(parse_packet(&b[..l]), Err(UnknownOpcode));
        // RETH missing: 12 + 4 bytes for a WRITE_ONLY.
        let (b, _) = pkt(RC_RDMA_WRITE_ONLY, 0, 0, 0);
        assert_eq!(parse_packet(&b[..16]), Err(Truncated));
        assert_eq!(parse_packet(&b[..31]), Err(Truncated));
        assert!(parse_packet(&b[..32]).is_ok());
        // Misaligned.
        let (b, l) = pkt(RC_SEND_ONLY, 0, 0, 5);
        assert_eq!(parse_packet(&b[..l]), Err(Misaligned));
        let (b, l) = pkt(RC_SEND_ONLY, 3, 0, 8);
        let p = parse_packet(&b[..l]).unwrap();
        assert_eq!((p.payload_len, p.pad), (5, 3));
        // Pad bigger than the data.
        let (b, l) = pkt(RC_SEND_ONLY, 1, 0, 0);
        assert_eq!(parse_packet(&b[..l]), Err(BadPad));
        // Pad on a First/Middle packet.
        let (b, l) = pkt(RC_SEND_FIRST, 1, 0, 8);
        assert_eq!(parse_packet(&b[..l]), Err(BadPad));
        let (b, l) = pkt(RC_RDMA_READ_RESPONSE_MIDDLE, 2, 0, 8);
        assert_eq!(parse_packet(&b[..l]), Err(BadPad));
        let (b, l) = pkt(RC_RDMA_READ_RESPONSE_LAST, 2, 0, 8);
        assert!(parse_packet(&b[..l]).is_ok());
        // Opcodes without payload.
        let (b, l) = pkt(RC_ACKNOWLEDGE, 0, 0, 4);
        assert_eq!(parse_packet(&b[..l]), Err(UnexpectedPayload));
        let (b, l) = pkt(RC_ACKNOWLEDGE, 1, 0, 0);
        assert_eq!(parse_packet(&b[..l]), Err(BadPad));
        let (b, l) = pkt(RC_RDMA_READ_REQUEST, 0, 0, 0);
        assert!(parse_packet(&b[..l]).is_ok());
        let (b, l) = pkt(RC_COMPARE_SWAP, 0, 0, 0);
        assert_eq!(l, 44);
        assert!(parse_packet(&b[..l]).is_ok());
        assert_eq!(parse_packet(&b[..40]), Err(Truncated));
        // Every error has a distinct index and name.
        for (i, e) in ParseError::ALL.iter().enumerate() {
            assert_eq!(e.index(), i);
            assert!(ParseError::ALL[..i].iter().all(|x| x.name() != e.name()));
        }
    }

    #[test]
    fn parse_cnp_capture() {
        // The CNP of the first ICRC known-answer test (UDP payload).
        let p: [u8; 32] = [
            0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x01, 0x18, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 0, 0, 0, 0, 0, 0x82, 0xfd, 0x00, 0x2a,
        ];
        let r = parse_packet(&p).unwrap();
        assert_eq!(r.info.opcode, CNP);
        assert!(r.bth.becn);
        assert_eq!(r.bth.dest_qpn, 0x118);
        assert_eq!(r.bth.psn, 0);
        assert_eq!(r.payload_len, CNP_RESERVED_LEN);
        assert_eq!(r.icrc.to_le_bytes(), [0x82, 0xfd, 0x00, 0x2a]);
    }

    /// [`Ext::write`] and [`Ext::parse`] lay the headers out as
    /// [`ExtHdrs::ORDER`] says, for every set of headers.
    #[test]
    fn ext_layout_follows_order() {
        let all = Ext {
            deth: Some(Deth {
                qkey: 0x1111_2222,
                src_qpn: 0x33_4455,
            }),
            xrceth: Some(Xrceth { srqn: 0x66_7788 }),
            feth: Some(Feth(0x0000_0013)),
            reth: Some(Reth {
                va: 0x0102_0304_0506_0708,
                rkey: 0x99aa_bbcc,
                len: 0xddee_ff00,
            }),
            atomic_eth: Some(AtomicEth {
                va: 0x1112_1314_1516_1718,
                rkey: 0x2122_2324,
                swap_add: 0x3132_3334_3536_3738,
                compare: 0x4142_4344_4546_4748,
            }),
            aeth: Some(Aeth {
                syndrome: 0x1F,
                msn: 0x12_3456,
            }),
            atomic_ack_eth: Some(AtomicAckEth {
                orig: 0x5152_5354_5556_5758,
            }),
            immdt: Some(ImmDt { imm: 0x6162_6364 }),
            ieth: Some(Ieth { rkey: 0x7172_7374 }),
        };
        for set in 0u16..1 << ExtHdrs::ORDER.len() {
            let mut e = Ext::default();
            let mut want = [0u8; 128];
            let mut off = 0;
            for (i, (h, len)) in ExtHdrs::ORDER.iter().enumerate() {
                if set & (1 << i) == 0 {
                    continue;
                }
                // Each header alone, written by its own `write`, at the
                // offset ORDER gives it.
                let mut one = Ext::default();
                match *h {
                    ExtHdrs::DETH => (e.deth, one.deth) = (all.deth, all.deth),
                    ExtHdrs::XRCETH => (e.xrceth, one.xrceth) = (all.xrceth, all.xrceth),
                    ExtHdrs::FETH => (e.feth, one.feth) = (all.feth, all.feth),
                    ExtHdrs::RETH => (e.reth, one.reth) = (all.reth, all.reth),
                    ExtHdrs::ATOMIC_ETH => {
                        (e.atomic_eth, one.atomic_eth) = (all.atomic_eth, all.atomic_eth)
                    }
                    ExtHdrs::AETH => (e.aeth, one.aeth) = (all.aeth, all.aeth),
                    ExtHdrs::ATOMIC_ACK_ETH => {
                        (e.atomic_ack_eth, one.atomic_ack_eth) =
                            (all.atomic_ack_eth, all.atomic_ack_eth)
                    }
                    ExtHdrs::IMMDT => (e.immdt, one.immdt) = (all.immdt, all.immdt),
                    ExtHdrs::IETH => (e.ieth, one.ieth) = (all.ieth, all.ieth),
                    _ => unreachable!(),
                }
                assert_eq!(one.write(&mut want[off..]), Ok(*len));
                off += len;
            }
            let mut got = [0u8; 128];
            assert_eq!(e.write(&mut got), Ok(off), "set {set:#x}");
            assert_eq!(got, want, "set {set:#x}");
            assert_eq!(
                Ext::parse(e.present(), &got[..off]),
                Some(e),
                "set {set:#x}"
            );
            if off > 0 {
                assert_eq!(Ext::parse(e.present(), &got[..off - 1]), None);
                assert_eq!(
                    e.write(&mut got[..off - 1]),
                    Err(BuildError::BufferTooShort)
                );
            }
        }
    }

    #[test]
    fn fuzz_parse_never_panics() {
        let mut r = Rng(99);
        let mut buf = [0u8; 200];
        for i in 0..200_000 {
            let len = r.below(buf.len() + 1);
            for b in buf[..len].iter_mut() {
                *b = r.u32() as u8;
            }
            // Often make the opcode and TVer plausible to get deeper.
            if len > 1 && i % 2 == 0 {
                buf[0] = [
                    0x00, 0x04, 0x0A, 0x0B, 0x0C, 0x0D, 0x12, 0x13, 0x64, 0x65, 0x81,
                ][r.below(11)];
                buf[1] &= 0xF0;
            }
            if let Ok(p) = parse_packet(&buf[..len]) {
                assert!(p.payload_off + p.payload_len + p.pad + 4 == len);
                assert_eq!(len % 4, 0);
                assert!(p.pad <= 3);
                assert_eq!(p.ext.present(), p.info.hdrs);
            }
        }
    }

    #[test]
    fn fuzz_build_never_panics() {
        let mut r = Rng(5);
        let mut buf = [0u8; 80];
        for _ in 0..100_000 {
            let code = r.u32() as u8;
            let mut bth = random_bth(&mut r, code);
            bth.psn = r.u32() >> r.below(9);
            bth.pad = (r.u32() % 5) as u8;
            let hdrs = ExtHdrs::ORDER[r.below(8)]
                .0
                .with(ExtHdrs::ORDER[r.below(8)].0);
            let ext = random_ext(&mut r, hdrs);
            let n = r.below(buf.len() + 1);
            if let Ok(len) = build_headers(&mut buf[..n], &bth, &ext) {
                assert_eq!(Some(len), lookup(code).map(|i| i.hdr_len()));
                assert_eq!(Bth::parse(&buf), Some(bth));
            }
        }
    }
}
