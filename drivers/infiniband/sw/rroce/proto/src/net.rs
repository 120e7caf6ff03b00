// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! The IP and UDP headers of RoCEv2 packets, and the small pieces of
//! transmit/receive logic around them that do not depend on the kernel:
//! GID ↔ IP address, the per-QP UDP source port, and splitting a message
//! range over a scatter/gather list.
//!
//! The driver writes the IPv4/IPv6 and UDP headers itself (like a tunnel
//! does) so that the ICRC, which covers most of the IP header, can be
//! computed before the packet is handed to `ip_local_out`.  IPv4 packets
//! carry DF and IP ID 0, as the kernel uses for DF datagrams of unconnected
//! sockets; the UDP checksum is 0 (RoCEv2 relies on the ICRC).

use super::icrc::{IPPROTO_UDP, IPV4_HDR_LEN, IPV6_HDR_LEN, UDP_HDR_LEN};
use super::wqe::Sge;

/// The RoCEv2 UDP destination port.
pub const ROCE_V2_PORT: u16 = 4791;

/// An IP address taken from a RoCEv2 GID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpAddr {
    /// IPv4 (the GID is `::ffff:a.b.c.d`).
    V4([u8; 4]),
    /// IPv6.
    V6([u8; 16]),
}

impl IpAddr {
    /// The address a RoCEv2 GID stands for.
    pub fn from_gid(gid: &[u8; 16]) -> IpAddr {
        let (hi, lo) = gid.split_at(12);
        if hi == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] {
            let mut a = [0u8; 4];
            a.copy_from_slice(lo);
            IpAddr::V4(a)
        } else {
            IpAddr::V6(*gid)
        }
    }

    /// The GID of this address (IPv4-mapped for IPv4).
    pub fn to_gid(self) -> [u8; 16] {
        match self {
            IpAddr::V4(a) => {
                let mut g = [0u8; 16];
                g[10] = 0xff;
                g[11] = 0xff;
                g[12..].copy_from_slice(&a);
                g
            }
            IpAddr::V6(a) => a,
        }
    }

    /// The address's bytes (4 or 16), in network order.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            IpAddr::V4(a) => a,
            IpAddr::V6(a) => a,
        }
    }

    /// Length of the IP header for this family.
    pub const fn hdr_len(&self) -> usize {
        match self {
            IpAddr::V4(_) => IPV4_HDR_LEN,
            IpAddr::V6(_) => IPV6_HDR_LEN,
        }
    }
}

/// Source and destination addresses of a received IP header (IPv4, with
/// or without options, or IPv6); `None` if `ip` is too short for its
/// version or the version is neither 4 nor 6.
pub fn ip_addrs(ip: &[u8]) -> Option<(IpAddr, IpAddr)> {
    match ip.first()? >> 4 {
        4 => {
            let src = *ip.get(12..16)?.first_chunk::<4>()?;
            let dst = *ip.get(16..20)?.first_chunk::<4>()?;
            Some((IpAddr::V4(src), IpAddr::V4(dst)))
        }
        6 => {
            let src = *ip.get(8..24)?.first_chunk::<16>()?;
            let dst = *ip.get(24..40)?.first_chunk::<16>()?;
            Some((IpAddr::V6(src), IpAddr::V6(dst)))
        }
        _ => None,
    }
}

/// Fields of the IP and UDP headers of one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpUdp {
    /// Source address.
    pub src: IpAddr,
    /// Destination address (same family as `src`).
    pub dst: IpAddr,
    /// DSCP/ECN (IPv4 TOS, IPv6 traffic class).
    pub tclass: u8,
    /// TTL / hop limit.
    pub hop_limit: u8,
    /// IPv6 flow label (20 bits).
    pub flow_label: u32,
    /// UDP source port.
    pub sport: u16,
}

/// Why the IP/UDP headers could not be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetError {
    /// Source and destination of different families.
    FamilyMismatch,
    /// The datagram would exceed 65535 bytes.
    TooLong,
    /// The buffer is shorter than the headers.
    BufferTooShort,
}

/// The Internet checksum of `data` (an IPv4 header).
pub fn ip_checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for c in data.chunks(2) {
        let w = match c {
            [a, b] => u16::from_be_bytes([*a, *b]),
            [a] => u16::from_be_bytes([*a, 0]),
            _ => 0,
        };
        sum = sum.wrapping_add(u32::from(w));
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff).wrapping_add(sum >> 16);
    }
    !(sum as u16)
}

