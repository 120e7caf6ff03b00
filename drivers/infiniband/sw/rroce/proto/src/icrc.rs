// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! The RoCEv2 invariant CRC (ICRC, IBTA Annex A17).
//!
//! # Algorithm
//!
//! The ICRC is CRC-32/IEEE (reflected polynomial 0xEDB88320, the zlib /
//! Ethernet CRC; **not** CRC-32C) over:
//!
//! 1. 8 bytes of 0xFF standing in for the (absent) LRH;
//! 2. the IP header with the variant fields set to all ones — IPv4: TOS
//!    (DSCP+ECN), TTL and header checksum; IPv6: traffic class, flow label and
//!    hop limit;
//! 3. the UDP header with the checksum set to 0xFFFF (ports and length are
//!    covered);
//! 4. the BTH with byte 4 (FECN, BECN, Resv6a) set to 0xFF;
//! 5. the extension headers, payload and pad, up to but not including the
//!    4 ICRC bytes.
//!
//! The register starts at 0xFFFFFFFF and the result is inverted, as in zlib's
//! `crc32()`.  The ICRC value `v` is stored on the wire **little-endian**:
//! the four bytes are `v.to_le_bytes()` (Python: `struct.pack('<I',
//! zlib.crc32(b'\xff' * 8 + masked))`).  The tests check this against a
//! packet captured from a ConnectX-4 Lx and against Scapy.
//!
//! # Plugging in a CRC implementation
//!
//! [`Crc32::update`] has exactly the semantics of the kernel's
//! `crc32_le(crc, p, len)`: it advances a raw, reflected CRC register over
//! `data` with **no** pre- or post-inversion.  The inversions are done here:
//! the register starts at [`ICRC_SEED`] = 0xDEBB20E3, which is
//! `crc32_le(0xFFFFFFFF, [0xFF; 8])` (the 8-byte pseudo-LRH already folded
//! in, the same constant rxe uses), and [`Icrc::finish`] returns `!register`.
//! In the kernel:
//!
//! ```ignore
//! let crc = |c: u32, d: &[u8]| unsafe { bindings::crc32_le(c, d.as_ptr(), d.len()) };
//! ```
//!
//! Any `FnMut(u32, &[u8]) -> u32` is a [`Crc32`].  [`SoftCrc32`] is a portable
//! table-driven implementation for host tests and as a fallback.

use super::opcode::{BTH_LEN, ICRC_LEN};
use super::split::Pieces;

/// Length of the masked pseudo-LRH that starts the CRC.
pub const PSEUDO_LRH_LEN: usize = 8;

/// CRC register after `0xFFFFFFFF` has absorbed the 8-byte 0xFF pseudo-LRH.
pub const ICRC_SEED: u32 = 0xDEBB_20E3;

/// Length of a UDP header.
pub const UDP_HDR_LEN: usize = 8;
/// Length of an IPv4 header without options.
pub const IPV4_HDR_LEN: usize = 20;
/// Length of the fixed IPv6 header.
pub const IPV6_HDR_LEN: usize = 40;
/// IP protocol / next header number of UDP.
pub const IPPROTO_UDP: u8 = 17;

/// A CRC-32/IEEE register update with the kernel `crc32_le` convention: no
/// inversion on entry or exit.
pub trait Crc32 {
    /// Advance the reflected CRC register `crc` over `data`.
    fn update(&mut self, crc: u32, data: &[u8]) -> u32;
}

impl<F: FnMut(u32, &[u8]) -> u32> Crc32 for F {
    #[inline]
    fn update(&mut self, crc: u32, data: &[u8]) -> u32 {
        self(crc, data)
    }
}

const fn make_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

static CRC_TABLE: [u32; 256] = make_table();

/// Portable `crc32_le`: reflected polynomial 0xEDB88320, no inversion.
pub fn soft_crc32_le(mut crc: u32, data: &[u8]) -> u32 {
    for &b in data {
        // The index is a u8, always < 256.
        let t = CRC_TABLE
            .get(usize::from((crc as u8) ^ b))
            .copied()
            .unwrap_or(0);
        crc = t ^ (crc >> 8);
    }
    crc
}

/// Table-driven software [`Crc32`].
#[derive(Clone, Copy, Debug, Default)]
pub struct SoftCrc32;

impl Crc32 for SoftCrc32 {
    #[inline]
    fn update(&mut self, crc: u32, data: &[u8]) -> u32 {
        soft_crc32_le(crc, data)
    }
}

/// Why an ICRC could not be computed or did not match.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IcrcError {
    /// A header or the packet is shorter than required.
    TooShort,
    /// The IP version nibble is neither 4 nor 6.
    BadIpVersion,
    /// IPv4 IHL below 5.
    BadIpHeader,
    /// The IP protocol / next header is not UDP.
    NotUdp,
    /// The UDP length is below UDP + BTH + ICRC or beyond the packet.
    BadUdpLength,
    /// The computed ICRC differs from the one in the packet.
    Mismatch,
}

/// Incremental ICRC computation.
///
/// Feed, in order, the IP header ([`Icrc::ipv4_header`] or
/// [`Icrc::ipv6_header`], or [`Icrc::ip_header`]), the UDP header, the BTH,
/// then everything after the BTH up to the ICRC with [`Icrc::update`] (in as
/// many pieces as convenient), and call [`Icrc::finish`].
#[derive(Clone, Copy, Debug)]
pub struct Icrc<C: Crc32> {
    crc: C,
    reg: u32,
}

