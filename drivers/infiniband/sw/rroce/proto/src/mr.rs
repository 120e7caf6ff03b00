// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Rules of memory regions that do not depend on the kernel: the key
//! layout, the two states of a fast-registration MR, and the checks of
//! `IB_WR_REG_MR`, `IB_WR_LOCAL_INV` and SEND with invalidate.
//!
//! # Keys
//!
//! An L_Key/R_Key is `index << 8 | key byte`: `index` selects the region in
//! the device's key table, the low 8 bits are the *key byte* (the
//! "variant" part a consumer changes with `ib_update_fast_reg_key` before
//! every fast registration, so that a stale key of an earlier registration
//! of the same MR no longer matches).
//!
//! # Fast-registration MRs
//!
//! `ib_alloc_mr(IB_MR_TYPE_MEM_REG)` gives a region in the **free** state:
//! no access through it is allowed.  `IB_WR_REG_MR` (posted on a QP of the
//! same PD) moves it to **valid** with a new key, iova, length, page list
//! and access flags ([`check_reg`]).  `IB_WR_LOCAL_INV` or a remote SEND
//! with invalidate naming its current key moves it back to **free**
//! ([`check_invalidate`]); invalidating a free region with its current key
//! is allowed (and changes nothing), as consumers may race a remote
//! invalidation with their own.  Other regions (user MRs, DMA MRs) cannot
//! be invalidated.
//!
//! # Completion statuses (local operations)
//!
//! A request naming the wrong region, key, PD or state is a protection
//! error (`IB_WC_LOC_PROT_ERR`); a malformed request (page size, page
//! count, length, access flags) is an operation error
//! (`IB_WC_LOC_QP_OP_ERR`).  Either moves the QP to the error state.  A
//! SEND with invalidate whose R_Key cannot be invalidated is answered with
//! NAK remote access error (the requester completes with
//! `IB_WC_REM_ACCESS_ERR`) and the receive WQE completes with
//! `IB_WC_REM_INV_REQ_ERR` (see `rc::resp`).

use super::qp::{
    ACCESS_FLUSH_GLOBAL, ACCESS_LOCAL_WRITE, ACCESS_REMOTE_ATOMIC, ACCESS_REMOTE_READ,
    ACCESS_REMOTE_WRITE,
};
use super::wqe::{SendWqe, WcStatus};

/// `IB_ACCESS_MW_BIND`.
pub const ACCESS_MW_BIND: u32 = 1 << 4;
/// `IB_ACCESS_OPTIONAL`: flags a device may ignore (relaxed ordering…).
pub const ACCESS_OPTIONAL: u32 = ((1 << 29) - 1) & !((1 << 20) - 1);
/// Access flags a fast registration may carry.
pub const REG_ACCESS_ALLOWED: u32 = ACCESS_LOCAL_WRITE
    | ACCESS_REMOTE_WRITE
    | ACCESS_REMOTE_READ
    | ACCESS_REMOTE_ATOMIC
    | ACCESS_MW_BIND
    | ACCESS_FLUSH_GLOBAL
    | ACCESS_OPTIONAL;
/// Smallest and largest page size of a fast registration.
pub const MIN_PAGE_SIZE: u64 = 1 << 12;
/// See [`MIN_PAGE_SIZE`].
pub const MAX_PAGE_SIZE: u64 = 1 << 30;

/// The key-table index of a key.
pub const fn key_index(key: u32) -> u32 {
    key >> 8
}

/// The key byte of a key.
pub const fn key_byte(key: u32) -> u8 {
    (key & 0xff) as u8
}

/// `key` with its key byte replaced by `byte`.
pub const fn with_key_byte(key: u32, byte: u8) -> u32 {
    (key & !0xff) | byte as u32
}

/// What kind of region a key names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MrKind {
    /// Registered user memory or a kernel DMA MR: always valid, never
    /// invalidated.
    Plain,
    /// A fast-registration MR.
    FastReg,
}

/// State of a fast-registration MR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrState {
    /// No access allowed; may be registered.
    Free,
    /// Registered: accessible with its current key.
    Valid,
}

/// What the checks need to know about the region a request names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionInfo {
    /// Kind.
    pub kind: MrKind,
    /// State (`Valid` for plain regions).
    pub state: FrState,
    /// Its current key.
    pub key: u32,
    /// It belongs to the PD of the QP (or of the request).
    pub same_pd: bool,
    /// Capacity of its page list (0 for plain regions).
    pub max_pages: u32,
}

