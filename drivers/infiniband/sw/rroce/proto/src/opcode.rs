// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! The IBTA BTH opcode byte and a table describing every opcode rroce knows.
//!
//! The top 3 bits select the transport (RC 0x00, UC 0x20, RD 0x40, UD 0x60,
//! CNP 0x80) and the low 5 bits the operation.  [`lookup`] maps an opcode to
//! an [`OpInfo`] that says which extension headers follow the BTH (in wire
//! order), whether a payload follows, whether the packet is a request or a
//! response, and its position in a message.  Opcodes not in the table
//! (reserved, RD, vendor) give `None`.

/// Mask of the transport bits of the opcode.
pub const TRANSPORT_MASK: u8 = 0xE0;
/// Mask of the operation bits of the opcode.
pub const OPERATION_MASK: u8 = 0x1F;

/// Length of the Base Transport Header.
pub const BTH_LEN: usize = 12;
/// Length of the RDMA Extended Transport Header.
pub const RETH_LEN: usize = 16;
/// Length of the ACK Extended Transport Header.
pub const AETH_LEN: usize = 4;
/// Length of the Immediate Data header.
pub const IMMDT_LEN: usize = 4;
/// Length of the Invalidate Extended Transport Header.
pub const IETH_LEN: usize = 4;
/// FLUSH Extended Transport Header length (IBTA 1.5).
pub const FETH_LEN: usize = 4;
/// XRC ETH length (XRC requests: the destination XRC SRQ number).
pub const XRCETH_LEN: usize = 4;
/// Length of the Datagram Extended Transport Header.
pub const DETH_LEN: usize = 8;
/// Length of the Atomic Extended Transport Header.
pub const ATOMIC_ETH_LEN: usize = 28;
/// Length of the Atomic ACK Extended Transport Header.
pub const ATOMIC_ACK_ETH_LEN: usize = 8;
/// Length of the invariant CRC trailer.
pub const ICRC_LEN: usize = 4;
/// Reserved bytes that follow the BTH of a RoCEv2 CNP.
pub const CNP_RESERVED_LEN: usize = 16;

/// Operation codes (the low 5 bits of the opcode).
pub mod op {
    /// SEND First.
    pub const SEND_FIRST: u8 = 0x00;
    /// SEND Middle.
    pub const SEND_MIDDLE: u8 = 0x01;
    /// SEND Last.
    pub const SEND_LAST: u8 = 0x02;
    /// SEND Last with Immediate.
    pub const SEND_LAST_WITH_IMMEDIATE: u8 = 0x03;
    /// SEND Only.
    pub const SEND_ONLY: u8 = 0x04;
    /// SEND Only with Immediate.
    pub const SEND_ONLY_WITH_IMMEDIATE: u8 = 0x05;
    /// RDMA WRITE First.
    pub const RDMA_WRITE_FIRST: u8 = 0x06;
    /// RDMA WRITE Middle.
    pub const RDMA_WRITE_MIDDLE: u8 = 0x07;
    /// RDMA WRITE Last.
    pub const RDMA_WRITE_LAST: u8 = 0x08;
    /// RDMA WRITE Last with Immediate.
    pub const RDMA_WRITE_LAST_WITH_IMMEDIATE: u8 = 0x09;
    /// RDMA WRITE Only.
    pub const RDMA_WRITE_ONLY: u8 = 0x0A;
    /// RDMA WRITE Only with Immediate.
    pub const RDMA_WRITE_ONLY_WITH_IMMEDIATE: u8 = 0x0B;
    /// RDMA READ Request.
    pub const RDMA_READ_REQUEST: u8 = 0x0C;
    /// RDMA READ Response First.
    pub const RDMA_READ_RESPONSE_FIRST: u8 = 0x0D;
    /// RDMA READ Response Middle.
    pub const RDMA_READ_RESPONSE_MIDDLE: u8 = 0x0E;
    /// RDMA READ Response Last.
    pub const RDMA_READ_RESPONSE_LAST: u8 = 0x0F;
    /// RDMA READ Response Only.
    pub const RDMA_READ_RESPONSE_ONLY: u8 = 0x10;
    /// Acknowledge.
    pub const ACKNOWLEDGE: u8 = 0x11;
    /// ATOMIC Acknowledge.
    pub const ATOMIC_ACKNOWLEDGE: u8 = 0x12;
    /// CmpSwap.
    pub const COMPARE_SWAP: u8 = 0x13;
    /// FetchAdd.
    pub const FETCH_ADD: u8 = 0x14;
    /// SEND Last with Invalidate.
    pub const SEND_LAST_WITH_INVALIDATE: u8 = 0x16;
    /// SEND Only with Invalidate.
    pub const SEND_ONLY_WITH_INVALIDATE: u8 = 0x17;
    /// FLUSH (IBTA 1.5): FETH and RETH, no payload, RC only.
    pub const FLUSH: u8 = 0x1C;
    /// ATOMIC WRITE (IBTA 1.5): RETH and 8 bytes of payload, RC only.
    pub const ATOMIC_WRITE: u8 = 0x1D;
    /// Operation bits of the RoCEv2 CNP opcode (0x81).
    pub const CNP: u8 = 0x01;
}

