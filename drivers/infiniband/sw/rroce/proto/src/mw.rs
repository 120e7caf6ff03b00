// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Rules of memory windows (type 1 and type 2B) that do not depend on the
//! kernel: binding ([`check_bind`]), remote access through a window key
//! ([`check_access`]) and invalidation ([`check_invalidate`]).  The driver
//! keeps the window state under a lock and applies these decisions.
//!
//! # Keys
//!
//! A window's key has the layout of a region key (see [`super::mr`]): its
//! index is fixed at allocation, a bind chooses the key byte (type 1: the
//! provider takes the next one, `ibv_inc_rkey`; type 2: the consumer's).
//!
//! # Binding
//!
//! A bind is posted on a QP and executed in order.  The region must belong
//! to the QP's PD (as must the window), allow `IB_ACCESS_MW_BIND` and hold
//! the whole range; a window with remote write or atomic access needs a
//! region with local write.  A window may carry remote read/write/atomic
//! access and (type 2) `IB_ZERO_BASED`; local write is accepted and means
//! nothing.  A type-2 window must be free (not bound): it is unbound only
//! by LOCAL_INV, SEND with invalidate or deallocation, and once bound it
//! belongs to the QP that bound it (type 2B).  A type-1 window may be
//! rebound at any time, and a zero-length bind unbinds it.  A failed bind
//! completes with `IB_WC_MW_BIND_ERR` and moves the QP to the error state.
//!
//! # Access
//!
//! A remote access through a window needs the window bound under exactly
//! that key, the accessing QP of the window's PD (type 2B: the QP it is
//! bound to), the window's access flag and the range inside the window.
//!
//! # Invalidation
//!
//! Only type-2 windows are invalidated, by their current key, while bound,
//! from a QP of their PD (a SEND with invalidate: the QP they are bound
//! to).  A failed LOCAL_INV completes with `IB_WC_LOC_PROT_ERR` (as for a
//! region); a failed SEND with invalidate is a remote access error.

use super::qp::{
    ACCESS_LOCAL_WRITE, ACCESS_REMOTE_ATOMIC, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE,
};

/// `IB_ACCESS_MW_BIND` (`IBV_ACCESS_MW_BIND`).
pub const ACCESS_MW_BIND: u32 = 1 << 4;
/// `IB_ZERO_BASED` (`IBV_ACCESS_ZERO_BASED`).
pub const ACCESS_ZERO_BASED: u32 = 1 << 5;

/// Access flags a bind may ask for.
const BIND_ACCESS: u32 = ACCESS_REMOTE_READ
    | ACCESS_REMOTE_WRITE
    | ACCESS_REMOTE_ATOMIC
    | ACCESS_LOCAL_WRITE
    | ACCESS_ZERO_BASED;

/// A bound window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Binding {
    /// First address in the region, and length.
    pub addr: u64,
    pub len: u64,
    /// Remote access flags (`ACCESS_REMOTE_*`).
    pub access: u32,
    /// Remote addresses are offsets from `addr`.
    pub zero_based: bool,
    /// Type 2B: the QP it is bound to.
    pub qpn: Option<u32>,
}

/// What a bind needs to know about the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowInfo {
    /// Type 2 (else type 1).
    pub type2: bool,
    /// Its current key.
    pub rkey: u32,
    /// Bound now.
    pub bound: bool,
}

/// What a bind needs to know about the region named by its L_Key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionInfo {
    /// The region's access flags (`IB_ACCESS_*`).
    pub access: u32,
    /// First address and length, `None` if the region has no fixed range
    /// (DMA and fast-registration MRs: windows do not bind to them).
    pub range: Option<(u64, u64)>,
}

/// A bind request (the fields of a BIND_MW WQE, see `wqe`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BindRequest {
    /// The type the poster saw (`wqe::BIND_TYPE2` or not).
    pub type2: bool,
    /// The new key.
    pub new_rkey: u32,
    pub addr: u64,
    pub len: u64,
    /// Requested access flags.
    pub access: u32,
}

/// Why a bind was refused (all complete with `IB_WC_MW_BIND_ERR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindError {
    /// No window of the QP's PD with this index (the driver's check).
    NoWindow,
    /// The window is of the other type.
    WrongType,
    /// The new key has another index.
    Key,
    /// A type-2 window that is bound already.
    Bound,
    /// Unknown flags, or zero-based on a type-1 window.
    BadAccess,
    /// No region of the QP's PD with this L_Key, or one without a range.
    NoRegion,
    /// The region lacks `IB_ACCESS_MW_BIND`.
    NoMwBind,
    /// Remote write/atomic on a region without local write.
    NeedsLocalWrite,
    /// The range is not inside the region.
    Range,
    /// A type-2 bind of length 0 (IBA o10-37.2.40: a type-2 window is
    /// invalidated, not unbound by an empty bind).
    Type2ZeroLength,
}