/// Why an `IB_WR_REG_MR` failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegError {
    /// No region at the key's index, or not a fast-registration MR.
    NotFastReg,
    /// The region belongs to another PD.
    WrongPd,
    /// The region is valid (not invalidated since its last registration).
    NotFree,
    /// Page size not a power of two in `MIN_PAGE_SIZE..=MAX_PAGE_SIZE`.
    BadPageSize,
    /// More pages than the region was allocated for.
    TooManyPages,
    /// The pages do not cover `length` bytes from `iova`, or the range
    /// wraps around.
    BadLength,
    /// Unknown access flags, or remote write/atomic without local write.
    BadAccess,
}

impl RegError {
    /// The completion status of the failed WQE.
    pub const fn status(self) -> WcStatus {
        match self {
            RegError::NotFastReg | RegError::WrongPd | RegError::NotFree => WcStatus::LocProtErr,
            RegError::BadPageSize
            | RegError::TooManyPages
            | RegError::BadLength
            | RegError::BadAccess => WcStatus::LocQpOpErr,
        }
    }
}

/// The parameters of an `IB_WR_REG_MR`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegRequest {
    /// The new key (index of the region, new key byte).
    pub key: u32,
    /// First byte of the region (the address consumers use).
    pub iova: u64,
    /// Length in bytes.
    pub length: u64,
    /// Size of each page of the page list.
    pub page_size: u64,
    /// Pages in the page list.
    pub npages: u32,
    /// `IB_ACCESS_*` flags.
    pub access: u32,
}

impl RegRequest {
    /// Stores the request in a REG_MR send WQE (see `SendOpcode::RegMr`
    /// for the fields used).
    pub fn to_wqe(self, w: &mut SendWqe) {
        w.rkey = self.key;
        w.remote_addr = self.iova;
        w.compare_add = self.length;
        w.swap = (u64::from(self.npages) << 32) | (self.page_size & 0xffff_ffff);
        w.remote_qkey = self.access;
    }

    /// The request stored in a REG_MR send WQE by [`RegRequest::to_wqe`].
    pub fn from_wqe(w: &SendWqe) -> RegRequest {
        RegRequest {
            key: w.rkey,
            iova: w.remote_addr,
            length: w.compare_add,
            page_size: w.swap & 0xffff_ffff,
            npages: (w.swap >> 32) as u32,
            access: w.remote_qkey,
        }
    }
}

/// Whether `access` is a valid set of MR access flags: known flags only,
/// and remote write or atomic only together with local write (IBA
/// 10.6.3.1, as `ib_check_mr_access`).
pub const fn access_ok(access: u32) -> bool {
    if access & !REG_ACCESS_ALLOWED != 0 {
        return false;
    }
    !(access & (ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC) != 0
        && access & ACCESS_LOCAL_WRITE == 0)
}

/// Checks a fast registration of region `mr` (found at `key_index(r.key)`,
/// or `None`).  On success the region becomes valid with `r`'s key.
pub fn check_reg(mr: Option<&RegionInfo>, r: &RegRequest) -> Result<(), RegError> {
    let mr = mr
        .filter(|m| m.kind == MrKind::FastReg)
        .ok_or(RegError::NotFastReg)?;
    if !mr.same_pd {
        return Err(RegError::WrongPd);
    }
    if mr.state != FrState::Free {
        return Err(RegError::NotFree);
    }
    if !r.page_size.is_power_of_two() || !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&r.page_size) {
        return Err(RegError::BadPageSize);
    }
    if r.npages > mr.max_pages {
        return Err(RegError::TooManyPages);
    }
    if !access_ok(r.access) {
        return Err(RegError::BadAccess);
    }
    // The pages must cover [iova, iova + length), the first one starting
    // at iova rounded down to the page size.
    let first = r.iova & (r.page_size - 1);
    let span = first.checked_add(r.length).ok_or(RegError::BadLength)?;
    r.iova.checked_add(r.length).ok_or(RegError::BadLength)?;
    let need = span.div_ceil(r.page_size);
    if need > u64::from(r.npages) {
        return Err(RegError::BadLength);
    }
    Ok(())
}