/// Full RC opcodes.
pub const RC_SEND_FIRST: u8 = op::SEND_FIRST;
/// RC SEND Middle.
pub const RC_SEND_MIDDLE: u8 = op::SEND_MIDDLE;
/// RC SEND Last.
pub const RC_SEND_LAST: u8 = op::SEND_LAST;
/// RC SEND Last with Immediate.
pub const RC_SEND_LAST_WITH_IMMEDIATE: u8 = op::SEND_LAST_WITH_IMMEDIATE;
/// RC SEND Only.
pub const RC_SEND_ONLY: u8 = op::SEND_ONLY;
/// RC SEND Only with Immediate.
pub const RC_SEND_ONLY_WITH_IMMEDIATE: u8 = op::SEND_ONLY_WITH_IMMEDIATE;
/// RC RDMA WRITE First.
pub const RC_RDMA_WRITE_FIRST: u8 = op::RDMA_WRITE_FIRST;
/// RC RDMA WRITE Middle.
pub const RC_RDMA_WRITE_MIDDLE: u8 = op::RDMA_WRITE_MIDDLE;
/// RC RDMA WRITE Last.
pub const RC_RDMA_WRITE_LAST: u8 = op::RDMA_WRITE_LAST;
/// RC RDMA WRITE Last with Immediate.
pub const RC_RDMA_WRITE_LAST_WITH_IMMEDIATE: u8 = op::RDMA_WRITE_LAST_WITH_IMMEDIATE;
/// RC RDMA WRITE Only.
pub const RC_RDMA_WRITE_ONLY: u8 = op::RDMA_WRITE_ONLY;
/// RC RDMA WRITE Only with Immediate.
pub const RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE: u8 = op::RDMA_WRITE_ONLY_WITH_IMMEDIATE;
/// RC RDMA READ Request.
pub const RC_RDMA_READ_REQUEST: u8 = op::RDMA_READ_REQUEST;
/// RC RDMA READ Response First.
pub const RC_RDMA_READ_RESPONSE_FIRST: u8 = op::RDMA_READ_RESPONSE_FIRST;
/// RC RDMA READ Response Middle.
pub const RC_RDMA_READ_RESPONSE_MIDDLE: u8 = op::RDMA_READ_RESPONSE_MIDDLE;
/// RC RDMA READ Response Last.
pub const RC_RDMA_READ_RESPONSE_LAST: u8 = op::RDMA_READ_RESPONSE_LAST;
/// RC RDMA READ Response Only.
pub const RC_RDMA_READ_RESPONSE_ONLY: u8 = op::RDMA_READ_RESPONSE_ONLY;
/// RC Acknowledge.
pub const RC_ACKNOWLEDGE: u8 = op::ACKNOWLEDGE;
/// RC ATOMIC Acknowledge.
pub const RC_ATOMIC_ACKNOWLEDGE: u8 = op::ATOMIC_ACKNOWLEDGE;
/// RC CmpSwap.
pub const RC_COMPARE_SWAP: u8 = op::COMPARE_SWAP;
/// RC FetchAdd.
pub const RC_FETCH_ADD: u8 = op::FETCH_ADD;
/// RC SEND Last with Invalidate.
pub const RC_SEND_LAST_WITH_INVALIDATE: u8 = op::SEND_LAST_WITH_INVALIDATE;
/// RC SEND Only with Invalidate.
pub const RC_SEND_ONLY_WITH_INVALIDATE: u8 = op::SEND_ONLY_WITH_INVALIDATE;
/// RC ATOMIC WRITE.
pub const RC_ATOMIC_WRITE: u8 = op::ATOMIC_WRITE;
/// RC FLUSH.
pub const RC_FLUSH: u8 = op::FLUSH;
/// UD SEND Only.
pub const UD_SEND_ONLY: u8 = 0x60 | op::SEND_ONLY;
/// UD SEND Only with Immediate.
pub const UD_SEND_ONLY_WITH_IMMEDIATE: u8 = 0x60 | op::SEND_ONLY_WITH_IMMEDIATE;
/// RoCEv2 Congestion Notification Packet.
pub const CNP: u8 = 0x80 | op::CNP;

/// The transport service, from the top 3 bits of the opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Transport {
    /// Reliable Connection (0x00).
    Rc = 0x00,
    /// Unreliable Connection (0x20).
    Uc = 0x20,
    /// Reliable Datagram (0x40); not supported by rroce.
    Rd = 0x40,
    /// Unreliable Datagram (0x60).
    Ud = 0x60,
    /// RoCEv2 congestion notification (0x80).
    Cnp = 0x80,
    /// Extended Reliable Connection (0xA0): RC between an XRC initiator
    /// and an XRC target QP; requests carry an XRCETH.
    Xrc = 0xA0,
}

impl Transport {
    /// The transport of `opcode`, or `None` for the reserved/vendor values
    /// 0xC0..=0xFF.
    pub const fn of_opcode(opcode: u8) -> Option<Transport> {
        match opcode & TRANSPORT_MASK {
            0x00 => Some(Transport::Rc),
            0x20 => Some(Transport::Uc),
            0x40 => Some(Transport::Rd),
            0x60 => Some(Transport::Ud),
            0x80 => Some(Transport::Cnp),
            0xA0 => Some(Transport::Xrc),
            _ => None,
        }
    }

    /// The transport bits (the opcode base).
    pub const fn base(self) -> u8 {
        self as u8
    }
}

/// A set of extension headers, kept in wire order.
///
/// When several are present they follow the BTH in the order of the bit
/// values: DETH, XRCETH, FETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt,
/// IETH.
/// This is the IBA order for the combinations RC/UC/UD use (e.g. DETH
/// before ImmDt, FETH before RETH, RETH before ImmDt, AETH before
/// AtomicAckETH).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ExtHdrs(u16);

impl ExtHdrs {
    /// No extension header.
    pub const NONE: ExtHdrs = ExtHdrs(0);
    /// Datagram ETH (8 bytes).
    pub const DETH: ExtHdrs = ExtHdrs(1 << 0);
    /// XRC ETH (4 bytes; XRC requests).
    pub const XRCETH: ExtHdrs = ExtHdrs(1 << 1);
    /// FLUSH ETH (4 bytes; IBTA 1.5).
    pub const FETH: ExtHdrs = ExtHdrs(1 << 2);
    /// RDMA ETH (16 bytes).
    pub const RETH: ExtHdrs = ExtHdrs(1 << 3);
    /// Atomic ETH (28 bytes).
    pub const ATOMIC_ETH: ExtHdrs = ExtHdrs(1 << 4);
    /// ACK ETH (4 bytes).
    pub const AETH: ExtHdrs = ExtHdrs(1 << 5);
    /// Atomic ACK ETH (8 bytes).
    pub const ATOMIC_ACK_ETH: ExtHdrs = ExtHdrs(1 << 6);
    /// Immediate data (4 bytes).
    pub const IMMDT: ExtHdrs = ExtHdrs(1 << 7);
    /// Invalidate ETH (4 bytes).
    pub const IETH: ExtHdrs = ExtHdrs(1 << 8);