impl<C: Crc32> Icrc<C> {
    /// Start a computation (the pseudo-LRH is already absorbed).
    pub fn new(crc: C) -> Self {
        Icrc {
            crc,
            reg: ICRC_SEED,
        }
    }

    /// Feed bytes that are covered unmasked.
    #[inline]
    pub fn update(&mut self, data: &[u8]) {
        self.reg = self.crc.update(self.reg, data);
    }

    /// Feed an IPv4 header of `IHL * 4` bytes (options included); `hdr` may
    /// be longer, the excess is not fed.  Returns the header length.
    pub fn ipv4_header(&mut self, hdr: &[u8]) -> Result<usize, IcrcError> {
        match hdr.first().map(|b| b >> 4) {
            Some(4) => self.ip_header(hdr),
            Some(_) => Err(IcrcError::BadIpVersion),
            None => Err(IcrcError::TooShort),
        }
    }

    /// Feed the 40-byte fixed IPv6 header; `hdr` may be longer, the excess
    /// is not fed.  Returns 40.
    pub fn ipv6_header(&mut self, hdr: &[u8]) -> Result<usize, IcrcError> {
        match hdr.first().map(|b| b >> 4) {
            Some(6) => self.ip_header(hdr),
            Some(_) => Err(IcrcError::BadIpVersion),
            None => Err(IcrcError::TooShort),
        }
    }

    /// Feed an IPv4 or IPv6 header, chosen by the version nibble.  Returns
    /// the header length.
    pub fn ip_header(&mut self, hdr: &[u8]) -> Result<usize, IcrcError> {
        let mut buf = [0u8; MASKED_MAX];
        let ip = mask_ip(hdr, &mut buf)?;
        self.update(buf.get(..ip.fixed).unwrap_or_default());
        self.update(ip.options);
        Ok(ip.len)
    }

    /// Feed the 8-byte UDP header (checksum masked).
    pub fn udp_header(&mut self, hdr: &[u8]) -> Result<(), IcrcError> {
        let h = hdr
            .first_chunk::<UDP_HDR_LEN>()
            .ok_or(IcrcError::TooShort)?;
        self.update(&mask_udp(h));
        Ok(())
    }

    /// Feed the 12-byte BTH (byte 4 masked).
    pub fn bth(&mut self, hdr: &[u8]) -> Result<(), IcrcError> {
        let h = hdr.first_chunk::<BTH_LEN>().ok_or(IcrcError::TooShort)?;
        self.update(&mask_bth(h));
        Ok(())
    }

    /// The ICRC value; the wire bytes are `finish().to_le_bytes()`.
    pub fn finish(&self) -> u32 {
        !self.reg
    }
}

/// ICRC over separately located headers: `ip_hdr` starts at the IPv4/IPv6
/// header, `udp_hdr` at the UDP header, and `roce` is the whole UDP payload
/// (BTH through the 4-byte ICRC trailer, which is not covered).
pub fn icrc_parts<C: Crc32>(
    crc: C,
    ip_hdr: &[u8],
    udp_hdr: &[u8],
    roce: &[u8],
) -> Result<u32, IcrcError> {
    let end = roce
        .len()
        .checked_sub(ICRC_LEN)
        .filter(|&e| e >= BTH_LEN)
        .ok_or(IcrcError::TooShort)?;
    let mut s = Icrc::new(crc);
    s.headers(ip_hdr, udp_hdr, roce)?;
    s.update(roce.get(BTH_LEN..end).ok_or(IcrcError::TooShort)?);
    Ok(s.finish())
}

/// The most header bytes [`Icrc::headers`] feeds at once: a fixed IPv6
/// header, UDP and BTH.
const MASKED_MAX: usize = IPV6_HDR_LEN + UDP_HDR_LEN + BTH_LEN;

/// An IP header as [`mask_ip`] found it.
struct MaskedIp<'a> {
    /// The header length, IPv4 options included.
    len: usize,
    /// The length of the fixed header, masked at the start of the buffer.
    fixed: usize,
    /// IPv4 options (covered unmasked), else empty.
    options: &'a [u8],
}

/// Copies the fixed IPv4 or IPv6 header at the start of `hdr` (chosen by
/// its version nibble) to the start of `out` with the variant fields all
/// ones — IPv4: TOS, TTL and header checksum; IPv6: traffic class, flow
/// label and hop limit.
fn mask_ip<'a>(hdr: &'a [u8], out: &mut [u8; MASKED_MAX]) -> Result<MaskedIp<'a>, IcrcError> {
    match hdr.first().map(|b| b >> 4) {
        Some(4) => {
            let h = hdr
                .first_chunk::<IPV4_HDR_LEN>()
                .ok_or(IcrcError::TooShort)?;
            let len = usize::from(h[0] & 0x0F).wrapping_mul(4);
            if len < IPV4_HDR_LEN {
                return Err(IcrcError::BadIpHeader);
            }
            let options = hdr.get(IPV4_HDR_LEN..len).ok_or(IcrcError::TooShort)?;
            let m = out
                .first_chunk_mut::<IPV4_HDR_LEN>()
                .ok_or(IcrcError::TooShort)?;
            *m = *h;
            m[1] = 0xFF;
            m[8] = 0xFF;
            m[10] = 0xFF;
            m[11] = 0xFF;
            Ok(MaskedIp {
                len,
                fixed: IPV4_HDR_LEN,
                options,
            })
        }
        Some(6) => {
            let h = hdr
                .first_chunk::<IPV6_HDR_LEN>()
                .ok_or(IcrcError::TooShort)?;
            let m = out
                .first_chunk_mut::<IPV6_HDR_LEN>()
                .ok_or(IcrcError::TooShort)?;
            *m = *h;
            // The version nibble stays.
            m[0] |= 0x0F;
            m[1] = 0xFF;
            m[2] = 0xFF;
            m[3] = 0xFF;
            m[7] = 0xFF;
            Ok(MaskedIp {
                len: IPV6_HDR_LEN,
                fixed: IPV6_HDR_LEN,
                options: &[],
            })
        }
        Some(_) => Err(IcrcError::BadIpVersion),
        None => Err(IcrcError::TooShort),
    }
}

