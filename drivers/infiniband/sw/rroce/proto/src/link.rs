// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Link-level facts derived from the Ethernet device a port runs on.

/// An InfiniBand MTU, as the `enum ib_mtu` code (1 = 256 … 5 = 4096).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u32)]
pub enum IbMtu {
    /// 256 bytes.
    Mtu256 = 1,
    /// 512 bytes.
    Mtu512 = 2,
    /// 1024 bytes.
    Mtu1024 = 3,
    /// 2048 bytes.
    Mtu2048 = 4,
    /// 4096 bytes.
    Mtu4096 = 5,
}

impl IbMtu {
    /// All MTUs, largest first.
    pub const ALL_DESC: [IbMtu; 5] = [
        IbMtu::Mtu4096,
        IbMtu::Mtu2048,
        IbMtu::Mtu1024,
        IbMtu::Mtu512,
        IbMtu::Mtu256,
    ];

    /// Payload bytes per packet.
    pub const fn bytes(self) -> u32 {
        128u32 << (self as u32)
    }

    /// The enum code (`enum ib_mtu`).
    pub const fn code(self) -> u32 {
        self as u32
    }

    /// From an `enum ib_mtu` code; `None` for anything else.
    pub fn from_code(code: u32) -> Option<IbMtu> {
        IbMtu::ALL_DESC.into_iter().find(|m| m.code() == code)
    }
}

/// Worst-case bytes a RoCEv2 packet adds around its payload: IPv6 header
/// (40), UDP (8), BTH (12), the largest extension-header set (XRC 4 + Atomic
/// ETH 28) and the ICRC (4).  The same budget ib_core uses for RoCE ports, so
/// rroce agrees with other RoCE devices on a given Ethernet MTU.
pub const ROCE_OVERHEAD: u32 = 40 + 8 + 12 + 4 + 28 + 4;

/// The active IB MTU of a port whose netdev has Ethernet MTU `eth_mtu`:
/// the largest IB MTU whose packets fit, or `None` if not even 256 does.
pub fn active_mtu(eth_mtu: u32) -> Option<IbMtu> {
    let room = eth_mtu.checked_sub(ROCE_OVERHEAD)?;
    IbMtu::ALL_DESC.into_iter().find(|m| m.bytes() <= room)
}

/// The modified EUI-64 built from a 48-bit MAC address (universal/local bit
/// flipped, `ff:fe` in the middle), used as node GUID, in wire byte order.
pub fn eui64_from_mac(mac: [u8; 6]) -> [u8; 8] {
    [
        mac[0] ^ 0x02,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_bytes_and_codes() {
        assert_eq!(IbMtu::Mtu256.bytes(), 256);
        assert_eq!(IbMtu::Mtu4096.bytes(), 4096);
        assert_eq!(IbMtu::from_code(3), Some(IbMtu::Mtu1024));
        assert_eq!(IbMtu::from_code(0), None);
        assert_eq!(IbMtu::from_code(6), None);
    }

    #[test]
    fn active_mtu_follows_ethernet_mtu() {
        assert_eq!(active_mtu(1500), Some(IbMtu::Mtu1024));
        assert_eq!(active_mtu(9000), Some(IbMtu::Mtu4096));
        assert_eq!(active_mtu(4096 + ROCE_OVERHEAD), Some(IbMtu::Mtu4096));
        assert_eq!(active_mtu(4096 + ROCE_OVERHEAD - 1), Some(IbMtu::Mtu2048));
        assert_eq!(active_mtu(2048 + ROCE_OVERHEAD), Some(IbMtu::Mtu2048));
        assert_eq!(active_mtu(1280), Some(IbMtu::Mtu1024));
        assert_eq!(active_mtu(576), Some(IbMtu::Mtu256));
        assert_eq!(active_mtu(256 + ROCE_OVERHEAD - 1), None);
        assert_eq!(active_mtu(0), None);
        assert_eq!(active_mtu(u32::MAX), Some(IbMtu::Mtu4096));
    }

    #[test]
    fn eui64() {
        assert_eq!(
            eui64_from_mac([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]),
            [0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56]
        );
    }
}