    /// Every header, one bit each, in wire order, with its length.
    pub const ORDER: [(ExtHdrs, usize); 9] = [
        (ExtHdrs::DETH, DETH_LEN),
        (ExtHdrs::XRCETH, XRCETH_LEN),
        (ExtHdrs::FETH, FETH_LEN),
        (ExtHdrs::RETH, RETH_LEN),
        (ExtHdrs::ATOMIC_ETH, ATOMIC_ETH_LEN),
        (ExtHdrs::AETH, AETH_LEN),
        (ExtHdrs::ATOMIC_ACK_ETH, ATOMIC_ACK_ETH_LEN),
        (ExtHdrs::IMMDT, IMMDT_LEN),
        (ExtHdrs::IETH, IETH_LEN),
    ];

    /// The raw bits.
    pub const fn bits(self) -> u16 {
        self.0
    }

    /// The union of two sets.
    #[must_use]
    pub const fn with(self, other: ExtHdrs) -> ExtHdrs {
        ExtHdrs(self.0 | other.0)
    }

    /// Whether every header of `other` is in `self`.
    pub const fn contains(self, other: ExtHdrs) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Total length of the headers in the set.
    pub const fn len(self) -> usize {
        const fn l(s: ExtHdrs, h: ExtHdrs, len: usize) -> usize {
            if s.contains(h) {
                len
            } else {
                0
            }
        }
        // At most 80 bytes in all: the sum cannot overflow.
        l(self, ExtHdrs::DETH, DETH_LEN)
            .wrapping_add(l(self, ExtHdrs::XRCETH, XRCETH_LEN))
            .wrapping_add(l(self, ExtHdrs::FETH, FETH_LEN))
            .wrapping_add(l(self, ExtHdrs::RETH, RETH_LEN))
            .wrapping_add(l(self, ExtHdrs::ATOMIC_ETH, ATOMIC_ETH_LEN))
            .wrapping_add(l(self, ExtHdrs::AETH, AETH_LEN))
            .wrapping_add(l(self, ExtHdrs::ATOMIC_ACK_ETH, ATOMIC_ACK_ETH_LEN))
            .wrapping_add(l(self, ExtHdrs::IMMDT, IMMDT_LEN))
            .wrapping_add(l(self, ExtHdrs::IETH, IETH_LEN))
    }

    /// Offset of header `h` (a single header) from the start of the BTH, if
    /// it is in the set.
    pub const fn offset_of(self, h: ExtHdrs) -> Option<usize> {
        if h.0.count_ones() != 1 || !self.contains(h) {
            return None;
        }
        // Bit order is wire order: the headers before `h` are the lower bits.
        let before = ExtHdrs(self.0 & h.0.wrapping_sub(1));
        Some(BTH_LEN.wrapping_add(before.len()))
    }
}

/// What an opcode does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// SEND (with or without immediate/invalidate).
    Send,
    /// RDMA WRITE (with or without immediate).
    RdmaWrite,
    /// RDMA READ request.
    RdmaReadRequest,
    /// RDMA READ response.
    RdmaReadResponse,
    /// Acknowledge (ACK/NAK).
    Acknowledge,
    /// ATOMIC Acknowledge.
    AtomicAcknowledge,
    /// Compare and swap.
    CompareSwap,
    /// Fetch and add.
    FetchAdd,
    /// ATOMIC WRITE (8 bytes written as one unit; answered by an ACK).
    AtomicWrite,
    /// FLUSH (IBTA 1.5): make earlier writes to a range or a whole region
    /// globally visible or persistent; answered by an empty READ response.
    Flush,
    /// RoCEv2 congestion notification.
    Cnp,
}

/// Position of a packet in its message.  Single-packet operations (READ
/// request, atomics, ACKs, CNP) are [`Position::Only`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Position {
    /// First packet of a multi-packet message.
    First,
    /// Middle packet of a multi-packet message.
    Middle,
    /// Last packet of a multi-packet message.
    Last,
    /// The only packet of a message.
    Only,
}

impl Position {
    /// Starts a message (First or Only).
    pub const fn is_start(self) -> bool {
        matches!(self, Position::First | Position::Only)
    }

    /// Ends a message (Last or Only).
    pub const fn is_end(self) -> bool {
        matches!(self, Position::Last | Position::Only)
    }
}

/// Direction of a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Requester to responder.
    Request,
    /// Responder to requester.
    Response,
    /// Congestion notification (neither).
    Cnp,
}

/// Everything the table knows about one opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpInfo {
    /// The full opcode byte.
    pub opcode: u8,
    /// IBA name without the transport prefix, e.g. `"SEND_FIRST"`.
    pub name: &'static str,
    /// Transport service.
    pub transport: Transport,
    /// What the packet does.
    pub operation: Operation,
    /// Position in the message.
    pub position: Position,
    /// Request, response or CNP.
    pub kind: Kind,
    /// Extension headers after the BTH.
    pub hdrs: ExtHdrs,
    /// Whether data follows the headers (for a CNP: its 16 reserved bytes).
    pub payload: bool,
    /// Carries immediate data.
    pub imm: bool,
    /// Carries an rkey to invalidate.
    pub inv: bool,
}

impl OpInfo {
    /// Length of BTH plus extension headers: the offset of the payload.
    pub const fn hdr_len(&self) -> usize {
        BTH_LEN.wrapping_add(self.hdrs.len())
    }

    /// Whether the opcode is a request.
    pub const fn is_request(&self) -> bool {
        matches!(self.kind, Kind::Request)
    }

    /// Whether the opcode is a response.
    pub const fn is_response(&self) -> bool {
        matches!(self.kind, Kind::Response)
    }
}