impl IpUdp {
    /// Length of the IP + UDP headers.
    pub const fn hdr_len(&self) -> usize {
        self.src.hdr_len() + UDP_HDR_LEN
    }

    /// Write the IP and UDP headers into `buf` for a UDP payload of
    /// `udp_payload` bytes (BTH through ICRC).  Returns the header length.
    pub fn write(&self, buf: &mut [u8], udp_payload: usize) -> Result<usize, NetError> {
        let hl = self.hdr_len();
        let udp_len = udp_payload
            .checked_add(UDP_HDR_LEN)
            .filter(|&l| l <= 0xffff)
            .ok_or(NetError::TooLong)?;
        let h = buf.get_mut(..hl).ok_or(NetError::BufferTooShort)?;
        let (ip, udp) = h.split_at_mut(self.src.hdr_len());
        match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let tot = udp_len
                    .checked_add(IPV4_HDR_LEN)
                    .filter(|&l| l <= 0xffff)
                    .ok_or(NetError::TooLong)? as u16;
                ip.fill(0);
                ip[0] = 0x45;
                ip[1] = self.tclass;
                ip[2..4].copy_from_slice(&tot.to_be_bytes());
                // ID 0, DF.
                ip[6] = 0x40;
                ip[8] = self.hop_limit;
                ip[9] = IPPROTO_UDP;
                ip[12..16].copy_from_slice(&s);
                ip[16..20].copy_from_slice(&d);
                let c = ip_checksum(ip);
                ip[10..12].copy_from_slice(&c.to_be_bytes());
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                let w0 =
                    (6u32 << 28) | (u32::from(self.tclass) << 20) | (self.flow_label & 0xf_ffff);
                ip[0..4].copy_from_slice(&w0.to_be_bytes());
                ip[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
                ip[6] = IPPROTO_UDP;
                ip[7] = self.hop_limit;
                ip[8..24].copy_from_slice(&s);
                ip[24..40].copy_from_slice(&d);
            }
            _ => return Err(NetError::FamilyMismatch),
        }
        udp[0..2].copy_from_slice(&self.sport.to_be_bytes());
        udp[2..4].copy_from_slice(&ROCE_V2_PORT.to_be_bytes());
        udp[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        udp[6..8].copy_from_slice(&[0, 0]);
        Ok(hl)
    }
}

/// The constant UDP source port of a QP: in 0xC000..=0xFFFF, spread by
/// the QP numbers so that ECMP/RSS can tell flows apart.
pub fn udp_sport(src_qpn: u32, dst_qpn: u32) -> u16 {
    let mut h = src_qpn.wrapping_mul(0x9E37_79B1) ^ dst_qpn.wrapping_mul(0x85EB_CA6B);
    h ^= h >> 15;
    0xC000 | (h as u16 & 0x3FFF)
}

/// A piece of a message inside one SGE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// Key of the SGE's memory region.
    pub lkey: u32,
    /// Virtual address of the first byte.
    pub addr: u64,
    /// Length (> 0).
    pub len: u32,
    /// Offset of the first byte within the requested range.
    pub at: u32,
}

/// Iterator over the pieces of `len` bytes at message offset `offset` of a
/// message described by SGEs (see [`chunks`]).
#[derive(Clone, Debug)]
pub struct Chunks<I: Iterator<Item = Sge>> {
    sges: I,
    skip: u64,
    left: u32,
    at: u32,
}

/// Split `len` bytes starting at byte `offset` of the message made of
/// `sges` into per-SGE pieces.  Zero-length SGEs are skipped.  If the SGEs
/// hold fewer bytes than asked for, the iterator ends early: compare the sum
/// of the pieces with `len`.
pub fn chunks<I: Iterator<Item = Sge>>(sges: I, offset: u32, len: u32) -> Chunks<I> {
    Chunks {
        sges,
        skip: u64::from(offset),
        left: len,
        at: 0,
    }
}

impl<I: Iterator<Item = Sge>> Iterator for Chunks<I> {
    type Item = Chunk;

