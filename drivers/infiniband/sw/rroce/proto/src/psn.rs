// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! 24-bit packet sequence numbers (PSNs) and path-MTU packetisation.
//!
//! PSNs live in a circle of 2^24 values.  Two PSNs are compared by their
//! signed 24-bit distance: `a` is *after* `b` when `a - b (mod 2^24)` lies in
//! `1..2^23`, *before* it when it lies in `2^23+1..2^24` (that is, negative),
//! and the comparison is meaningful only while the two are less than 2^23
//! apart.  A distance of exactly 2^23 is ambiguous; it is reported as
//! "before" in both directions (the sign bit of the 24-bit difference is set),
//! the same convention as `((a - b) << 8) as i32` used by other
//! implementations.  Callers keep their windows far below 2^23 so it never
//! arises.
//!
//! Nothing here can panic: all arithmetic wraps explicitly.

use core::cmp::Ordering;

/// Mask of the 24 PSN bits.
pub const PSN_MASK: u32 = 0x00FF_FFFF;

/// Number of distinct PSNs (2^24).
pub const PSN_MODULUS: u32 = 1 << 24;

/// Half the PSN space (2^23): the largest distance that still compares
/// unambiguously is `PSN_HALF - 1`.
pub const PSN_HALF: u32 = 1 << 23;

/// Signed 24-bit distance `a - b` in `-2^23 ..= 2^23 - 1`.
///
/// Only the low 24 bits of `a` and `b` are used.  Positive means `a` is after
/// `b`, negative before, zero equal.
#[inline]
pub const fn psn_diff(a: u32, b: u32) -> i32 {
    // Move the 24-bit difference to the top of an i32, then shift it back down
    // arithmetically to sign-extend it.
    ((a.wrapping_sub(b).wrapping_shl(8)) as i32) >> 8
}

/// Compare two PSNs within the 2^23 window (see the module documentation).
#[inline]
pub const fn psn_cmp(a: u32, b: u32) -> Ordering {
    let d = psn_diff(a, b);
    if d > 0 {
        Ordering::Greater
    } else if d < 0 {
        Ordering::Less
    } else {
        Ordering::Equal
    }
}

/// `(psn + n) mod 2^24`.
#[inline]
pub const fn psn_add(psn: u32, n: u32) -> u32 {
    psn.wrapping_add(n) & PSN_MASK
}

/// `(psn - n) mod 2^24`.
#[inline]
pub const fn psn_sub(psn: u32, n: u32) -> u32 {
    psn.wrapping_sub(n) & PSN_MASK
}

/// Whether `psn` lies in the window of `len` PSNs starting at `start`, that is
/// in `start, start+1, …, start+len-1` (mod 2^24).
///
/// `len == 0` is the empty window.  A `len` of 2^24 or more covers every PSN.
#[inline]
pub const fn psn_in_window(psn: u32, start: u32, len: u32) -> bool {
    (psn.wrapping_sub(start) & PSN_MASK) < len
}

/// A 24-bit packet sequence number.
///
/// The value is always below 2^24.  `Psn` deliberately does not implement
/// `Ord`/`PartialOrd`: circular order is not transitive.  Use
/// [`Psn::cmp_psn`], [`Psn::is_after`], [`Psn::is_before`] or [`Psn::diff`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Psn(u32);

impl Psn {
    /// PSN 0.
    pub const ZERO: Psn = Psn(0);
    /// The largest PSN, 2^24 - 1.
    pub const MAX: Psn = Psn(PSN_MASK);

    /// A PSN from the low 24 bits of `v` (the upper 8 bits are dropped).
    #[inline]
    pub const fn new(v: u32) -> Psn {
        Psn(v & PSN_MASK)
    }

    /// A PSN from `v` if it fits in 24 bits.
    #[inline]
    pub const fn try_new(v: u32) -> Option<Psn> {
        if v <= PSN_MASK {
            Some(Psn(v))
        } else {
            None
        }
    }

    /// The value, below 2^24.
    #[inline]
    pub const fn get(self) -> u32 {
        self.0
    }

    /// `self + n` with wrap-around.
    #[inline]
    #[must_use]
    pub const fn add(self, n: u32) -> Psn {
        Psn(psn_add(self.0, n))
    }