/// A row of the base (RC) table, from which UC and UD rows are derived.
struct Base {
    op: u8,
    name: &'static str,
    operation: Operation,
    position: Position,
    kind: Kind,
    hdrs: ExtHdrs,
    payload: bool,
    imm: bool,
    inv: bool,
    uc: bool,
    ud: bool,
}

#[allow(clippy::too_many_arguments)]
const fn row(
    op: u8,
    name: &'static str,
    operation: Operation,
    position: Position,
    kind: Kind,
    hdrs: ExtHdrs,
    payload: bool,
    uc: bool,
    ud: bool,
) -> Base {
    Base {
        op,
        name,
        operation,
        position,
        kind,
        hdrs,
        payload,
        imm: hdrs.contains(ExtHdrs::IMMDT),
        inv: hdrs.contains(ExtHdrs::IETH),
        uc,
        ud,
    }
}

const BASE: [Base; 25] = {
    use ExtHdrs as H;
    use Kind::{Request as Req, Response as Resp};
    use Operation::*;
    use Position::*;
    const N: ExtHdrs = ExtHdrs::NONE;
    [
        row(
            op::SEND_FIRST,
            "SEND_FIRST",
            Send,
            First,
            Req,
            N,
            true,
            true,
            false,
        ),
        row(
            op::SEND_MIDDLE,
            "SEND_MIDDLE",
            Send,
            Middle,
            Req,
            N,
            true,
            true,
            false,
        ),
        row(
            op::SEND_LAST,
            "SEND_LAST",
            Send,
            Last,
            Req,
            N,
            true,
            true,
            false,
        ),
        row(
            op::SEND_LAST_WITH_IMMEDIATE,
            "SEND_LAST_WITH_IMMEDIATE",
            Send,
            Last,
            Req,
            H::IMMDT,
            true,
            true,
            false,
        ),
        row(
            op::SEND_ONLY,
            "SEND_ONLY",
            Send,
            Only,
            Req,
            N,
            true,
            true,
            true,
        ),
        row(
            op::SEND_ONLY_WITH_IMMEDIATE,
            "SEND_ONLY_WITH_IMMEDIATE",
            Send,
            Only,
            Req,
            H::IMMDT,
            true,
            true,
            true,
        ),
        row(
            op::RDMA_WRITE_FIRST,
            "RDMA_WRITE_FIRST",
            RdmaWrite,
            First,
            Req,
            H::RETH,
            true,
            true,
            false,
        ),
        row(
            op::RDMA_WRITE_MIDDLE,
            "RDMA_WRITE_MIDDLE",
            RdmaWrite,
            Middle,
            Req,
            N,
            true,
            true,
            false,
        ),
        row(
            op::RDMA_WRITE_LAST,
            "RDMA_WRITE_LAST",
            RdmaWrite,
            Last,
            Req,
            N,
            true,
            true,
            false,
        ),
        row(
            op::RDMA_WRITE_LAST_WITH_IMMEDIATE,
            "RDMA_WRITE_LAST_WITH_IMMEDIATE",
            RdmaWrite,
            Last,
            Req,
            H::IMMDT,
            true,
            true,
            false,
        ),
        row(
            op::RDMA_WRITE_ONLY,
            "RDMA_WRITE_ONLY",
            RdmaWrite,
            Only,
            Req,
            H::RETH,
            true,
            true,
            false,
        ),
        row(
            op::RDMA_WRITE_ONLY_WITH_IMMEDIATE,
            "RDMA_WRITE_ONLY_WITH_IMMEDIATE",
            RdmaWrite,
            Only,
            Req,
            H::RETH.with(H::IMMDT),
            true,
            true,
            false,
        ),
        row(
            op::RDMA_READ_REQUEST,
            "RDMA_READ_REQUEST",
            RdmaReadRequest,
            Only,
            Req,
            H::RETH,
            false,
            false,
            false,
        ),
        row(
            op::RDMA_READ_RESPONSE_FIRST,
            "RDMA_READ_RESPONSE_FIRST",
            RdmaReadResponse,
            First,
            Resp,
            H::AETH,
            true,
            false,
            false,
        ),
        row(
            op::RDMA_READ_RESPONSE_MIDDLE,
            "RDMA_READ_RESPONSE_MIDDLE",
            RdmaReadResponse,
            Middle,
            Resp,
            N,
            true,
            false,
            false,
        ),
        row(
            op::RDMA_READ_RESPONSE_LAST,
            "RDMA_READ_RESPONSE_LAST",
            RdmaReadResponse,
            Last,
            Resp,
            H::AETH,
            true,
            false,
            false,
        ),
        row(
            op::RDMA_READ_RESPONSE_ONLY,
            "RDMA_READ_RESPONSE_ONLY",
            RdmaReadResponse,
            Only,
            Resp,
            H::AETH,
            true,
            false,
            false,
        ),
        row(
            op::ACKNOWLEDGE,
            "ACKNOWLEDGE",
            Acknowledge,
            Only,
            Resp,
            H::AETH,
            false,
            false,
            false,
        ),
        row(
            op::ATOMIC_ACKNOWLEDGE,
            "ATOMIC_ACKNOWLEDGE",
            AtomicAcknowledge,
            Only,
            Resp,
            H::AETH.with(H::ATOMIC_ACK_ETH),
            false,
            false,
            false,
        ),
        row(
            op::COMPARE_SWAP,
            "COMPARE_SWAP",
            CompareSwap,
            Only,
            Req,
            H::ATOMIC_ETH,
            false,
            false,
            false,
        ),
        row(
            op::FETCH_ADD,
            "FETCH_ADD",
            FetchAdd,
            Only,
            Req,
            H::ATOMIC_ETH,
            false,
            false,
            false,
        ),
        row(
            op::SEND_LAST_WITH_INVALIDATE,
            "SEND_LAST_WITH_INVALIDATE",
            Send,
            Last,
            Req,
            H::IETH,
            true,
            false,
            false,
        ),
        row(
            op::SEND_ONLY_WITH_INVALIDATE,
            "SEND_ONLY_WITH_INVALIDATE",
            Send,
            Only,
            Req,
            H::IETH,
            true,
            false,
            false,
        ),
        row(
            op::ATOMIC_WRITE,
            "ATOMIC_WRITE",
            AtomicWrite,
            Only,
            Req,
            H::RETH,
            true,
            false,
            false,
        ),
        row(
            op::FLUSH,
            "FLUSH",
            Flush,
            Only,
            Req,
            H::FETH.with(H::RETH),
            false,
            false,
            false,
        ),
    ]
};