/// What a valid bind does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindOutcome {
    /// Type 1, length 0: the window is unbound, under the new key.
    Unbind,
    /// The window is bound (to the region) under the new key.
    Bind(Binding),
}

/// Whether two keys have the same index.
fn same_index(a: u32, b: u32) -> bool {
    a >> 8 == b >> 8
}

/// Checks a bind of window `w` by QP `qpn`; `region` is the region of the
/// QP's PD named by the request's L_Key (`None` if there is none).
pub fn check_bind(
    w: &WindowInfo,
    r: &BindRequest,
    region: Option<&RegionInfo>,
    qpn: u32,
) -> Result<BindOutcome, BindError> {
    if w.type2 != r.type2 {
        return Err(BindError::WrongType);
    }
    if !same_index(w.rkey, r.new_rkey) {
        return Err(BindError::Key);
    }
    if r.access & !BIND_ACCESS != 0 || (!r.type2 && r.access & ACCESS_ZERO_BASED != 0) {
        return Err(BindError::BadAccess);
    }
    if w.type2 && w.bound {
        return Err(BindError::Bound);
    }
    if r.len == 0 {
        return if r.type2 {
            Err(BindError::Type2ZeroLength)
        } else {
            Ok(BindOutcome::Unbind)
        };
    }
    let m = region.ok_or(BindError::NoRegion)?;
    if m.access & ACCESS_MW_BIND == 0 {
        return Err(BindError::NoMwBind);
    }
    if r.access & (ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC) != 0
        && m.access & ACCESS_LOCAL_WRITE == 0
    {
        return Err(BindError::NeedsLocalWrite);
    }
    let (start, mlen) = m.range.ok_or(BindError::NoRegion)?;
    let end = r.addr.checked_add(r.len).ok_or(BindError::Range)?;
    let mend = start.checked_add(mlen).ok_or(BindError::Range)?;
    if r.addr < start || end > mend {
        return Err(BindError::Range);
    }
    Ok(BindOutcome::Bind(Binding {
        addr: r.addr,
        len: r.len,
        access: r.access & (ACCESS_REMOTE_READ | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC),
        zero_based: r.access & ACCESS_ZERO_BASED != 0,
        qpn: r.type2.then_some(qpn),
    }))
}

/// Why a remote access through a window was refused (NAK remote access
/// error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessFault {
    /// Not bound, another key, or (2B) another QP.
    Key,
    /// The window lacks the access.
    Access,
    /// Outside the window.
    Range,
}

/// Checks a remote access of `len` bytes at `va` with `ACCESS_REMOTE_*`
/// flag `flag` under `rkey` by QP `qpn` (of the window's PD) to a window
/// whose key is `window_rkey` and binding `b`.  Returns the address in the
/// region.
pub fn check_access(
    window_rkey: u32,
    b: Option<&Binding>,
    rkey: u32,
    qpn: u32,
    va: u64,
    len: u32,
    flag: u32,
) -> Result<u64, AccessFault> {
    let b = b.filter(|_| window_rkey == rkey).ok_or(AccessFault::Key)?;
    if b.qpn.is_some_and(|q| q != qpn) {
        return Err(AccessFault::Key);
    }
    if b.access & flag != flag {
        return Err(AccessFault::Access);
    }
    if len == 0 {
        return Ok(b.addr);
    }
    let off = if b.zero_based {
        Some(va)
    } else {
        va.checked_sub(b.addr)
    };
    let end = off.and_then(|o| o.checked_add(u64::from(len)));
    match (off, end) {
        (Some(o), Some(e)) if e <= b.len => Ok(b.addr.wrapping_add(o)),
        _ => Err(AccessFault::Range),
    }
}

/// Why an invalidation of a window was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InvalidateError {
    /// Type-1 windows are not invalidated by work requests.
    Type1,
    /// Not bound under this key, or (SEND with invalidate) bound to
    /// another QP.
    Key,
}