    /// `self - n` with wrap-around.
    #[inline]
    #[must_use]
    pub const fn sub(self, n: u32) -> Psn {
        Psn(psn_sub(self.0, n))
    }

    /// The next PSN (`self + 1`).
    #[inline]
    #[must_use]
    pub const fn next(self) -> Psn {
        self.add(1)
    }

    /// The previous PSN (`self - 1`).
    #[inline]
    #[must_use]
    pub const fn prev(self) -> Psn {
        self.sub(1)
    }

    /// Signed distance `self - other` in `-2^23 ..= 2^23 - 1`.
    #[inline]
    pub const fn diff(self, other: Psn) -> i32 {
        psn_diff(self.0, other.0)
    }

    /// Unsigned forward distance from `other` to `self`, in `0 .. 2^24`.
    #[inline]
    pub const fn distance_from(self, other: Psn) -> u32 {
        self.0.wrapping_sub(other.0) & PSN_MASK
    }

    /// Circular comparison (see the module documentation).
    #[inline]
    pub const fn cmp_psn(self, other: Psn) -> Ordering {
        psn_cmp(self.0, other.0)
    }

    /// `self` comes strictly after `other`.
    #[inline]
    pub const fn is_after(self, other: Psn) -> bool {
        self.diff(other) > 0
    }

    /// `self` comes strictly before `other`.
    #[inline]
    pub const fn is_before(self, other: Psn) -> bool {
        self.diff(other) < 0
    }

    /// `self` is in the `len` PSNs starting at `start` (see [`psn_in_window`]).
    #[inline]
    pub const fn is_in_window(self, start: Psn, len: u32) -> bool {
        psn_in_window(self.0, start.0, len)
    }
}

impl From<Psn> for u32 {
    #[inline]
    fn from(p: Psn) -> u32 {
        p.0
    }
}

/// An InfiniBand path MTU (`enum ib_mtu`): the largest payload per packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PathMtu {
    /// 256 bytes (`IB_MTU_256` = 1).
    Mtu256 = 1,
    /// 512 bytes (`IB_MTU_512` = 2).
    Mtu512 = 2,
    /// 1024 bytes (`IB_MTU_1024` = 3).
    Mtu1024 = 3,
    /// 2048 bytes (`IB_MTU_2048` = 4).
    Mtu2048 = 4,
    /// 4096 bytes (`IB_MTU_4096` = 5).
    Mtu4096 = 5,
}

impl PathMtu {
    /// All values, smallest first.
    pub const ALL: [PathMtu; 5] = [
        PathMtu::Mtu256,
        PathMtu::Mtu512,
        PathMtu::Mtu1024,
        PathMtu::Mtu2048,
        PathMtu::Mtu4096,
    ];

    /// From the `enum ib_mtu` value (1..=5).
    pub const fn from_ib_enum(v: u32) -> Option<PathMtu> {
        match v {
            1 => Some(PathMtu::Mtu256),
            2 => Some(PathMtu::Mtu512),
            3 => Some(PathMtu::Mtu1024),
            4 => Some(PathMtu::Mtu2048),
            5 => Some(PathMtu::Mtu4096),
            _ => None,
        }
    }

    /// From an exact size in bytes (256, 512, 1024, 2048 or 4096).
    pub const fn from_bytes(b: u32) -> Option<PathMtu> {
        match b {
            256 => Some(PathMtu::Mtu256),
            512 => Some(PathMtu::Mtu512),
            1024 => Some(PathMtu::Mtu1024),
            2048 => Some(PathMtu::Mtu2048),
            4096 => Some(PathMtu::Mtu4096),
            _ => None,
        }
    }

    /// The largest path MTU whose payload fits in `bytes` (e.g. the netdev
    /// MTU minus the RoCE header overhead), or `None` below 256.
    pub const fn largest_fitting(bytes: u32) -> Option<PathMtu> {
        if bytes >= 4096 {
            Some(PathMtu::Mtu4096)
        } else if bytes >= 2048 {
            Some(PathMtu::Mtu2048)
        } else if bytes >= 1024 {
            Some(PathMtu::Mtu1024)
        } else if bytes >= 512 {
            Some(PathMtu::Mtu512)
        } else if bytes >= 256 {
            Some(PathMtu::Mtu256)
        } else {
            None
        }
    }