const fn info(transport: Transport, b: &Base, extra: ExtHdrs) -> OpInfo {
    OpInfo {
        opcode: transport.base() | b.op,
        name: b.name,
        transport,
        operation: b.operation,
        position: b.position,
        kind: b.kind,
        hdrs: b.hdrs.with(extra),
        payload: b.payload,
        imm: b.imm,
        inv: b.inv,
    }
}

const fn build_table() -> [Option<OpInfo>; 256] {
    let mut t: [Option<OpInfo>; 256] = [None; 256];
    let mut i = 0;
    while i < BASE.len() {
        let b = &BASE[i];
        t[(Transport::Rc.base() | b.op) as usize] = Some(info(Transport::Rc, b, ExtHdrs::NONE));
        if b.uc {
            t[(Transport::Uc.base() | b.op) as usize] = Some(info(Transport::Uc, b, ExtHdrs::NONE));
        }
        if b.ud {
            t[(Transport::Ud.base() | b.op) as usize] = Some(info(Transport::Ud, b, ExtHdrs::DETH));
        }
        // XRC has every RC opcode but the IBTA 1.5 ones; its requests carry
        // the XRCETH, its responses are RC's.
        if !matches!(b.operation, Operation::AtomicWrite | Operation::Flush) {
            let extra = if matches!(b.kind, Kind::Request) {
                ExtHdrs::XRCETH
            } else {
                ExtHdrs::NONE
            };
            t[(Transport::Xrc.base() | b.op) as usize] = Some(info(Transport::Xrc, b, extra));
        }
        i += 1;
    }
    t[CNP as usize] = Some(OpInfo {
        opcode: CNP,
        name: "CNP",
        transport: Transport::Cnp,
        operation: Operation::Cnp,
        position: Position::Only,
        kind: Kind::Cnp,
        hdrs: ExtHdrs::NONE,
        payload: true,
        imm: false,
        inv: false,
    });
    t
}

static TABLE: [Option<OpInfo>; 256] = build_table();

/// Description of `opcode`, or `None` if rroce does not know it.
#[inline]
pub fn lookup(opcode: u8) -> Option<&'static OpInfo> {
    TABLE.get(usize::from(opcode)).and_then(Option::as_ref)
}

/// The request operations a requester packetises.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RequestOp {
    /// SEND.
    Send,
    /// SEND with immediate.
    SendWithImm,
    /// SEND with invalidate (RC only).
    SendWithInv,
    /// RDMA WRITE.
    RdmaWrite,
    /// RDMA WRITE with immediate.
    RdmaWriteWithImm,
    /// RDMA READ (always [`Position::Only`]).
    RdmaRead,
    /// Compare and swap (always [`Position::Only`]).
    CompareSwap,
    /// Fetch and add (always [`Position::Only`]).
    FetchAdd,
    /// ATOMIC WRITE (always [`Position::Only`]; RC only).
    AtomicWrite,
    /// FLUSH (always [`Position::Only`]; RC only).
    Flush,
}

/// The opcode of a request packet, or `None` if the combination does not
/// exist (e.g. UD SEND First, UC RDMA READ, READ with `First`).
///
/// Immediate data and invalidate apply to the packet at the end of the
/// message; First and Middle packets of such messages use the plain opcodes.
pub fn request_opcode(t: Transport, r: RequestOp, p: Position) -> Option<u8> {
    use Position::*;
    use RequestOp::*;
    let o = match (r, p) {
        (Send | SendWithImm | SendWithInv, First) => op::SEND_FIRST,
        (Send | SendWithImm | SendWithInv, Middle) => op::SEND_MIDDLE,
        (Send, Last) => op::SEND_LAST,
        (Send, Only) => op::SEND_ONLY,
        (SendWithImm, Last) => op::SEND_LAST_WITH_IMMEDIATE,
        (SendWithImm, Only) => op::SEND_ONLY_WITH_IMMEDIATE,
        (SendWithInv, Last) => op::SEND_LAST_WITH_INVALIDATE,
        (SendWithInv, Only) => op::SEND_ONLY_WITH_INVALIDATE,
        (RdmaWrite | RdmaWriteWithImm, First) => op::RDMA_WRITE_FIRST,
        (RdmaWrite | RdmaWriteWithImm, Middle) => op::RDMA_WRITE_MIDDLE,
        (RdmaWrite, Last) => op::RDMA_WRITE_LAST,
        (RdmaWrite, Only) => op::RDMA_WRITE_ONLY,
        (RdmaWriteWithImm, Last) => op::RDMA_WRITE_LAST_WITH_IMMEDIATE,
        (RdmaWriteWithImm, Only) => op::RDMA_WRITE_ONLY_WITH_IMMEDIATE,
        (RdmaRead, Only) => op::RDMA_READ_REQUEST,
        (CompareSwap, Only) => op::COMPARE_SWAP,
        (FetchAdd, Only) => op::FETCH_ADD,
        (AtomicWrite, Only) => op::ATOMIC_WRITE,
        (Flush, Only) => op::FLUSH,
        _ => return None,
    };
    let code = t.base() | o;
    match lookup(code) {
        Some(i) if i.transport == t && i.position == p && i.is_request() => Some(code),
        _ => None,
    }
}

/// The XRC opcode with the operation and position of the RC opcode `rc`;
/// `None` if `rc` is not an RC opcode or one XRC lacks (FLUSH,
/// ATOMIC_WRITE).  An XRC initiator's requests and an XRC target's
/// responses are RC's engines' packets under these opcodes.
pub fn xrc_of_rc(rc: u8) -> Option<u8> {
    let x = Transport::Xrc.base() | (rc & OPERATION_MASK);
    match (lookup(rc), lookup(x)) {
        (Some(r), Some(_)) if r.transport == Transport::Rc => Some(x),
        _ => None,
    }
}

