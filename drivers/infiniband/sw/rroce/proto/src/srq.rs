// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Shared receive queues: attribute checks and the limit event.
//!
//! An SRQ is a receive ring (same format as a QP's RQ, see `ring` and
//! `wqe`) that several QPs consume from.  This module holds the parts
//! that need no kernel: which `create_srq`/`modify_srq` attributes are
//! accepted, and when `IB_EVENT_SRQ_LIMIT_REACHED` is due.
//!
//! Choices made here:
//!
//! * `max_wr` must be 1..=`max_srq_wr` and `max_sge` at most `max_srq_sge`
//!   (0 is taken as 1); the ring holds the next power of two.
//! * `srq_limit` at creation is checked (at most `max_wr`) but does not
//!   arm the limit, as the verbs API says; `modify_srq(IB_SRQ_LIMIT)` arms
//!   it with a limit of at most the SRQ's capacity (0 disarms).
//! * Resizing (`IB_SRQ_MAX_WR`): 1..=`max_srq_wr` entries, never fewer
//!   than the limit that stays armed (or is armed with it) and never fewer
//!   than the WQEs still posted (the ring transfer refuses: `EINVAL`); the
//!   ring again holds the next power of two.  Unknown mask bits give
//!   `EINVAL`.
//! * The event fires once, when a receive WQE is taken and fewer than
//!   `srq_limit` WQEs remain posted; the limit is then disarmed until the
//!   next `modify_srq(IB_SRQ_LIMIT)`.

/// `IB_SRQ_MAX_WR` / `IBV_SRQ_MAX_WR`.
pub const SRQ_MAX_WR: u32 = 1 << 0;
/// `IB_SRQ_LIMIT` / `IBV_SRQ_LIMIT`.
pub const SRQ_LIMIT: u32 = 1 << 1;

/// Why an SRQ attribute was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SrqError {
    /// Bad value (`EINVAL`).
    Invalid,
    /// Valid but not implemented (`EOPNOTSUPP`).
    NotSupported,
}

impl SrqError {
    /// The positive errno value.
    pub const fn errno(self) -> i32 {
        match self {
            SrqError::Invalid => 22,
            SrqError::NotSupported => 95,
        }
    }
}

/// Device limits for SRQs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrqLimits {
    /// `max_srq_wr`.
    pub max_wr: u32,
    /// `max_srq_sge`.
    pub max_sge: u32,
}

/// Checks `create_srq` attributes; returns the SGE count to size the
/// entries for (at least 1).  The limit given at creation is ignored
/// (`ibv_create_srq(3)`, rdma_rxe, mlx5): only `modify_srq` arms one.
pub fn check_create(max_wr: u32, max_sge: u32, lim: &SrqLimits) -> Result<u32, SrqError> {
    if max_wr == 0 || max_wr > lim.max_wr || max_sge > lim.max_sge {
        return Err(SrqError::Invalid);
    }
    Ok(max_sge.max(1))
}

/// What a valid `modify_srq` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrqModify {
    /// Resize to at least this many entries (`IB_SRQ_MAX_WR`).
    pub resize: Option<u32>,
    /// Arm the limit with this value, 0 disarms (`IB_SRQ_LIMIT`).
    pub arm: Option<u32>,
}

/// Checks `modify_srq` of `mask` for an SRQ of `entries` slots whose armed
/// limit is `armed` (0: none).  The limit set (or kept) may not exceed the
/// SRQ's size after the call.
pub fn check_modify(
    mask: u32,
    max_wr: u32,
    srq_limit: u32,
    entries: u32,
    armed: u32,
    lim: &SrqLimits,
) -> Result<SrqModify, SrqError> {
    if mask & !(SRQ_MAX_WR | SRQ_LIMIT) != 0 {
        return Err(SrqError::Invalid);
    }
    let resize = if mask & SRQ_MAX_WR != 0 {
        if max_wr == 0 || max_wr > lim.max_wr {
            return Err(SrqError::Invalid);
        }
        Some(max_wr)
    } else {
        None
    };
    let size = resize.unwrap_or(entries);
    let arm = (mask & SRQ_LIMIT != 0).then_some(srq_limit);
    if arm.unwrap_or(armed) > size {
        return Err(SrqError::Invalid);
    }
    Ok(SrqModify { resize, arm })
}

/// The limit watch of one SRQ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LimitWatch {
    limit: u32,
}