/// A UDP header with its checksum all ones.
fn mask_udp(h: &[u8; UDP_HDR_LEN]) -> [u8; UDP_HDR_LEN] {
    let mut m = *h;
    m[6] = 0xFF;
    m[7] = 0xFF;
    m
}

/// A BTH with byte 4 (FECN, BECN, Resv6a) all ones.
fn mask_bth(h: &[u8; BTH_LEN]) -> [u8; BTH_LEN] {
    let mut m = *h;
    m[4] = 0xFF;
    m
}

impl<C: Crc32> Icrc<C> {
    /// Feed the IP header, the UDP header and the BTH at the start of
    /// `roce`, as [`Icrc::ip_header`], [`Icrc::udp_header`] and
    /// [`Icrc::bth`] in turn would, but masked into one buffer and fed in
    /// one update (three around IPv4 options): a `crc32_le` call has a
    /// fixed cost and goes byte by byte over a short or unaligned piece.
    /// Returns the IP header length.
    pub fn headers(
        &mut self,
        ip_hdr: &[u8],
        udp_hdr: &[u8],
        roce: &[u8],
    ) -> Result<usize, IcrcError> {
        let mut buf = [0u8; MASKED_MAX];
        let ip = mask_ip(ip_hdr, &mut buf)?;
        // IPv4 options sit between the fixed header and UDP: then the
        // fixed header and they go first, and UDP and BTH start the buffer
        // over.
        let at = if ip.options.is_empty() {
            ip.fixed
        } else {
            self.update(buf.get(..ip.fixed).unwrap_or_default());
            self.update(ip.options);
            0
        };
        let udp = udp_hdr
            .first_chunk::<UDP_HDR_LEN>()
            .ok_or(IcrcError::TooShort)?;
        let bth = roce.first_chunk::<BTH_LEN>().ok_or(IcrcError::TooShort)?;
        let rest = buf.get_mut(at..).ok_or(IcrcError::TooShort)?;
        let (u, rest) = rest
            .split_first_chunk_mut::<UDP_HDR_LEN>()
            .ok_or(IcrcError::TooShort)?;
        *u = mask_udp(udp);
        let b = rest
            .first_chunk_mut::<BTH_LEN>()
            .ok_or(IcrcError::TooShort)?;
        *b = mask_bth(bth);
        let n = at.wrapping_add(UDP_HDR_LEN + BTH_LEN);
        self.update(buf.get(..n).unwrap_or_default());
        Ok(ip.len)
    }
}

/// Where the pieces of a RoCEv2 IP datagram are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpLayout {
    /// Length of the IP header (IPv4 with options, or 40 for IPv6).
    pub ip_hdr_len: usize,
    /// Offset of the UDP payload (the BTH).
    pub roce_off: usize,
    /// End of the UDP payload (from the UDP length field); the ICRC is the
    /// 4 bytes before it.
    pub end: usize,
}

/// Locate IP header, UDP header and UDP payload in an IP datagram.
///
/// The UDP length field delimits the packet, so trailing bytes (Ethernet
/// padding) are ignored.  IPv6 extension headers are not supported (the next
/// header must be UDP).
pub fn ip_layout(pkt: &[u8]) -> Result<IpLayout, IcrcError> {
    layout(pkt, pkt.len())
}

/// How many first bytes of a RoCEv2 IP datagram its headers take (IP, UDP,
/// BTH and the extension headers of its opcode), read from `head`, the
/// bytes at hand: `Err(n)` if `head` must hold `n` bytes to tell.  For a
/// datagram the parsers refuse anyway (not IPv4 or IPv6, a short IPv4
/// header length, an unknown opcode) it is `head.len()`: nothing more is
/// needed to refuse it.
pub fn headers_len(head: &[u8]) -> Result<usize, usize> {
    let ip = match head.first().map(|b| (b >> 4, b & 0x0F)) {
        None => return Err(1),
        Some((4, ihl)) if usize::from(ihl) * 4 >= IPV4_HDR_LEN => usize::from(ihl) * 4,
        Some((6, _)) => IPV6_HDR_LEN,
        Some(_) => return Ok(head.len()),
    };
    let roce = ip + UDP_HDR_LEN;
    let Some(&opcode) = head.get(roce) else {
        return Err(roce + BTH_LEN);
    };
    let Some(info) = super::opcode::lookup(opcode) else {
        return Ok(head.len());
    };
    Ok(roce + info.hdr_len())
}

/// [`ip_layout`] of a datagram in one piece or two (see [`Pieces`]), its
/// IP and UDP headers in the first.
#[inline]
pub fn ip_layout_of<'a>(pkt: impl Pieces<'a>) -> Result<IpLayout, IcrcError> {
    layout(pkt.first(), pkt.total())
}