    /// The `enum ib_mtu` value.
    #[inline]
    pub const fn ib_enum(self) -> u32 {
        self as u32
    }

    /// log2 of the size in bytes (8..=12).
    #[inline]
    pub const fn shift(self) -> u32 {
        (self as u32).wrapping_add(7)
    }

    /// Size in bytes.
    #[inline]
    pub const fn bytes(self) -> u32 {
        1u32.wrapping_shl(self.shift())
    }
}

/// Number of packets (and PSNs) a message of `len` bytes takes at path MTU
/// `pmtu`: `ceil(len / pmtu)`, and 1 for a zero-length message.
#[inline]
pub const fn npkts(len: u32, pmtu: PathMtu) -> u32 {
    let shift = pmtu.shift();
    let mask = pmtu.bytes().wrapping_sub(1);
    let n = len.wrapping_shr(shift);
    if len == 0 {
        1
    } else if len & mask != 0 {
        // n <= u32::MAX >> 8, so this cannot overflow.
        n.wrapping_add(1)
    } else {
        n
    }
}

/// Like [`npkts`] for a path MTU given in bytes; `None` if `pmtu` is zero.
///
/// Accepts any non-zero `pmtu`, not only powers of two.
#[inline]
pub const fn npkts_bytes(len: u32, pmtu: u32) -> Option<u32> {
    if pmtu == 0 {
        return None;
    }
    if len == 0 {
        return Some(1);
    }
    Some(len.div_ceil(pmtu))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64: a tiny deterministic PRNG for property tests.
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
        /// Values biased towards the interesting edges of the PSN space.
        fn psn(&mut self) -> u32 {
            let r = self.u32();
            match r % 8 {
                0 => r >> 28,                        // near 0
                1 => PSN_MASK - (r >> 28),           // near max
                2 => PSN_HALF.wrapping_sub(r >> 28), // near half
                3 => r,                              // upper bits set (must be ignored)
                _ => r & PSN_MASK,
            }
        }
    }

    const ITERS: usize = 20_000;

    #[test]
    fn diff_basic() {
        assert_eq!(psn_diff(5, 3), 2);
        assert_eq!(psn_diff(3, 5), -2);
        assert_eq!(psn_diff(0, PSN_MASK), 1);
        assert_eq!(psn_diff(PSN_MASK, 0), -1);
        assert_eq!(psn_diff(2, 0xFF_FFFE), 4);
        assert_eq!(psn_diff(PSN_HALF - 1, 0), (PSN_HALF - 1) as i32);
        assert_eq!(psn_diff(PSN_HALF + 1, 0), -((PSN_HALF - 1) as i32));
        // Exactly half-way: negative both ways (documented ambiguity).
        assert_eq!(psn_diff(PSN_HALF, 0), -(PSN_HALF as i32));
        assert_eq!(psn_diff(0, PSN_HALF), -(PSN_HALF as i32));
        // Upper 8 bits are ignored.
        assert_eq!(psn_diff(0xAB00_0005, 0xCD00_0003), 2);
        assert_eq!(psn_diff(u32::MAX, 0), -1);
    }

    #[test]
    fn cmp_basic() {
        assert_eq!(psn_cmp(1, 0), Ordering::Greater);
        assert_eq!(psn_cmp(0, 1), Ordering::Less);
        assert_eq!(psn_cmp(7, 7), Ordering::Equal);
        assert_eq!(psn_cmp(0, PSN_MASK), Ordering::Greater);
        assert_eq!(psn_cmp(0x10, 0xFF_FFF0), Ordering::Greater);
        assert_eq!(psn_cmp(0xFF_FFF0, 0x10), Ordering::Less);
        assert_eq!(psn_cmp(0x7F_FFFF, 0), Ordering::Greater);
        assert_eq!(psn_cmp(0x80_0001, 0), Ordering::Less);
    }

    #[test]
    fn add_sub_wrap() {
        assert_eq!(psn_add(PSN_MASK, 1), 0);
        assert_eq!(psn_add(PSN_MASK, 2), 1);
        assert_eq!(psn_add(5, u32::MAX), 4);
        assert_eq!(psn_sub(0, 1), PSN_MASK);
        assert_eq!(psn_sub(3, 5), PSN_MASK - 1);
        assert_eq!(Psn::MAX.next(), Psn::ZERO);
        assert_eq!(Psn::ZERO.prev(), Psn::MAX);
        assert_eq!(Psn::new(0x0123_4567).get(), 0x23_4567);
        assert_eq!(Psn::try_new(0x100_0000), None);
        assert_eq!(Psn::try_new(PSN_MASK), Some(Psn::MAX));
        assert_eq!(u32::from(Psn::new(9)), 9);
    }

    #[test]
    fn window() {
        assert!(psn_in_window(10, 10, 1));
        assert!(!psn_in_window(10, 10, 0));
        assert!(!psn_in_window(11, 10, 1));
        assert!(!psn_in_window(9, 10, 5));
        assert!(psn_in_window(14, 10, 5));
        assert!(!psn_in_window(15, 10, 5));
        // Across the wrap.
        assert!(psn_in_window(PSN_MASK, PSN_MASK - 1, 4));
        assert!(psn_in_window(0, PSN_MASK - 1, 4));
        assert!(psn_in_window(1, PSN_MASK - 1, 4));
        assert!(!psn_in_window(2, PSN_MASK - 1, 4));
        assert!(!psn_in_window(PSN_MASK - 2, PSN_MASK - 1, 4));
        // Full window.
        assert!(psn_in_window(12345, 999, PSN_MODULUS));
        assert!(psn_in_window(12345, 999, u32::MAX));
        let s = Psn::new(PSN_MASK);
        assert!(Psn::new(3).is_in_window(s, 5));
        assert!(!Psn::new(4).is_in_window(s, 5));
    }

    #[test]
    fn prop_add_then_diff() {
        let mut r = Rng(1);
        for _ in 0..ITERS {
            let a = r.psn();
            let n = r.u32() % PSN_HALF; // 0 .. 2^23-1
            let b = psn_add(a, n);
            assert!(b <= PSN_MASK);
            assert_eq!(psn_diff(b, a), n as i32, "a={a:#x} n={n:#x}");
            assert_eq!(psn_diff(a, b), -(n as i32));
            assert_eq!(psn_sub(b, n), a & PSN_MASK);
            let pa = Psn::new(a);
            let pb = pa.add(n);
            assert_eq!(pb.diff(pa), n as i32);
            assert_eq!(pb.distance_from(pa), n);
            assert_eq!(pb.sub(n), pa);
            if n > 0 {
                assert!(pb.is_after(pa));
                assert!(pa.is_before(pb));
                assert!(!pb.is_before(pa));
            }
        }
    }

    #[test]
    fn prop_add_any_is_mod_2_24() {
        let mut r = Rng(2);
        for _ in 0..ITERS {
            let a = r.psn();
            let n = r.u32();
            let want = ((u64::from(a & PSN_MASK) + u64::from(n)) % u64::from(PSN_MODULUS)) as u32;
            assert_eq!(psn_add(a, n), want);
            assert_eq!(
                psn_add(psn_add(a, n), PSN_MODULUS - (n & PSN_MASK)),
                a & PSN_MASK
            );
            // Unsigned distance inverts add for any n.
            assert_eq!(Psn::new(a).add(n).distance_from(Psn::new(a)), n & PSN_MASK);
        }
    }

    #[test]
    fn prop_antisymmetry() {
        let mut r = Rng(3);
        for _ in 0..ITERS {
            let a = r.psn();
            let b = r.psn();
            let d = psn_diff(a, b);
            assert!((-(PSN_HALF as i32)..PSN_HALF as i32).contains(&d));
            if (a.wrapping_sub(b) & PSN_MASK) == PSN_HALF {
                continue; // the documented ambiguous point
            }
            assert_eq!(psn_diff(b, a), -d);
            assert_eq!(psn_cmp(a, b), psn_cmp(b, a).reverse());
            assert_eq!(psn_cmp(a, b) == Ordering::Equal, (a ^ b) & PSN_MASK == 0);
        }
    }

    #[test]
    fn prop_translation_invariance() {
        let mut r = Rng(4);
        for _ in 0..ITERS {
            let (a, b, k) = (r.psn(), r.psn(), r.u32());
            assert_eq!(psn_diff(psn_add(a, k), psn_add(b, k)), psn_diff(a, b));
            let (s, len) = (r.psn(), r.u32() % (PSN_MODULUS + 2));
            assert_eq!(
                psn_in_window(a, s, len),
                psn_in_window(psn_add(a, k), psn_add(s, k), len)
            );
        }
    }

    #[test]
    fn prop_window_matches_reference() {
        let mut r = Rng(5);
        for _ in 0..ITERS {
            let s = r.psn() & PSN_MASK;
            let len = r.u32() % 300;
            let off = r.u32() % 600;
            let p = psn_add(s, off);
            assert_eq!(
                psn_in_window(p, s, len),
                off < len,
                "s={s:#x} len={len} off={off}"
            );
            // psn_in_window agrees with the signed compare for small windows.
            if len > 0 && len < PSN_HALF {
                let last = psn_add(s, len - 1);
                let cmp_says = psn_diff(p, s) >= 0 && psn_diff(p, last) <= 0;
                assert_eq!(psn_in_window(p, s, len), cmp_says);
            }
        }
    }

    #[test]
    fn pmtu() {
        for (i, m) in PathMtu::ALL.iter().enumerate() {
            assert_eq!(PathMtu::from_ib_enum(m.ib_enum()), Some(*m));
            assert_eq!(PathMtu::from_bytes(m.bytes()), Some(*m));
            assert_eq!(m.bytes(), 256 << i);
            assert_eq!(PathMtu::largest_fitting(m.bytes()), Some(*m));
            assert_eq!(PathMtu::largest_fitting(m.bytes() * 2 - 1), Some(*m));
        }
        assert_eq!(PathMtu::from_ib_enum(0), None);
        assert_eq!(PathMtu::from_ib_enum(6), None);
        assert_eq!(PathMtu::from_bytes(1500), None);
        assert_eq!(PathMtu::largest_fitting(255), None);
        assert_eq!(PathMtu::largest_fitting(1500 - 80), Some(PathMtu::Mtu1024));
        assert_eq!(PathMtu::largest_fitting(9000 - 80), Some(PathMtu::Mtu4096));
        assert_eq!(PathMtu::largest_fitting(u32::MAX), Some(PathMtu::Mtu4096));
    }

    #[test]
    fn npkts_edges() {
        use PathMtu::*;
        assert_eq!(npkts(0, Mtu1024), 1);
        assert_eq!(npkts(1, Mtu1024), 1);
        assert_eq!(npkts(1024, Mtu1024), 1);
        assert_eq!(npkts(1025, Mtu1024), 2);
        assert_eq!(npkts(2048, Mtu1024), 2);
        assert_eq!(npkts(4096, Mtu256), 16);
        assert_eq!(npkts(1 << 31, Mtu4096), 1 << 19);
        assert_eq!(npkts(u32::MAX, Mtu256), (u32::MAX >> 8) + 1);
        assert_eq!(npkts(u32::MAX, Mtu4096), 1 << 20);
        assert_eq!(npkts_bytes(0, 0), None);
        assert_eq!(npkts_bytes(5, 0), None);
        assert_eq!(npkts_bytes(0, 1000), Some(1));
        assert_eq!(npkts_bytes(3000, 1000), Some(3));
        assert_eq!(npkts_bytes(3001, 1000), Some(4));
        assert_eq!(npkts_bytes(u32::MAX, 1), Some(u32::MAX));
    }

    #[test]
    fn prop_npkts() {
        let mut r = Rng(6);
        for _ in 0..ITERS {
            let len = match r.u32() % 3 {
                0 => r.u32() % 20_000,
                1 => r.u32(),
                _ => u32::MAX - r.u32() % 5000,
            };
            for m in PathMtu::ALL {
                let want = if len == 0 {
                    1
                } else {
                    u64::from(len).div_ceil(u64::from(m.bytes())) as u32
                };
                assert_eq!(npkts(len, m), want, "len={len} mtu={}", m.bytes());
                assert_eq!(npkts_bytes(len, m.bytes()), Some(want));
                // n full packets hold the message; n-1 do not (unless empty).
                let n = u64::from(want);
                assert!(n * u64::from(m.bytes()) >= u64::from(len));
                if len > 0 {
                    assert!((n - 1) * u64::from(m.bytes()) < u64::from(len));
                }
            }
        }
    }
}