    fn next(&mut self) -> Option<Chunk> {
        while self.left > 0 {
            let s = self.sges.next()?;
            let l = u64::from(s.length);
            if self.skip >= l {
                self.skip -= l;
                continue;
            }
            let n = (l - self.skip).min(u64::from(self.left)) as u32;
            let c = Chunk {
                lkey: s.lkey,
                addr: s.addr.wrapping_add(self.skip),
                len: n,
                at: self.at,
            };
            self.skip = 0;
            self.left -= n;
            self.at = self.at.wrapping_add(n);
            return Some(c);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::super::icrc::{ip_layout, verify_ip, write_icrc_ip, SoftCrc32};
    use super::*;
    use std::vec;
    use std::vec::Vec;

    #[test]
    fn ip_addrs_of_received_headers() {
        let mut v4 = [0u8; 24];
        v4[0] = 0x46; // IHL 6: one word of options
        v4[12..16].copy_from_slice(&[10, 77, 0, 1]);
        v4[16..20].copy_from_slice(&[10, 77, 0, 2]);
        assert_eq!(
            ip_addrs(&v4),
            Some((IpAddr::V4([10, 77, 0, 1]), IpAddr::V4([10, 77, 0, 2])))
        );
        assert_eq!(ip_addrs(&v4[..19]), None);
        let mut v6 = [0u8; 40];
        v6[0] = 0x60;
        v6[23] = 1;
        v6[39] = 2;
        let (s, d) = ip_addrs(&v6).unwrap();
        assert_eq!(s.to_gid()[15], 1);
        assert_eq!(d.to_gid()[15], 2);
        assert!(matches!(s, IpAddr::V6(_)));
        assert_eq!(ip_addrs(&v6[..39]), None);
        assert_eq!(ip_addrs(&[0x50; 40]), None);
        assert_eq!(ip_addrs(&[]), None);
    }

    fn crc() -> impl FnMut(u32, &[u8]) -> u32 {
        |c, d| super::super::icrc::soft_crc32_le(c, d)
    }

    #[test]
    fn gid_roundtrip() {
        let v4 = IpAddr::V4([10, 77, 0, 1]);
        let g = v4.to_gid();
        assert_eq!(&g[..12], &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]);
        assert_eq!(IpAddr::from_gid(&g), v4);
        let mut g6 = [0u8; 16];
        g6[0] = 0xfd;
        g6[1] = 0x77;
        g6[15] = 1;
        assert_eq!(IpAddr::from_gid(&g6), IpAddr::V6(g6));
        assert_eq!(IpAddr::V6(g6).to_gid(), g6);
    }

    #[test]
    fn ipv4_header_checksum_and_layout() {
        let h = IpUdp {
            src: IpAddr::V4([10, 77, 0, 1]),
            dst: IpAddr::V4([10, 77, 0, 2]),
            tclass: 0,
            hop_limit: 64,
            flow_label: 0,
            sport: 0xC123,
        };
        let roce = 12 + 4 + 8; // BTH + 8 payload + ICRC
        let mut b = vec![0u8; h.hdr_len() + roce];
        assert_eq!(h.write(&mut b, roce), Ok(28));
        // A correct header sums to 0xffff, i.e. checksum of it is 0.
        assert_eq!(ip_checksum(&b[..20]), 0);
        assert_eq!(u16::from_be_bytes([b[2], b[3]]) as usize, b.len());
        assert_eq!(b[6], 0x40);
        assert_eq!(u16::from_be_bytes([b[22], b[23]]), ROCE_V2_PORT);
        let l = ip_layout(&b).unwrap();
        assert_eq!((l.ip_hdr_len, l.roce_off, l.end), (20, 28, b.len()));
        // ICRC written over our headers verifies.
        b[28] = 0x04; // SEND Only
        write_icrc_ip(crc(), &mut b).unwrap();
        verify_ip(crc(), &b).unwrap();
        verify_ip(SoftCrc32, &b).unwrap();
    }

    #[test]
    fn ipv6_header() {
        let mut s = [0u8; 16];
        s[0] = 0xfd;
        s[15] = 1;
        let mut d = s;
        d[15] = 2;
        let h = IpUdp {
            src: IpAddr::V6(s),
            dst: IpAddr::V6(d),
            tclass: 0x12,
            hop_limit: 7,
            flow_label: 0x12345,
            sport: 0xFFFF,
        };
        let mut b = vec![0u8; 48 + 16];
        assert_eq!(h.write(&mut b, 16), Ok(48));
        assert_eq!(b[0] >> 4, 6);
        assert_eq!(u16::from_be_bytes([b[4], b[5]]), 24);
        assert_eq!((b[6], b[7]), (17, 7));
        let w0 = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        assert_eq!((w0 >> 20) & 0xff, 0x12);
        assert_eq!(w0 & 0xf_ffff, 0x12345);
        assert_eq!(ip_layout(&b).unwrap().roce_off, 48);
    }

    #[test]
    fn header_errors() {
        let h = IpUdp {
            src: IpAddr::V4([1, 2, 3, 4]),
            dst: IpAddr::V6([0; 16]),
            tclass: 0,
            hop_limit: 1,
            flow_label: 0,
            sport: 0xC000,
        };
        let mut b = [0u8; 64];
        assert_eq!(h.write(&mut b, 8), Err(NetError::FamilyMismatch));
        let h = IpUdp {
            dst: IpAddr::V4([1, 2, 3, 5]),
            ..h
        };
        assert_eq!(h.write(&mut b[..27], 8), Err(NetError::BufferTooShort));
        assert_eq!(h.write(&mut b, 65_530), Err(NetError::TooLong));
    }

    #[test]
    fn sport_range() {
        for q in 0..5000u32 {
            let p = udp_sport(q, q ^ 0x55);
            assert!(p >= 0xC000);
        }
        assert_ne!(udp_sport(17, 18), udp_sport(18, 17));
    }

    fn sge(addr: u64, length: u32, lkey: u32) -> Sge {
        Sge { addr, length, lkey }
    }

    #[test]
    fn chunks_split_over_sges() {
        let s = [
            sge(1000, 10, 1),
            sge(0, 0, 9),
            sge(5000, 20, 2),
            sge(9000, 5, 3),
        ];
        let all: Vec<Chunk> = chunks(s.iter().copied(), 0, 35).collect();
        assert_eq!(all.len(), 3);
        assert_eq!(all.iter().map(|c| c.len).sum::<u32>(), 35);
        let mid: Vec<Chunk> = chunks(s.iter().copied(), 8, 14).collect();
        assert_eq!(
            mid,
            [
                Chunk {
                    lkey: 1,
                    addr: 1008,
                    len: 2,
                    at: 0
                },
                Chunk {
                    lkey: 2,
                    addr: 5000,
                    len: 12,
                    at: 2
                },
            ]
        );
        let tail: Vec<Chunk> = chunks(s.iter().copied(), 30, 10).collect();
        assert_eq!(
            tail,
            [Chunk {
                lkey: 3,
                addr: 9000,
                len: 5,
                at: 0
            }]
        );
        assert_eq!(chunks(s.iter().copied(), 40, 1).count(), 0);
        assert_eq!(chunks(s.iter().copied(), 0, 0).count(), 0);
    }

    #[test]
    fn chunks_property() {
        // Every (offset, len) window over random SGE lists is covered
        // exactly, in order.
        let mut seed = 12345u64;
        let mut rnd = |m: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        for _ in 0..2000 {
            let n = rnd(5) as usize + 1;
            let s: Vec<Sge> = (0..n)
                .map(|i| sge(i as u64 * 100_000, rnd(50) as u32, i as u32))
                .collect();
            let total: u32 = s.iter().map(|x| x.length).sum();
            let off = rnd(u64::from(total) + 2) as u32;
            let len = rnd(60) as u32;
            let got: Vec<Chunk> = chunks(s.iter().copied(), off, len).collect();
            let want = len.min(total.saturating_sub(off));
            assert_eq!(got.iter().map(|c| c.len).sum::<u32>(), want);
            let mut at = 0;
            let mut pos = off;
            for c in &got {
                assert_eq!(c.at, at);
                assert!(c.len > 0);
                // Map message position back to (sge, offset).
                let mut p = pos;
                let mut k = 0;
                while p >= s[k].length {
                    p -= s[k].length;
                    k += 1;
                }
                assert_eq!((c.lkey, c.addr), (s[k].lkey, s[k].addr + u64::from(p)));
                at += c.len;
                pos += c.len;
            }
        }
    }
}