/// [`ip_layout`] of a datagram of `total` bytes whose first bytes are `pkt`
/// (at least the IP and UDP headers).
fn layout(pkt: &[u8], total: usize) -> Result<IpLayout, IcrcError> {
    let (ip_hdr_len, proto) = match pkt.first().map(|b| b >> 4) {
        Some(4) => {
            let v_ihl = pkt.first().copied().unwrap_or(0);
            let ihl = usize::from(v_ihl & 0x0F).wrapping_mul(4);
            if ihl < IPV4_HDR_LEN {
                return Err(IcrcError::BadIpHeader);
            }
            (ihl, pkt.get(9).copied())
        }
        Some(6) => (IPV6_HDR_LEN, pkt.get(6).copied()),
        Some(_) => return Err(IcrcError::BadIpVersion),
        None => return Err(IcrcError::TooShort),
    };
    let udp_off = ip_hdr_len;
    let udp = pkt
        .get(udp_off..)
        .and_then(|s| s.first_chunk::<UDP_HDR_LEN>())
        .ok_or(IcrcError::TooShort)?;
    if proto != Some(IPPROTO_UDP) {
        return Err(IcrcError::NotUdp);
    }
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    if udp_len < UDP_HDR_LEN + BTH_LEN + ICRC_LEN {
        return Err(IcrcError::BadUdpLength);
    }
    let end = udp_off
        .checked_add(udp_len)
        .filter(|&e| e <= total)
        .ok_or(IcrcError::BadUdpLength)?;
    Ok(IpLayout {
        ip_hdr_len,
        roce_off: udp_off.wrapping_add(UDP_HDR_LEN),
        end,
    })
}

/// ICRC of an IP datagram (IPv4 or IPv6 header, UDP, BTH, …, ICRC trailer).
pub fn icrc_ip<C: Crc32>(crc: C, pkt: &[u8]) -> Result<u32, IcrcError> {
    icrc_at(crc, pkt, &ip_layout(pkt)?)
}

/// [`icrc_ip`] of a datagram whose layout `l` ([`ip_layout`]) is known.
pub fn icrc_at<C: Crc32>(crc: C, pkt: &[u8], l: &IpLayout) -> Result<u32, IcrcError> {
    let ip = pkt.get(..l.ip_hdr_len).ok_or(IcrcError::TooShort)?;
    let udp = pkt
        .get(l.ip_hdr_len..l.roce_off)
        .ok_or(IcrcError::TooShort)?;
    let roce = pkt.get(l.roce_off..l.end).ok_or(IcrcError::TooShort)?;
    icrc_parts(crc, ip, udp, roce)
}

/// The ICRC stored in the last 4 bytes of `roce` (a UDP payload), read
/// little-endian.
pub fn stored_icrc(roce: &[u8]) -> Option<u32> {
    let start = roce.len().checked_sub(ICRC_LEN)?;
    roce.get(start..)
        .and_then(|s| s.first_chunk::<ICRC_LEN>())
        .map(|a| u32::from_le_bytes(*a))
}

/// Check the ICRC of an IP datagram.
pub fn verify_ip<C: Crc32>(crc: C, pkt: &[u8]) -> Result<(), IcrcError> {
    verify_at(crc, pkt, &ip_layout(pkt)?)
}

/// [`verify_ip`] of a datagram whose layout `l` ([`ip_layout`]) is known.
pub fn verify_at<C: Crc32>(crc: C, pkt: &[u8], l: &IpLayout) -> Result<(), IcrcError> {
    let want = icrc_at(crc, pkt, l)?;
    let roce = pkt.get(l.roce_off..l.end).ok_or(IcrcError::TooShort)?;
    if stored_icrc(roce) == Some(want) {
        Ok(())
    } else {
        Err(IcrcError::Mismatch)
    }
}

/// [`icrc_at`] of a datagram in one piece or two (see [`Pieces`]): the IP,
/// UDP and BTH headers in the first, the rest anywhere.
#[inline]
pub fn icrc_of<'a, C: Crc32>(crc: C, pkt: impl Pieces<'a>, l: &IpLayout) -> Result<u32, IcrcError> {
    let head = pkt.first();
    let ip = head.get(..l.ip_hdr_len).ok_or(IcrcError::TooShort)?;
    let udp = head
        .get(l.ip_hdr_len..l.roce_off)
        .ok_or(IcrcError::TooShort)?;
    let bth = head.get(l.roce_off..).ok_or(IcrcError::TooShort)?;
    let covered = l.roce_off.checked_add(BTH_LEN).ok_or(IcrcError::TooShort)?;
    let end = l
        .end
        .checked_sub(ICRC_LEN)
        .filter(|&e| e >= covered)
        .ok_or(IcrcError::TooShort)?;
    let (a, b) = pkt.span(covered, end).ok_or(IcrcError::TooShort)?;
    let mut s = Icrc::new(crc);
    s.headers(ip, udp, bth)?;
    s.update(a);
    if !b.is_empty() {
        s.update(b);
    }
    Ok(s.finish())
}

/// [`verify_at`] of a datagram in one piece or two (see [`icrc_of`]).
#[inline]
pub fn verify_of<'a, C: Crc32>(
    crc: C,
    pkt: impl Pieces<'a>,
    l: &IpLayout,
) -> Result<(), IcrcError> {
    let want = icrc_of(crc, pkt, l)?;
    let at = l.end.checked_sub(ICRC_LEN).ok_or(IcrcError::TooShort)?;
    let stored = pkt.four(at).ok_or(IcrcError::TooShort)?;
    if u32::from_le_bytes(stored) == want {
        Ok(())
    } else {
        Err(IcrcError::Mismatch)
    }
}

/// Check the ICRC of separately located headers (see [`icrc_parts`]).
pub fn verify_parts<C: Crc32>(
    crc: C,
    ip_hdr: &[u8],
    udp_hdr: &[u8],
    roce: &[u8],
) -> Result<(), IcrcError> {
    let want = icrc_parts(crc, ip_hdr, udp_hdr, roce)?;
    if stored_icrc(roce) == Some(want) {
        Ok(())
    } else {
        Err(IcrcError::Mismatch)
    }
}