/// Why an invalidation (LOCAL_INV, or the R_Key of a SEND with
/// invalidate) failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InvError {
    /// No region with this key: unknown index or a stale key byte.
    BadKey,
    /// The region belongs to another PD.
    WrongPd,
    /// The region cannot be invalidated (not a fast-registration MR).
    NotInvalidatable,
}

impl InvError {
    /// The completion status of a failed LOCAL_INV.
    pub const fn local_status(self) -> WcStatus {
        WcStatus::LocProtErr
    }
}

/// Checks an invalidation of `key` on region `mr` (found at
/// `key_index(key)`, or `None`).  On success the region becomes free.
pub fn check_invalidate(mr: Option<&RegionInfo>, key: u32) -> Result<(), InvError> {
    let mr = mr.filter(|m| m.key == key).ok_or(InvError::BadKey)?;
    if !mr.same_pd {
        return Err(InvError::WrongPd);
    }
    if mr.kind != MrKind::FastReg {
        return Err(InvError::NotInvalidatable);
    }
    Ok(())
}

/// Whether an access with `key` to region `mr` may proceed (key byte and
/// state; PD, access flags and range are checked separately).
pub fn key_usable(mr: &RegionInfo, key: u32) -> bool {
    mr.key == key && mr.state == FrState::Valid
}