/// The RC opcode with the operation and position of the XRC opcode `xrc`;
/// `None` if `xrc` is not a known XRC opcode.
pub fn rc_of_xrc(xrc: u8) -> Option<u8> {
    match lookup(xrc) {
        Some(i) if i.transport == Transport::Xrc => Some(xrc & OPERATION_MASK),
        _ => None,
    }
}

/// The RC RDMA READ response opcode for position `p`.
pub const fn read_response_opcode(p: Position) -> u8 {
    match p {
        Position::First => RC_RDMA_READ_RESPONSE_FIRST,
        Position::Middle => RC_RDMA_READ_RESPONSE_MIDDLE,
        Position::Last => RC_RDMA_READ_RESPONSE_LAST,
        Position::Only => RC_RDMA_READ_RESPONSE_ONLY,
    }
}

/// The position of packet `index` (0-based) of a message of `npkts` packets.
/// `npkts == 0` is treated as 1.
pub const fn position_of(index: u32, npkts: u32) -> Position {
    let last = npkts.saturating_sub(1);
    if last == 0 {
        Position::Only
    } else if index == 0 {
        Position::First
    } else if index >= last {
        Position::Last
    } else {
        Position::Middle
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Independent restatement of the opcode table of the reference notes
    /// (section 1.4): (opcode, headers after BTH, payload, request?).
    const EXPECT: &[(u8, ExtHdrs, bool, bool, Position)] = {
        use ExtHdrs as H;
        use Position::*;
        const N: ExtHdrs = ExtHdrs::NONE;
        const RI: ExtHdrs = ExtHdrs::RETH.with(ExtHdrs::IMMDT);
        const AA: ExtHdrs = ExtHdrs::AETH.with(ExtHdrs::ATOMIC_ACK_ETH);
        const DI: ExtHdrs = ExtHdrs::DETH.with(ExtHdrs::IMMDT);
        const FR: ExtHdrs = ExtHdrs::FETH.with(ExtHdrs::RETH);
        const X: ExtHdrs = ExtHdrs::XRCETH;
        const XI: ExtHdrs = X.with(ExtHdrs::IMMDT);
        const XR: ExtHdrs = X.with(ExtHdrs::RETH);
        &[
            (0x00, N, true, true, First),
            (0x01, N, true, true, Middle),
            (0x02, N, true, true, Last),
            (0x03, H::IMMDT, true, true, Last),
            (0x04, N, true, true, Only),
            (0x05, H::IMMDT, true, true, Only),
            (0x06, H::RETH, true, true, First),
            (0x07, N, true, true, Middle),
            (0x08, N, true, true, Last),
            (0x09, H::IMMDT, true, true, Last),
            (0x0A, H::RETH, true, true, Only),
            (0x0B, RI, true, true, Only),
            (0x0C, H::RETH, false, true, Only),
            (0x0D, H::AETH, true, false, First),
            (0x0E, N, true, false, Middle),
            (0x0F, H::AETH, true, false, Last),
            (0x10, H::AETH, true, false, Only),
            (0x11, H::AETH, false, false, Only),
            (0x12, AA, false, false, Only),
            (0x13, H::ATOMIC_ETH, false, true, Only),
            (0x14, H::ATOMIC_ETH, false, true, Only),
            (0x16, H::IETH, true, true, Last),
            (0x17, H::IETH, true, true, Only),
            (0x1C, FR, false, true, Only),     // FLUSH (IBTA 1.5)
            (0x1D, H::RETH, true, true, Only), // ATOMIC_WRITE (IBTA 1.5)
            (0x20, N, true, true, First),
            (0x21, N, true, true, Middle),
            (0x22, N, true, true, Last),
            (0x23, H::IMMDT, true, true, Last),
            (0x24, N, true, true, Only),
            (0x25, H::IMMDT, true, true, Only),
            (0x26, H::RETH, true, true, First),
            (0x27, N, true, true, Middle),
            (0x28, N, true, true, Last),
            (0x29, H::IMMDT, true, true, Last),
            (0x2A, H::RETH, true, true, Only),
            (0x2B, RI, true, true, Only),
            (0x64, H::DETH, true, true, Only),
            (0x65, DI, true, true, Only),
            // XRC: the RC set without FLUSH/ATOMIC_WRITE, an XRCETH right
            // after the BTH of every request.
            (0xA0, X, true, true, First),
            (0xA1, X, true, true, Middle),
            (0xA2, X, true, true, Last),
            (0xA3, XI, true, true, Last),
            (0xA4, X, true, true, Only),
            (0xA5, XI, true, true, Only),
            (0xA6, XR, true, true, First),
            (0xA7, X, true, true, Middle),
            (0xA8, X, true, true, Last),
            (0xA9, XI, true, true, Last),
            (0xAA, XR, true, true, Only),
            (0xAB, XR.with(H::IMMDT), true, true, Only),
            (0xAC, XR, false, true, Only),
            (0xAD, H::AETH, true, false, First),
            (0xAE, N, true, false, Middle),
            (0xAF, H::AETH, true, false, Last),
            (0xB0, H::AETH, true, false, Only),
            (0xB1, H::AETH, false, false, Only),
            (0xB2, AA, false, false, Only),
            (0xB3, X.with(H::ATOMIC_ETH), false, true, Only),
            (0xB4, X.with(H::ATOMIC_ETH), false, true, Only),
            (0xB6, X.with(H::IETH), true, true, Last),
            (0xB7, X.with(H::IETH), true, true, Only),
        ]
    };

    #[test]
    fn table_matches_reference() {
        for &(code, hdrs, payload, req, pos) in EXPECT {
            let i = lookup(code).unwrap_or_else(|| panic!("{code:#x} missing"));
            assert_eq!(i.opcode, code);
            assert_eq!(i.hdrs, hdrs, "{code:#x} {}", i.name);
            assert_eq!(i.payload, payload, "{code:#x}");
            assert_eq!(i.is_request(), req, "{code:#x}");
            assert_eq!(i.is_response(), !req, "{code:#x}");
            assert_eq!(i.position, pos, "{code:#x}");
            assert_eq!(Some(i.transport), Transport::of_opcode(code));
            assert_eq!(i.imm, hdrs.contains(ExtHdrs::IMMDT));
            assert_eq!(i.inv, hdrs.contains(ExtHdrs::IETH));
        }
    }

    #[test]
    fn exactly_the_known_opcodes() {
        let mut n = 0;
        for code in 0..=255u8 {
            let known = EXPECT.iter().any(|e| e.0 == code) || code == CNP;
            assert_eq!(lookup(code).is_some(), known, "{code:#x}");
            n += usize::from(known);
        }
        assert_eq!(n, 63);
        // RD, reserved, UC/XRC FLUSH and ATOMIC_WRITE and vendor opcodes
        // are unknown.
        for code in [
            0x15, 0x18, 0x3C, 0x3D, 0x1F, 0x2C, 0x40, 0x44, 0x60, 0x66, 0x80, 0x82, 0xB5, 0xBC,
            0xBD, 0xC0, 0xFF,
        ] {
            assert!(lookup(code).is_none(), "{code:#x}");
        }
    }

    #[test]
    fn cnp() {
        let i = lookup(CNP).unwrap();
        assert_eq!(i.transport, Transport::Cnp);
        assert_eq!(i.kind, Kind::Cnp);
        assert_eq!(i.hdr_len(), BTH_LEN);
        assert!(!i.is_request() && !i.is_response());
    }

    #[test]
    fn header_lengths() {
        assert_eq!(lookup(RC_SEND_FIRST).unwrap().hdr_len(), 12);
        assert_eq!(
            lookup(RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE).unwrap().hdr_len(),
            12 + 16 + 4
        );
        assert_eq!(lookup(RC_ATOMIC_ACKNOWLEDGE).unwrap().hdr_len(), 12 + 4 + 8);
        assert_eq!(lookup(RC_COMPARE_SWAP).unwrap().hdr_len(), 12 + 28);
        assert_eq!(
            lookup(UD_SEND_ONLY_WITH_IMMEDIATE).unwrap().hdr_len(),
            12 + 8 + 4
        );
        assert_eq!(lookup(RC_SEND_ONLY_WITH_INVALIDATE).unwrap().hdr_len(), 16);
        assert_eq!(lookup(RC_ACKNOWLEDGE).unwrap().hdr_len(), 16);
        assert_eq!(
            ExtHdrs::ORDER.iter().map(|x| x.1).sum::<usize>(),
            8 + 4 + 4 + 16 + 28 + 4 + 8 + 4 + 4
        );
        // XRC: the XRCETH right after the BTH, before the RETH.
        let w = lookup(0xAB).unwrap();
        assert_eq!(w.hdr_len(), 12 + 4 + 16 + 4);
        assert_eq!(w.hdrs.offset_of(ExtHdrs::XRCETH), Some(12));
        assert_eq!(w.hdrs.offset_of(ExtHdrs::RETH), Some(16));
        // FLUSH: FETH then RETH, no payload.
        let f = lookup(RC_FLUSH).unwrap();
        assert_eq!(f.hdr_len(), 12 + 4 + 16);
        assert_eq!(f.hdrs.offset_of(ExtHdrs::FETH), Some(12));
        assert_eq!(f.hdrs.offset_of(ExtHdrs::RETH), Some(16));
    }

    #[test]
    fn offsets() {
        let h = ExtHdrs::DETH.with(ExtHdrs::IMMDT);
        assert_eq!(h.offset_of(ExtHdrs::DETH), Some(12));
        assert_eq!(h.offset_of(ExtHdrs::IMMDT), Some(20));
        assert_eq!(h.offset_of(ExtHdrs::RETH), None);
        assert_eq!(h.offset_of(h), None, "not a single header");
        let h = ExtHdrs::AETH.with(ExtHdrs::ATOMIC_ACK_ETH);
        assert_eq!(h.offset_of(ExtHdrs::AETH), Some(12));
        assert_eq!(h.offset_of(ExtHdrs::ATOMIC_ACK_ETH), Some(16));
        let h = ExtHdrs::RETH.with(ExtHdrs::IMMDT);
        assert_eq!(h.offset_of(ExtHdrs::IMMDT), Some(28));
        assert!(ExtHdrs::NONE.is_empty());
        // ORDER is sorted by bit (wire order) and agrees with len().
        for (i, (h, l)) in ExtHdrs::ORDER.iter().enumerate() {
            assert_eq!(h.bits(), 1 << i);
            assert_eq!(h.len(), *l);
        }
        for bits in 0..=0x1FFu16 {
            let s = ExtHdrs(bits);
            let mut off = BTH_LEN;
            for (h, l) in ExtHdrs::ORDER {
                if s.contains(h) {
                    assert_eq!(s.offset_of(h), Some(off));
                    off += l;
                } else {
                    assert_eq!(s.offset_of(h), None);
                }
            }
            assert_eq!(BTH_LEN + s.len(), off);
        }
        assert_eq!(ExtHdrs::NONE.len(), 0);
    }

    #[test]
    fn transports() {
        assert_eq!(Transport::of_opcode(0x1F), Some(Transport::Rc));
        assert_eq!(Transport::of_opcode(0x3F), Some(Transport::Uc));
        assert_eq!(Transport::of_opcode(0x41), Some(Transport::Rd));
        assert_eq!(Transport::of_opcode(0x64), Some(Transport::Ud));
        assert_eq!(Transport::of_opcode(0x81), Some(Transport::Cnp));
        assert_eq!(Transport::of_opcode(0xA0), Some(Transport::Xrc));
        assert_eq!(Transport::of_opcode(0xBF), Some(Transport::Xrc));
        assert_eq!(Transport::of_opcode(0xC0), None);
        assert_eq!(Transport::of_opcode(0xFF), None);
    }

    #[test]
    fn xrc_rc_mapping() {
        let mut n = 0;
        for code in 0..=255u8 {
            if let Some(x) = xrc_of_rc(code) {
                n += 1;
                let (r, xi) = (lookup(code).unwrap(), lookup(x).unwrap());
                assert_eq!(r.transport, Transport::Rc);
                assert_eq!(xi.transport, Transport::Xrc);
                assert_eq!(
                    (r.operation, r.position, r.kind),
                    (xi.operation, xi.position, xi.kind),
                    "{code:#x}"
                );
                // Requests gain the XRCETH, responses are the same.
                let extra = if r.is_request() {
                    ExtHdrs::XRCETH
                } else {
                    ExtHdrs::NONE
                };
                assert_eq!(xi.hdrs, r.hdrs.with(extra), "{code:#x}");
                assert_eq!(rc_of_xrc(x), Some(code));
            }
            if let Some(r) = rc_of_xrc(code) {
                assert_eq!(xrc_of_rc(r), Some(code));
            }
        }
        assert_eq!(n, 23);
        assert_eq!(xrc_of_rc(RC_FLUSH), None);
        assert_eq!(xrc_of_rc(RC_ATOMIC_WRITE), None);
        assert_eq!(xrc_of_rc(UD_SEND_ONLY), None);
        assert_eq!(xrc_of_rc(0x24), None);
        assert_eq!(rc_of_xrc(RC_SEND_ONLY), None);
        assert_eq!(rc_of_xrc(0xB5), None);
        assert_eq!(xrc_of_rc(RC_SEND_ONLY), Some(0xA4));
        assert_eq!(xrc_of_rc(RC_ACKNOWLEDGE), Some(0xB1));
    }

    #[test]
    fn request_opcodes() {
        use Position::*;
        use RequestOp::*;
        use Transport::*;
        assert_eq!(request_opcode(Rc, Send, First), Some(RC_SEND_FIRST));
        assert_eq!(
            request_opcode(Rc, SendWithImm, Middle),
            Some(RC_SEND_MIDDLE)
        );
        assert_eq!(
            request_opcode(Rc, SendWithImm, Last),
            Some(RC_SEND_LAST_WITH_IMMEDIATE)
        );
        assert_eq!(
            request_opcode(Rc, SendWithInv, Only),
            Some(RC_SEND_ONLY_WITH_INVALIDATE)
        );
        assert_eq!(request_opcode(Uc, SendWithInv, Only), None);
        assert_eq!(request_opcode(Uc, RdmaWriteWithImm, Only), Some(0x2B));
        assert_eq!(request_opcode(Uc, RdmaRead, Only), None);
        assert_eq!(request_opcode(Rc, RdmaRead, First), None);
        assert_eq!(request_opcode(Ud, Send, Only), Some(UD_SEND_ONLY));
        assert_eq!(
            request_opcode(Ud, SendWithImm, Only),
            Some(UD_SEND_ONLY_WITH_IMMEDIATE)
        );
        assert_eq!(request_opcode(Ud, Send, First), None);
        assert_eq!(request_opcode(Ud, RdmaWrite, Only), None);
        assert_eq!(request_opcode(Rd, Send, Only), None);
        assert_eq!(request_opcode(Cnp, Send, Only), None);
        assert_eq!(
            request_opcode(Cnp, Send, Middle),
            None,
            "0x81 is the CNP, not a SEND"
        );
        assert_eq!(request_opcode(Rc, FetchAdd, Only), Some(RC_FETCH_ADD));
        assert_eq!(request_opcode(Rc, CompareSwap, Only), Some(RC_COMPARE_SWAP));
        assert_eq!(request_opcode(Rc, AtomicWrite, Only), Some(RC_ATOMIC_WRITE));
        assert_eq!(request_opcode(Uc, AtomicWrite, Only), None);
        assert_eq!(request_opcode(Rc, AtomicWrite, First), None);
        assert_eq!(request_opcode(Rc, Flush, Only), Some(RC_FLUSH));
        assert_eq!(request_opcode(Uc, Flush, Only), None);
        // Every produced opcode agrees with the table.
        for t in [Rc, Uc, Rd, Ud, Cnp] {
            for r in [
                Send,
                SendWithImm,
                SendWithInv,
                RdmaWrite,
                RdmaWriteWithImm,
                RdmaRead,
                CompareSwap,
                FetchAdd,
                AtomicWrite,
                Flush,
            ] {
                for p in [First, Middle, Last, Only] {
                    if let Some(c) = request_opcode(t, r, p) {
                        let i = lookup(c).unwrap();
                        assert_eq!(i.position, p);
                        assert_eq!(i.transport, t);
                        assert!(i.is_request());
                        assert_eq!(
                            i.imm,
                            matches!(r, SendWithImm | RdmaWriteWithImm) && p.is_end()
                        );
                        assert_eq!(i.inv, r == SendWithInv && p.is_end());
                    }
                }
            }
        }
    }

    #[test]
    fn read_responses_and_positions() {
        for p in [
            Position::First,
            Position::Middle,
            Position::Last,
            Position::Only,
        ] {
            let i = lookup(read_response_opcode(p)).unwrap();
            assert_eq!(i.position, p);
            assert_eq!(i.operation, Operation::RdmaReadResponse);
        }
        assert_eq!(position_of(0, 0), Position::Only);
        assert_eq!(position_of(0, 1), Position::Only);
        assert_eq!(position_of(0, 2), Position::First);
        assert_eq!(position_of(1, 2), Position::Last);
        assert_eq!(position_of(1, 3), Position::Middle);
        assert_eq!(position_of(2, 3), Position::Last);
        assert_eq!(position_of(u32::MAX, u32::MAX), Position::Last);
        assert!(Position::Only.is_start() && Position::Only.is_end());
        assert!(!Position::Middle.is_start() && !Position::Middle.is_end());
    }
}