/// Compute the ICRC of an IP datagram and store it (little-endian) in its
/// last 4 UDP payload bytes.  Returns the value.
pub fn write_icrc_ip<C: Crc32>(crc: C, pkt: &mut [u8]) -> Result<u32, IcrcError> {
    let l = ip_layout(pkt)?;
    let v = icrc_at(crc, pkt, &l)?;
    let off = l.end.checked_sub(ICRC_LEN).ok_or(IcrcError::TooShort)?;
    let dst = pkt
        .get_mut(off..)
        .and_then(|s| s.first_chunk_mut::<ICRC_LEN>())
        .ok_or(IcrcError::TooShort)?;
    *dst = v.to_le_bytes();
    Ok(v)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::super::split::Split;
    use super::*;
    use std::vec::Vec;

    fn hex(s: &str) -> Vec<u8> {
        let s: Vec<u8> = s.bytes().filter(|c| c.is_ascii_hexdigit()).collect();
        s.chunks(2)
            .map(|p| u8::from_str_radix(core::str::from_utf8(p).unwrap(), 16).unwrap())
            .collect()
    }

    /// KAT 1 (shared/vectors/icrc_kat.py): a CNP captured from a
    /// ConnectX-4 Lx, Ethernet frame; on-wire ICRC 82 fd 00 2a.
    const KAT_CNP_FRAME: &str = "e41d 2dab 2bc2 7cfe 9064 3b32 0800 45c2
        003c 718c 4000 4011 9161 0a00 1101 0a00
        1201 0000 12b7 0028 0000 8100 ffff 4000
        0118 0000 0000 0000 0000 0000 0000 0000
        0000 0000 0000 82fd 002a";

    /// KAT 2 (shared/vectors/icrc_kat.py, from Scapy's roce.uts): UC
    /// SEND_ONLY, IPv4 tos=1 id=1144 DF ttl=64 192.168.0.7 -> 192.168.0.7,
    /// UDP 49152 -> 4791 len 44 csum 0xaca2, BTH 0x24/0x60/ffff/211/13571856,
    /// 20-byte payload; on-wire ICRC 78 f3 53 f3.
    fn kat_uc_send_only() -> Vec<u8> {
        let mut p = Vec::new();
        // IPv4 header.
        p.extend_from_slice(&[
            0x45, 0x01, 0, 64, 0x04, 0x78, 0x40, 0x00, 64, 17, 0xb4, 0xd5,
        ]);
        p.extend_from_slice(&[192, 168, 0, 7, 192, 168, 0, 7]);
        // UDP header.
        p.extend_from_slice(&[0xc0, 0x00, 0x12, 0xb7, 0, 44, 0xac, 0xa2]);
        // BTH: opcode 0x24, flags 0x60, pkey ffff, dqpn 211, psn 13571856.
        p.extend_from_slice(&[0x24, 0x60, 0xff, 0xff, 0, 0, 0, 211]);
        p.extend_from_slice(&13_571_856u32.to_be_bytes());
        p.extend_from_slice(b"F0\x81\x8b\xe2\x895\xd9\x0e\x9a\x95PT\x01\xbe\x88^P\x00\x00");
        p.extend_from_slice(&[0x78, 0xf3, 0x53, 0xf3]);
        p
    }

    /// Generated with Scapy 2.8.0 `contrib.roce` (an independent
    /// implementation that also covers IPv6) by proto/vectors/gen_icrc.py.
    const SCAPY_VECTORS: &[(&str, &str)] = &[
        (
            "v6_write_only",
            "6b81234500381125fe80000000000000000000000000000120010db8000000000000000000000042\
             c12312b70038beef0a70ffff80000abc80fffffe00007f00123456780badcafe0000000d0102030405\
             060708090a0b0c0d000000c1a89c14",
        ),
        (
            "v6_ack",
            "602fffff001c110120010db800000000000000000000000120010db800000000000000000000000\
             2d00012b7001c00001100ffff40000012003456781f000007cb8704ad",
        ),
        (
            "v4_opts_send_only",
            "466a00340007400009115a450a0000010a00000201010100c00112b7001c1111040080010000001180\
             000005616263644e8cfbaf",
        ),
    ];

    /// Bit-at-a-time reference CRC (no table) to cross-check the table.
    fn bitwise_crc32_le(mut crc: u32, data: &[u8]) -> u32 {
        for &b in data {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        crc
    }

    #[test]
    fn crc32_check_values() {
        // The standard CRC-32 check value, with zlib's inversions.
        assert_eq!(!soft_crc32_le(!0, b"123456789"), 0xCBF4_3926);
        assert_eq!(!soft_crc32_le(!0, b""), 0);
        assert_eq!(
            !soft_crc32_le(!0, b"The quick brown fox jumps over the lazy dog"),
            0x414F_A339
        );
        // The seed is the register after the pseudo-LRH.
        assert_eq!(soft_crc32_le(!0, &[0xFF; 8]), ICRC_SEED);
        assert_eq!(bitwise_crc32_le(!0, &[0xFF; 8]), ICRC_SEED);
        // The table agrees with the bitwise definition, also for raw seeds.
        let data: Vec<u8> = (0..1000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for seed in [0, 1, !0, ICRC_SEED, 0x1234_5678] {
            for n in [0, 1, 7, 64, 999, 1000] {
                assert_eq!(
                    soft_crc32_le(seed, &data[..n]),
                    bitwise_crc32_le(seed, &data[..n])
                );
            }
        }
        // Splitting the input anywhere gives the same register (what the
        // incremental API and the kernel's crc32_le rely on).
        let whole = soft_crc32_le(ICRC_SEED, &data);
        for cut in [0, 1, 3, 500, 999, 1000] {
            let a = soft_crc32_le(ICRC_SEED, &data[..cut]);
            assert_eq!(soft_crc32_le(a, &data[cut..]), whole);
        }
    }

    #[test]
    fn kat_cnp_capture() {
        let frame = hex(KAT_CNP_FRAME);
        let ip = &frame[14..];
        assert_eq!(&ip[ip.len() - 4..], &[0x82, 0xfd, 0x00, 0x2a]);
        let v = icrc_ip(SoftCrc32, ip).unwrap();
        // Little-endian on the wire.
        assert_eq!(v.to_le_bytes(), [0x82, 0xfd, 0x00, 0x2a]);
        assert_eq!(v, 0x2a00_fd82);
        assert_ne!(v.to_be_bytes(), [0x82, 0xfd, 0x00, 0x2a]);
        assert_eq!(verify_ip(SoftCrc32, ip), Ok(()));
        // Through parse_packet's little-endian read, too.
        let roce = &ip[28..];
        let p = super::super::hdr::parse_packet(roce).unwrap();
        assert_eq!(p.icrc, v);
        assert_eq!(
            verify_parts(SoftCrc32, &ip[..20], &ip[20..28], roce),
            Ok(())
        );
    }

    #[test]
    fn kat_uc_send_only_scapy() {
        let p = kat_uc_send_only();
        let v = icrc_ip(SoftCrc32, &p).unwrap();
        assert_eq!(v.to_le_bytes(), [0x78, 0xf3, 0x53, 0xf3]);
        assert_eq!(verify_ip(SoftCrc32, &p), Ok(()));
        // Writing reproduces the packet.
        let mut q = p.clone();
        let n = q.len();
        q[n - 4..].fill(0);
        assert_eq!(write_icrc_ip(SoftCrc32, &mut q), Ok(v));
        assert_eq!(q, p);
    }

    #[test]
    fn scapy_vectors_incl_ipv6() {
        for (name, h) in SCAPY_VECTORS {
            let p = hex(h);
            assert_eq!(verify_ip(SoftCrc32, &p), Ok(()), "{name}");
            let mut q = p.clone();
            let n = q.len();
            q[n - 4..].copy_from_slice(&[0; 4]);
            assert_eq!(verify_ip(SoftCrc32, &q), Err(IcrcError::Mismatch), "{name}");
            write_icrc_ip(SoftCrc32, &mut q).unwrap();
            assert_eq!(q, p, "{name}");
        }
    }

    /// The known answers in two pieces, split anywhere from the headers'
    /// end on (as the receive path reads a socket buffer with its payload
    /// in a page fragment): same layout and verdict, and a wrong ICRC byte
    /// in either piece is found.
    #[test]
    fn vectors_split_after_the_headers() {
        let mut all: Vec<(&str, Vec<u8>)> =
            SCAPY_VECTORS.iter().map(|(n, h)| (*n, hex(h))).collect();
        all.push(("cnp", hex(KAT_CNP_FRAME)[14..].to_vec()));
        all.push(("uc send only", kat_uc_send_only()));
        for (name, p) in all {
            let l = ip_layout(&p).unwrap();
            let hl = headers_len(&p).unwrap();
            let roce = super::super::hdr::parse_packet(&p[l.roce_off..l.end]).unwrap();
            assert_eq!(hl, l.roce_off + roce.payload_off, "{name}");
            // Short heads ask for what they lack.
            assert_eq!(headers_len(&[]), Err(1));
            assert_eq!(
                headers_len(&p[..l.roce_off]),
                Err(l.roce_off + BTH_LEN),
                "{name}"
            );
            for at in hl..=p.len() {
                let s = Split {
                    head: &p[..at],
                    tail: &p[at..],
                };
                assert_eq!(ip_layout_of(s), Ok(l), "{name} {at}");
                assert_eq!(verify_of(SoftCrc32, s, &l), Ok(()), "{name} {at}");
                for bad in [hl, p.len() - 4, p.len() - 1] {
                    let mut q = p.clone();
                    q[bad] ^= 0x10;
                    let s = Split {
                        head: &q[..at],
                        tail: &q[at..],
                    };
                    assert_eq!(
                        verify_of(SoftCrc32, s, &l),
                        Err(IcrcError::Mismatch),
                        "{name} {at} {bad}"
                    );
                }
            }
            // The headers must be in the head.
            let s = Split {
                head: &p[..l.roce_off + 4],
                tail: &p[l.roce_off + 4..],
            };
            assert_eq!(
                verify_of(SoftCrc32, s, &l),
                Err(IcrcError::TooShort),
                "{name}"
            );
        }
        // Not a RoCEv2 datagram: nothing more to read to refuse it.
        assert_eq!(headers_len(&[0x45; 3][..1]), Err(28 + BTH_LEN));
        assert_eq!(headers_len(&[0x55; 30]), Ok(30));
        assert_eq!(headers_len(&[0x41; 30]), Ok(30));
        let mut unknown = [0u8; 40];
        unknown[0] = 0x45;
        unknown[28] = 0xFF;
        assert_eq!(headers_len(&unknown), Ok(40));
    }

    /// Python/zlib-style reference built directly from the definition.
    fn reference_icrc(pkt: &[u8]) -> u32 {
        let mut m = pkt.to_vec();
        let (ihl, v6) = if m[0] >> 4 == 4 {
            (usize::from(m[0] & 15) * 4, false)
        } else {
            (40, true)
        };
        if v6 {
            m[0] |= 0x0F;
            m[1] = 0xFF;
            m[2] = 0xFF;
            m[3] = 0xFF;
            m[7] = 0xFF;
        } else {
            m[1] = 0xFF;
            m[8] = 0xFF;
            m[10] = 0xFF;
            m[11] = 0xFF;
        }
        m[ihl + 6] = 0xFF;
        m[ihl + 7] = 0xFF;
        m[ihl + 8 + 4] = 0xFF;
        let mut all = std::vec![0xFFu8; 8];
        all.extend_from_slice(&m[..m.len() - 4]);
        !bitwise_crc32_le(!0, &all)
    }

    #[test]
    fn masked_fields_do_not_matter_covered_fields_do() {
        let mut vecs: Vec<Vec<u8>> = SCAPY_VECTORS.iter().map(|(_, h)| hex(h)).collect();
        vecs.push(kat_uc_send_only());
        vecs.push(hex(KAT_CNP_FRAME)[14..].to_vec());
        for p in vecs {
            let base = icrc_ip(SoftCrc32, &p).unwrap();
            assert_eq!(base, reference_icrc(&p));
            let v6 = p[0] >> 4 == 6;
            let ihl = if v6 { 40 } else { usize::from(p[0] & 15) * 4 };
            let mut masked: Vec<(usize, u8)> = if v6 {
                std::vec![(0, 0x0F), (1, 0xFF), (2, 0xFF), (3, 0xFF), (7, 0xFF)]
            } else {
                std::vec![(1, 0xFF), (8, 0xFF), (10, 0xFF), (11, 0xFF)]
            };
            masked.extend([(ihl + 6, 0xFF), (ihl + 7, 0xFF), (ihl + 12, 0xFF)]);
            let end = p.len() - 4;
            for i in 0..end {
                for bit in 0..8 {
                    let mut q = p.clone();
                    q[i] ^= 1 << bit;
                    let is_masked = masked.iter().any(|&(o, m)| o == i && m & (1 << bit) != 0);
                    // Flipping the version changes the parse, skip.
                    if i == 0 && bit >= 4 {
                        continue;
                    }
                    // Changing lengths/protocol changes the layout; just no panic.
                    let Ok(v) = icrc_ip(SoftCrc32, &q) else {
                        continue;
                    };
                    if is_masked {
                        assert_eq!(v, base, "masked byte {i} bit {bit} changed the ICRC");
                    } else {
                        assert_ne!(
                            v, base,
                            "covered byte {i} bit {bit} did not change the ICRC"
                        );
                    }
                    // The ICRC bytes themselves are not covered.
                    let mut r = p.clone();
                    r[end + (i % 4)] ^= 1 << bit;
                    assert_eq!(icrc_ip(SoftCrc32, &r), Ok(base));
                }
            }
        }
    }

    #[test]
    fn closure_and_incremental_agree() {
        let p = kat_uc_send_only();
        let mut calls = 0u32;
        let counting = |c: u32, d: &[u8]| {
            calls += 1;
            bitwise_crc32_le(c, d)
        };
        let v = icrc_ip(counting, &p).unwrap();
        // The masked headers in one call, the rest in another.
        assert_eq!(calls, 2);
        assert_eq!(v.to_le_bytes(), [0x78, 0xf3, 0x53, 0xf3]);
        // Incremental, payload fed in odd-sized pieces.
        let mut s = Icrc::new(SoftCrc32);
        assert_eq!(s.ip_header(&p[..20]), Ok(20));
        s.udp_header(&p[20..28]).unwrap();
        s.bth(&p[28..40]).unwrap();
        let body = &p[40..p.len() - 4];
        for chunk in body.chunks(3) {
            s.update(chunk);
        }
        assert_eq!(s.finish(), v);
        // A function item works as well.
        assert_eq!(icrc_ip(soft_crc32_le, &p), Ok(v));
    }

    #[test]
    fn trailing_bytes_ignored() {
        // Ethernet padding after the IP datagram does not change anything.
        let mut p = kat_uc_send_only();
        let v = icrc_ip(SoftCrc32, &p).unwrap();
        p.extend_from_slice(&[0xAA; 6]);
        assert_eq!(icrc_ip(SoftCrc32, &p), Ok(v));
        assert_eq!(verify_ip(SoftCrc32, &p), Ok(()));
    }

    #[test]
    fn errors() {
        let p = kat_uc_send_only();
        assert_eq!(icrc_ip(SoftCrc32, &[]), Err(IcrcError::TooShort));
        assert_eq!(
            icrc_ip(SoftCrc32, &[0x55; 64]),
            Err(IcrcError::BadIpVersion)
        );
        let mut q = p.clone();
        q[0] = 0x44; // IHL 4
        assert_eq!(icrc_ip(SoftCrc32, &q), Err(IcrcError::BadIpHeader));
        let mut q = p.clone();
        q[9] = 6; // TCP
        assert_eq!(icrc_ip(SoftCrc32, &q), Err(IcrcError::NotUdp));
        let mut q = p.clone();
        q[24..26].copy_from_slice(&23u16.to_be_bytes());
        assert_eq!(icrc_ip(SoftCrc32, &q), Err(IcrcError::BadUdpLength));
        let mut q = p.clone();
        q[24..26].copy_from_slice(&45u16.to_be_bytes());
        assert_eq!(icrc_ip(SoftCrc32, &q), Err(IcrcError::BadUdpLength));
        assert_eq!(icrc_ip(SoftCrc32, &p[..30]), Err(IcrcError::BadUdpLength));
        assert_eq!(icrc_ip(SoftCrc32, &p[..27]), Err(IcrcError::TooShort));
        let mut q = p.clone();
        q[0] = 0x4F; // IHL 15 = 60 bytes, beyond what is there for the UDP header
        assert!(icrc_ip(SoftCrc32, &q).is_err());
        assert_eq!(
            icrc_parts(SoftCrc32, &p[..20], &p[20..28], &p[28..43]),
            Err(IcrcError::TooShort)
        );
        assert_eq!(
            icrc_parts(SoftCrc32, &p[..19], &p[20..28], &p[28..]),
            Err(IcrcError::TooShort)
        );
        assert_eq!(
            icrc_parts(SoftCrc32, &p[..20], &p[20..27], &p[28..]),
            Err(IcrcError::TooShort)
        );
        assert_eq!(stored_icrc(&[1, 2, 3]), None);
        let mut s = Icrc::new(SoftCrc32);
        assert_eq!(s.ipv6_header(&p), Err(IcrcError::BadIpVersion));
        assert_eq!(s.ipv4_header(&[0x60; 40]), Err(IcrcError::BadIpVersion));
        assert_eq!(s.bth(&[0; 11]), Err(IcrcError::TooShort));
        assert_eq!(s.udp_header(&[0; 7]), Err(IcrcError::TooShort));
        assert_eq!(s.ip_header(&[]), Err(IcrcError::TooShort));
        let mut short = p.clone();
        assert_eq!(
            write_icrc_ip(SoftCrc32, &mut short[..20]),
            Err(IcrcError::TooShort)
        );
    }

    /// The piecewise feed ([`Icrc::ip_header`], [`Icrc::udp_header`],
    /// [`Icrc::bth`]) and [`Icrc::headers`] (one buffer) agree, for IPv4
    /// with and without options (which `headers` places apart) and IPv6,
    /// whatever the masked bytes hold; and count the `crc32_le` calls.
    /// (Both mask through the same functions; the known answers and the
    /// bit-flip test check the masks themselves.)
    #[test]
    fn headers_in_one_update_as_piecewise() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        };
        for (version, ihl) in [(4u8, 5usize), (4, 6), (4, 15), (6, 10)] {
            for _ in 0..200 {
                let ip_len = if version == 4 { ihl * 4 } else { IPV6_HDR_LEN };
                let mut ip: Vec<u8> = (0..ip_len).map(|_| next()).collect();
                ip[0] = if version == 4 {
                    0x40 | ihl as u8
                } else {
                    0x60 | (ip[0] & 0x0F)
                };
                let udp: Vec<u8> = (0..UDP_HDR_LEN).map(|_| next()).collect();
                let roce: Vec<u8> = (0..BTH_LEN + 8 + ICRC_LEN).map(|_| next()).collect();
                let mut a = Icrc::new(SoftCrc32);
                assert_eq!(a.ip_header(&ip), Ok(ip_len));
                a.udp_header(&udp).unwrap();
                a.bth(&roce).unwrap();
                let mut calls = 0;
                {
                    let mut b = Icrc::new(|c: u32, d: &[u8]| {
                        calls += 1;
                        soft_crc32_le(c, d)
                    });
                    assert_eq!(b.headers(&ip, &udp, &roce), Ok(ip_len));
                    assert_eq!(a.finish(), b.finish(), "v{version} ihl {ihl}");
                }
                assert_eq!(
                    calls,
                    if ip_len > IPV4_HDR_LEN && version == 4 {
                        3
                    } else {
                        1
                    }
                );
            }
        }
        let mut s = Icrc::new(SoftCrc32);
        assert_eq!(
            s.headers(&[0x44; 20], &[0; 8], &[0; 16]),
            Err(IcrcError::BadIpHeader)
        );
        assert_eq!(
            s.headers(&[0x46; 20], &[0; 8], &[0; 16]),
            Err(IcrcError::TooShort)
        );
        assert_eq!(
            s.headers(&[0x45; 20], &[0; 7], &[0; 16]),
            Err(IcrcError::TooShort)
        );
        assert_eq!(
            s.headers(&[0x45; 20], &[0; 8], &[0; 11]),
            Err(IcrcError::TooShort)
        );
        assert_eq!(
            s.headers(&[0x60; 39], &[0; 8], &[0; 16]),
            Err(IcrcError::TooShort)
        );
        assert_eq!(
            s.headers(&[0x50; 40], &[0; 8], &[0; 16]),
            Err(IcrcError::BadIpVersion)
        );
        assert_eq!(s.headers(&[], &[0; 8], &[0; 16]), Err(IcrcError::TooShort));
    }

    #[test]
    fn fuzz_never_panics() {
        let mut x = 0x1234_5678_9abc_def0u64;
        let mut buf = [0u8; 120];
        for i in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 121) as usize;
            for (j, b) in buf.iter_mut().enumerate() {
                *b = (x >> ((j % 8) * 8)) as u8 ^ (j as u8).wrapping_mul(31);
            }
            if i % 2 == 0 {
                buf[0] = if i % 4 == 0 { 0x45 } else { 0x60 };
                buf[9] = 17;
                buf[6] = 17;
            }
            let _ = icrc_ip(SoftCrc32, &buf[..len]);
            let _ = verify_ip(SoftCrc32, &buf[..len]);
            let mut c = buf;
            let _ = write_icrc_ip(SoftCrc32, &mut c[..len]);
        }
    }
}