/// Where byte `va` of a fast-registered region lies: the index in its page
/// list and the offset in that page.  `None` outside `[iova, iova + length)`.
pub fn locate(iova: u64, length: u64, page_size: u64, va: u64) -> Option<(usize, u64)> {
    if !page_size.is_power_of_two() {
        return None;
    }
    let rel = va.checked_sub(iova).filter(|&r| r < length)?;
    let off = rel.checked_add(iova & (page_size - 1))?;
    let idx = usize::try_from(off / page_size).ok()?;
    Some((idx, off & (page_size - 1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fr(state: FrState, key: u32) -> RegionInfo {
        RegionInfo {
            kind: MrKind::FastReg,
            state,
            key,
            same_pd: true,
            max_pages: 4,
        }
    }

    fn req(key: u32) -> RegRequest {
        RegRequest {
            key,
            iova: 0x1_0000_0100,
            length: 3 * 4096,
            page_size: 4096,
            npages: 4,
            access: ACCESS_LOCAL_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_WRITE,
        }
    }

    #[test]
    fn keys() {
        assert_eq!(key_index(0x1234_56ab), 0x12_3456);
        assert_eq!(key_byte(0x1234_56ab), 0xab);
        assert_eq!(with_key_byte(0x1234_56ab, 0x07), 0x1234_5607);
    }

    #[test]
    fn access_rules() {
        assert!(access_ok(0));
        assert!(access_ok(ACCESS_REMOTE_READ));
        assert!(access_ok(
            ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC
        ));
        assert!(access_ok(ACCESS_LOCAL_WRITE | (1 << 20)));
        assert!(!access_ok(ACCESS_REMOTE_WRITE));
        assert!(!access_ok(ACCESS_REMOTE_ATOMIC | ACCESS_REMOTE_READ));
        assert!(!access_ok(1 << 5));
        assert!(!access_ok(1 << 30));
        // FLUSH: global visibility may be granted, persistence not.
        assert!(access_ok(ACCESS_FLUSH_GLOBAL | ACCESS_REMOTE_READ));
        assert!(!access_ok(super::super::qp::ACCESS_FLUSH_PERSISTENT));
    }

    #[test]
    fn registration() {
        let k = 0x0000_0501;
        assert_eq!(check_reg(Some(&fr(FrState::Free, 0x500)), &req(k)), Ok(()));
        // Not a fast-reg MR, or none.
        let mut plain = fr(FrState::Valid, 0x500);
        plain.kind = MrKind::Plain;
        assert_eq!(check_reg(Some(&plain), &req(k)), Err(RegError::NotFastReg));
        assert_eq!(check_reg(None, &req(k)), Err(RegError::NotFastReg));
        // Valid MR: must be invalidated first.
        assert_eq!(
            check_reg(Some(&fr(FrState::Valid, 0x500)), &req(k)),
            Err(RegError::NotFree)
        );
        let mut other = fr(FrState::Free, 0x500);
        other.same_pd = false;
        assert_eq!(check_reg(Some(&other), &req(k)), Err(RegError::WrongPd));
        let m = fr(FrState::Free, 0x500);
        let mut r = req(k);
        r.npages = 5;
        assert_eq!(check_reg(Some(&m), &r), Err(RegError::TooManyPages));
        // 0x100 + 3 pages needs 4 pages.
        r = req(k);
        r.npages = 3;
        assert_eq!(check_reg(Some(&m), &r), Err(RegError::BadLength));
        r = req(k);
        r.iova = u64::MAX - 10;
        assert_eq!(check_reg(Some(&m), &r), Err(RegError::BadLength));
        for ps in [0, 2048, 4096 + 1, 1 << 31] {
            r = req(k);
            r.page_size = ps;
            assert_eq!(check_reg(Some(&m), &r), Err(RegError::BadPageSize), "{ps}");
        }
        r = req(k);
        r.access = ACCESS_REMOTE_WRITE;
        assert_eq!(check_reg(Some(&m), &r), Err(RegError::BadAccess));
        assert_eq!(RegError::NotFree.status(), WcStatus::LocProtErr);
        assert_eq!(RegError::TooManyPages.status(), WcStatus::LocQpOpErr);
        // A larger page size needs fewer pages.
        r = req(k);
        r.page_size = 1 << 16;
        r.npages = 1;
        assert_eq!(check_reg(Some(&m), &r), Ok(()));
    }

    #[test]
    fn invalidation() {
        let v = fr(FrState::Valid, 0x501);
        assert_eq!(check_invalidate(Some(&v), 0x501), Ok(()));
        // A free region may be invalidated again with its key.
        assert_eq!(
            check_invalidate(Some(&fr(FrState::Free, 0x501)), 0x501),
            Ok(())
        );
        assert_eq!(check_invalidate(Some(&v), 0x502), Err(InvError::BadKey));
        assert_eq!(check_invalidate(None, 0x501), Err(InvError::BadKey));
        let mut o = v;
        o.same_pd = false;
        assert_eq!(check_invalidate(Some(&o), 0x501), Err(InvError::WrongPd));
        o = v;
        o.kind = MrKind::Plain;
        assert_eq!(
            check_invalidate(Some(&o), 0x501),
            Err(InvError::NotInvalidatable)
        );
        assert_eq!(InvError::BadKey.local_status(), WcStatus::LocProtErr);
    }

    #[test]
    fn wqe_round_trip() {
        use super::super::wqe::{
            decode_send, write_send_wqe, OpcodeSet, SendLimits, SendOpcode, SendPayload,
        };
        let r = RegRequest {
            key: 0x1234_5678,
            iova: 0xffff_8880_1234_5100,
            length: 9984,
            page_size: 1 << 16,
            npages: 512,
            access: ACCESS_LOCAL_WRITE | ACCESS_REMOTE_READ,
        };
        let mut w = SendWqe::new(9, SendOpcode::RegMr);
        r.to_wqe(&mut w);
        let mut entry = [0u8; 128];
        write_send_wqe(&mut entry, &w, SendPayload::Sges(&[])).unwrap();
        let lim = |opcodes| SendLimits {
            max_sge: 4,
            max_inline: 0,
            max_msg_size: 1 << 31,
            opcodes,
            ud: false,
        };
        let v = decode_send(&entry, &lim(OpcodeSet::RC_KERNEL)).unwrap();
        assert_eq!(RegRequest::from_wqe(&v.wqe), r);
        // User QPs cannot post it.
        assert!(decode_send(&entry, &lim(OpcodeSet::RC)).is_err());
    }

    #[test]
    fn usable_keys() {
        assert!(key_usable(&fr(FrState::Valid, 0x501), 0x501));
        assert!(!key_usable(&fr(FrState::Valid, 0x501), 0x500));
        assert!(!key_usable(&fr(FrState::Free, 0x501), 0x501));
    }

    #[test]
    fn locating() {
        let (iova, len) = (0x1_0000_0100u64, 3 * 4096u64);
        assert_eq!(locate(iova, len, 4096, iova), Some((0, 0x100)));
        assert_eq!(locate(iova, len, 4096, iova + 4096 - 0x100), Some((1, 0)));
        assert_eq!(locate(iova, len, 4096, iova + len - 1), Some((3, 0xff)));
        assert_eq!(locate(iova, len, 4096, iova + len), None);
        assert_eq!(locate(iova, len, 4096, iova - 1), None);
        assert_eq!(
            locate(iova, len, 1 << 16, iova + 5000),
            Some((0, 0x100 + 5000))
        );
        assert_eq!(locate(iova, len, 3000, iova), None);
    }
}