/// Checks an invalidation of `rkey` on a window (`type2`, current key
/// `window_rkey`, binding `b`) of the invalidating QP's PD: LOCAL_INV
/// (`qpn` `None`) or a SEND with invalidate received by QP `qpn`.
pub fn check_invalidate(
    type2: bool,
    window_rkey: u32,
    b: Option<&Binding>,
    rkey: u32,
    qpn: Option<u32>,
) -> Result<(), InvalidateError> {
    if !type2 {
        return Err(InvalidateError::Type1);
    }
    match b {
        // (Not `is_none_or`: the kernel's MSRV is 1.78.)
        Some(b) if window_rkey == rkey && (qpn.is_none() || qpn == b.qpn) => Ok(()),
        _ => Err(InvalidateError::Key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RW: u32 = ACCESS_REMOTE_READ | ACCESS_REMOTE_WRITE;

    fn region(access: u32) -> RegionInfo {
        RegionInfo {
            access,
            range: Some((0x10000, 0x4000)),
        }
    }

    fn req(type2: bool, addr: u64, len: u64, access: u32) -> BindRequest {
        BindRequest {
            type2,
            new_rkey: 0x1235,
            addr,
            len,
            access,
        }
    }

    const W1: WindowInfo = WindowInfo {
        type2: false,
        rkey: 0x1234,
        bound: false,
    };
    const W2: WindowInfo = WindowInfo {
        type2: true,
        rkey: 0x1234,
        bound: false,
    };
    const MR: u32 = ACCESS_LOCAL_WRITE | ACCESS_MW_BIND;

    #[test]
    fn bind_rules() {
        let ok = check_bind(
            &W1,
            &req(false, 0x11000, 0x1000, RW | ACCESS_LOCAL_WRITE),
            Some(&region(MR)),
            7,
        );
        assert_eq!(
            ok,
            Ok(BindOutcome::Bind(Binding {
                addr: 0x11000,
                len: 0x1000,
                access: RW,
                zero_based: false,
                qpn: None
            }))
        );
        // Type 2 is tied to the QP; zero-based allowed.
        let b = check_bind(
            &W2,
            &req(true, 0x10000, 0x4000, RW | ACCESS_ZERO_BASED),
            Some(&region(MR)),
            7,
        );
        assert_eq!(
            b,
            Ok(BindOutcome::Bind(Binding {
                addr: 0x10000,
                len: 0x4000,
                access: RW,
                zero_based: true,
                qpn: Some(7)
            }))
        );
        // Type mismatch, index change, bad flags, zero-based type 1.
        let r = Some(&region(MR));
        assert_eq!(
            check_bind(&W1, &req(true, 0x10000, 16, RW), r, 7),
            Err(BindError::WrongType)
        );
        assert_eq!(
            check_bind(&W2, &req(false, 0x10000, 16, RW), r, 7),
            Err(BindError::WrongType)
        );
        let mut k = req(false, 0x10000, 16, RW);
        k.new_rkey = 0x1334;
        assert_eq!(check_bind(&W1, &k, r, 7), Err(BindError::Key));
        assert_eq!(
            check_bind(&W1, &req(false, 0x10000, 16, 1 << 6), r, 7),
            Err(BindError::BadAccess)
        );
        assert_eq!(
            check_bind(&W1, &req(false, 0x10000, 16, ACCESS_ZERO_BASED), r, 7),
            Err(BindError::BadAccess)
        );
        // Type 2 bound already; type 1 rebinds.
        let bound2 = WindowInfo { bound: true, ..W2 };
        assert_eq!(
            check_bind(&bound2, &req(true, 0x10000, 16, RW), r, 7),
            Err(BindError::Bound)
        );
        let bound1 = WindowInfo { bound: true, ..W1 };
        assert!(matches!(
            check_bind(&bound1, &req(false, 0x10000, 16, RW), r, 7),
            Ok(BindOutcome::Bind(_))
        ));
        // Zero length: unbind for type 1 (no region needed), an error
        // for type 2 (as rdma_rxe: o10-37.2.40).
        assert_eq!(
            check_bind(&bound1, &req(false, 0, 0, 0), None, 7),
            Ok(BindOutcome::Unbind)
        );
        assert_eq!(
            check_bind(&W2, &req(true, 0x10000, 0, RW), r, 7),
            Err(BindError::Type2ZeroLength)
        );
        // Region rules.
        assert_eq!(
            check_bind(&W1, &req(false, 0x10000, 16, RW), None, 7),
            Err(BindError::NoRegion)
        );
        let dma = RegionInfo {
            access: MR,
            range: None,
        };
        assert_eq!(
            check_bind(&W1, &req(false, 0x10000, 16, RW), Some(&dma), 7),
            Err(BindError::NoRegion)
        );
        let nobind = region(ACCESS_LOCAL_WRITE | RW);
        assert_eq!(
            check_bind(&W1, &req(false, 0x10000, 16, RW), Some(&nobind), 7),
            Err(BindError::NoMwBind)
        );
        let nolw = region(ACCESS_MW_BIND | ACCESS_REMOTE_READ);
        assert_eq!(
            check_bind(
                &W1,
                &req(false, 0x10000, 16, ACCESS_REMOTE_WRITE),
                Some(&nolw),
                7
            ),
            Err(BindError::NeedsLocalWrite)
        );
        assert_eq!(
            check_bind(
                &W1,
                &req(false, 0x10000, 16, ACCESS_REMOTE_ATOMIC),
                Some(&nolw),
                7
            ),
            Err(BindError::NeedsLocalWrite)
        );
        assert!(check_bind(
            &W1,
            &req(false, 0x10000, 16, ACCESS_REMOTE_READ),
            Some(&nolw),
            7
        )
        .is_ok());
        for (a, l) in [
            (0xffff, 16),
            (0x13ff1, 16),
            (0x10000, 0x4001),
            (u64::MAX, 2),
        ] {
            assert_eq!(
                check_bind(&W1, &req(false, a, l, RW), r, 7),
                Err(BindError::Range),
                "{a:#x}+{l:#x}"
            );
        }
        assert!(check_bind(&W1, &req(false, 0x13ff0, 16, RW), r, 7).is_ok());
    }

    #[test]
    fn access_rules() {
        let b = Binding {
            addr: 0x1000,
            len: 0x100,
            access: ACCESS_REMOTE_WRITE,
            zero_based: false,
            qpn: None,
        };
        let w = ACCESS_REMOTE_WRITE;
        assert_eq!(
            check_access(0x55, Some(&b), 0x55, 1, 0x1000, 0x100, w),
            Ok(0x1000)
        );
        assert_eq!(
            check_access(0x55, Some(&b), 0x55, 1, 0x10f0, 0x10, w),
            Ok(0x10f0)
        );
        assert_eq!(
            check_access(0x55, Some(&b), 0x56, 1, 0x1000, 1, w),
            Err(AccessFault::Key)
        );
        assert_eq!(
            check_access(0x55, None, 0x55, 1, 0x1000, 1, w),
            Err(AccessFault::Key)
        );
        assert_eq!(
            check_access(0x55, Some(&b), 0x55, 1, 0x1000, 1, ACCESS_REMOTE_READ),
            Err(AccessFault::Access)
        );
        for (va, len) in [(0xfff, 1), (0x10f1, 0x10), (0x1100, 1), (u64::MAX, 2)] {
            assert_eq!(
                check_access(0x55, Some(&b), 0x55, 1, va, len, w),
                Err(AccessFault::Range)
            );
        }
        // Zero-length accesses need only the key and the access.
        assert_eq!(check_access(0x55, Some(&b), 0x55, 1, 0, 0, w), Ok(0x1000));
        // Zero-based, type 2B.
        let z = Binding {
            zero_based: true,
            qpn: Some(9),
            ..b
        };
        assert_eq!(
            check_access(0x55, Some(&z), 0x55, 9, 0x20, 0x10, w),
            Ok(0x1020)
        );
        assert_eq!(
            check_access(0x55, Some(&z), 0x55, 9, 0xf1, 0x10, w),
            Err(AccessFault::Range)
        );
        assert_eq!(
            check_access(0x55, Some(&z), 0x55, 8, 0x20, 0x10, w),
            Err(AccessFault::Key)
        );
    }

    #[test]
    fn invalidate_rules() {
        let b = Binding {
            addr: 0,
            len: 1,
            access: 0,
            zero_based: false,
            qpn: Some(4),
        };
        assert_eq!(check_invalidate(true, 0x77, Some(&b), 0x77, None), Ok(()));
        assert_eq!(
            check_invalidate(true, 0x77, Some(&b), 0x77, Some(4)),
            Ok(())
        );
        assert_eq!(
            check_invalidate(true, 0x77, Some(&b), 0x77, Some(5)),
            Err(InvalidateError::Key)
        );
        assert_eq!(
            check_invalidate(true, 0x77, Some(&b), 0x78, None),
            Err(InvalidateError::Key)
        );
        assert_eq!(
            check_invalidate(true, 0x77, None, 0x77, None),
            Err(InvalidateError::Key)
        );
        assert_eq!(
            check_invalidate(false, 0x77, Some(&b), 0x77, None),
            Err(InvalidateError::Type1)
        );
    }
}