impl LimitWatch {
    /// Arms the watch with `limit` (0 disarms).
    pub fn arm(&mut self, limit: u32) {
        self.limit = limit;
    }

    /// The armed limit, 0 if disarmed (what `query_srq` reports).
    pub const fn limit(&self) -> u32 {
        self.limit
    }

    /// A WQE was taken and `remaining` are still posted: whether the limit
    /// event is due now (then the watch is disarmed).
    pub fn on_taken(&mut self, remaining: u32) -> bool {
        if self.limit != 0 && remaining < self.limit {
            self.limit = 0;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIM: SrqLimits = SrqLimits {
        max_wr: 1024,
        max_sge: 32,
    };

    #[test]
    fn create_checks() {
        assert_eq!(check_create(16, 1, &LIM), Ok(1));
        assert_eq!(check_create(16, 0, &LIM), Ok(1));
        assert_eq!(check_create(1024, 32, &LIM), Ok(32));
        assert_eq!(check_create(0, 1, &LIM), Err(SrqError::Invalid));
        assert_eq!(check_create(1025, 1, &LIM), Err(SrqError::Invalid));
        assert_eq!(check_create(16, 33, &LIM), Err(SrqError::Invalid));
        assert_eq!(check_create(u32::MAX, 1, &LIM), Err(SrqError::Invalid));
    }

    #[test]
    fn modify_checks() {
        let m = |mask, max_wr, limit, entries, armed| {
            check_modify(mask, max_wr, limit, entries, armed, &LIM)
        };
        let ok = |resize, arm| Ok(SrqModify { resize, arm });
        assert_eq!(m(0, 0, 0, 16, 0), ok(None, None));
        assert_eq!(m(SRQ_LIMIT, 0, 5, 16, 0), ok(None, Some(5)));
        assert_eq!(m(SRQ_LIMIT, 0, 0, 16, 3), ok(None, Some(0)));
        assert_eq!(m(SRQ_LIMIT, 0, 16, 16, 0), ok(None, Some(16)));
        assert_eq!(m(SRQ_LIMIT, 0, 17, 16, 0), Err(SrqError::Invalid));
        assert_eq!(m(4, 0, 0, 16, 0), Err(SrqError::Invalid));
        // Resizing: up, down, to the device maximum.
        assert_eq!(m(SRQ_MAX_WR, 32, 0, 16, 0), ok(Some(32), None));
        assert_eq!(m(SRQ_MAX_WR, 4, 0, 16, 0), ok(Some(4), None));
        assert_eq!(m(SRQ_MAX_WR, 1024, 0, 16, 0), ok(Some(1024), None));
        assert_eq!(m(SRQ_MAX_WR, 0, 0, 16, 0), Err(SrqError::Invalid));
        assert_eq!(m(SRQ_MAX_WR, 1025, 0, 16, 0), Err(SrqError::Invalid));
        // The armed limit must fit the new size, unless re-armed with it.
        assert_eq!(m(SRQ_MAX_WR, 4, 0, 16, 8), Err(SrqError::Invalid));
        assert_eq!(m(SRQ_MAX_WR | SRQ_LIMIT, 4, 2, 16, 8), ok(Some(4), Some(2)));
        assert_eq!(
            m(SRQ_MAX_WR | SRQ_LIMIT, 32, 99, 16, 0),
            Err(SrqError::Invalid)
        );
        assert_eq!(
            m(SRQ_MAX_WR | SRQ_LIMIT, 32, 20, 16, 0),
            ok(Some(32), Some(20))
        );
        assert_eq!(SrqError::Invalid.errno(), 22);
        assert_eq!(SrqError::NotSupported.errno(), 95);
    }

    #[test]
    fn limit_fires_once_then_disarms() {
        let mut w = LimitWatch::default();
        // Disarmed: never fires.
        assert!(!w.on_taken(0));
        w.arm(4);
        assert_eq!(w.limit(), 4);
        assert!(!w.on_taken(6));
        assert!(!w.on_taken(4));
        assert!(w.on_taken(3));
        assert_eq!(w.limit(), 0);
        assert!(!w.on_taken(2));
        assert!(!w.on_taken(0));
        // Re-armed below the current count: fires at the next take.
        w.arm(10);
        assert!(w.on_taken(2));
        w.arm(0);
        assert!(!w.on_taken(0));
    }
}
