// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! The queue-pair state machine and `modify_qp` attribute checks.
//!
//! A QP moves through RESET → INIT → RTR → RTS, may be paused in SQD (send
//! queue drained) and, for UC/UD/GSI, parked in SQE (send queue error) by the
//! datapath; every state can be sent back to RESET, and every state except
//! RESET to ERR.  For each `(current, next, type)` the IBTA (and ib_core's
//! `ib_modify_qp_is_ok`, which every verbs consumer is used to) fixes which
//! attributes a `modify_qp` call *must* carry and which it *may* carry;
//! [`check_transition`] enforces exactly those rules for RC, UC, UD and GSI.
//! [`QpAttrs::apply`] then checks the attribute values against what rroce
//! implements and stores the masked ones, all or nothing.
//!
//! Choices made here, where the spec or the existing drivers leave room:
//!
//! * Attribute-mask bits outside the standard range (bits 0..=20, which
//!   includes `RATE_LIMIT` and the reserved bits) fail with `EOPNOTSUPP`, as
//!   rxe and rdmavt do.  Every other rejection is `EINVAL`, as ib_core's
//!   table check gives, except `ALT_PATH`: rroce has no automatic path
//!   migration, so a transition that would accept an alternate path fails with
//!   `EOPNOTSUPP` instead.  `PATH_MIG_STATE` is accepted only as `MIGRATED`.
//! * RESET → ERR is rejected, as in ib_core's table.
//! * `CUR_STATE`, if present, must name the QP's actual state (the IBTA "invalid
//!   current QP state" error); the table is always looked up with the actual
//!   state.  It is only legal for transitions out of RTR, RTS, SQD or SQE.
//! * While the send queue is still draining in SQD, only RESET and ERR are
//!   accepted (rxe allows only ERR; the IBTA lets any state go to RESET).
//! * PSNs wider than 24 bits are silently truncated to 24 bits, exactly as
//!   rxe (`& BTH_PSN_MASK`) and mlx5 (24-bit `MLX5_SET`) do: both peers apply
//!   the same truncation, so an application that picks its initial PSN with
//!   `rand()` keeps working.  A destination QPN wider than 24 bits is
//!   rejected instead, because truncating it would address a different QP.
//! * `retry_cnt == 7`, like `rnr_retry == 7`, means "retry forever", as in
//!   rdma_rxe; the IBTA (and hardware) reserve the infinite value for
//!   `rnr_retry` only ([`RetryState::on_timeout`]).
//!
//! Nothing here panics on any input.

use core::ops::{BitAnd, BitOr, BitOrAssign};

use super::link::IbMtu;
use super::psn::{PathMtu, PSN_MASK};

/// `EINVAL` (asm-generic numbering, as on x86, arm64, riscv, powerpc, s390).
pub const EINVAL: i32 = 22;
/// `EOPNOTSUPP` (asm-generic numbering; alpha, mips, parisc and sparc differ).
pub const EOPNOTSUPP: i32 = 95;

/// A QP state, numbered as `enum ib_qp_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u32)]
pub enum QpState {
    /// Reset: no traffic, the state after creation.
    #[default]
    Reset = 0,
    /// Initialised: receives may be posted, no traffic yet.
    Init = 1,
    /// Ready to receive.
    Rtr = 2,
    /// Ready to send.
    Rts = 3,
    /// Send queue drain(ed): no new send WQEs are started.
    Sqd = 4,
    /// Send queue error (UC/UD/GSI only, entered by the datapath).
    Sqe = 5,
    /// Error: everything is flushed.
    Err = 6,
}

impl QpState {
    /// All states in `enum ib_qp_state` order.
    pub const ALL: [QpState; 7] = [
        QpState::Reset,
        QpState::Init,
        QpState::Rtr,
        QpState::Rts,
        QpState::Sqd,
        QpState::Sqe,
        QpState::Err,
    ];

    /// From an `enum ib_qp_state` value; `None` for anything else.
    pub const fn from_ib(v: u32) -> Option<QpState> {
        match v {
            0 => Some(QpState::Reset),
            1 => Some(QpState::Init),
            2 => Some(QpState::Rtr),
            3 => Some(QpState::Rts),
            4 => Some(QpState::Sqd),
            5 => Some(QpState::Sqe),
            6 => Some(QpState::Err),
            _ => None,
        }
    }

    /// The `enum ib_qp_state` value.
    #[inline]
    pub const fn to_ib(self) -> u32 {
        self as u32
    }

    /// Whether the datapath may move a QP of type `ty` from this state to
    /// SQE after a send error: only from RTS, and only for the unreliable
    /// types (an RC QP goes to ERR instead).
    pub const fn can_enter_sqe(self, ty: QpType) -> bool {
        matches!(self, QpState::Rts) && !ty.is_reliable()
    }
}

/// A QP type rroce supports, numbered as `enum ib_qp_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum QpType {
    /// General services interface, QP1 (`IB_QPT_GSI`).
    Gsi = 1,
    /// Reliable connected (`IB_QPT_RC`).
    Rc = 2,
    /// Unreliable connected (`IB_QPT_UC`).
    Uc = 3,
    /// Unreliable datagram (`IB_QPT_UD`).
    Ud = 4,
    /// XRC initiator (`IB_QPT_XRC_INI`): an RC requester whose requests
    /// name an XRC SRQ of the target's domain; no receive queue.
    XrcIni = 9,
    /// XRC target (`IB_QPT_XRC_TGT`): an RC responder that receives into
    /// the XRC SRQs of its domain; no send or receive queue of its own.
    XrcTgt = 10,
}

impl QpType {
    /// All supported types.
    pub const ALL: [QpType; 6] = [
        QpType::Rc,
        QpType::Uc,
        QpType::Ud,
        QpType::Gsi,
        QpType::XrcIni,
        QpType::XrcTgt,
    ];

    /// From an `enum ib_qp_type` value; `None` for SMI, raw, driver types
    /// and anything else rroce does not implement.
    pub const fn from_ib(v: u32) -> Option<QpType> {
        match v {
            1 => Some(QpType::Gsi),
            2 => Some(QpType::Rc),
            3 => Some(QpType::Uc),
            4 => Some(QpType::Ud),
            9 => Some(QpType::XrcIni),
            10 => Some(QpType::XrcTgt),
            _ => None,
        }
    }

    /// RC or one of the XRC halves: acknowledged, retried, never in SQE.
    pub const fn is_reliable(self) -> bool {
        matches!(self, QpType::Rc | QpType::XrcIni | QpType::XrcTgt)
    }

    /// Either XRC half.
    pub const fn is_xrc(self) -> bool {
        matches!(self, QpType::XrcIni | QpType::XrcTgt)
    }

    /// The `enum ib_qp_type` value.
    #[inline]
    pub const fn to_ib(self) -> u32 {
        self as u32
    }
}

/// A `modify_qp` attribute mask, with the bit values of
/// `enum ib_qp_attr_mask`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AttrMask(u32);

impl AttrMask {
    /// No attributes.
    pub const EMPTY: AttrMask = AttrMask(0);
    /// `qp_state`: the state to move to.
    pub const STATE: AttrMask = AttrMask(1 << 0);
    /// `cur_qp_state`: the state the caller believes the QP is in.
    pub const CUR_STATE: AttrMask = AttrMask(1 << 1);
    /// `en_sqd_async_notify`: raise an event once SQD has drained.
    pub const EN_SQD_ASYNC_NOTIFY: AttrMask = AttrMask(1 << 2);
    /// `qp_access_flags`: which remote operations the responder accepts.
    pub const ACCESS_FLAGS: AttrMask = AttrMask(1 << 3);
    /// `pkey_index`.
    pub const PKEY_INDEX: AttrMask = AttrMask(1 << 4);
    /// `port_num`.
    pub const PORT: AttrMask = AttrMask(1 << 5);
    /// `qkey`.
    pub const QKEY: AttrMask = AttrMask(1 << 6);
    /// `ah_attr`: the primary path (address vector).
    pub const AV: AttrMask = AttrMask(1 << 7);
    /// `path_mtu`.
    pub const PATH_MTU: AttrMask = AttrMask(1 << 8);
    /// `timeout`: the local ACK timeout exponent.
    pub const TIMEOUT: AttrMask = AttrMask(1 << 9);
    /// `retry_cnt`.
    pub const RETRY_CNT: AttrMask = AttrMask(1 << 10);
    /// `rnr_retry`.
    pub const RNR_RETRY: AttrMask = AttrMask(1 << 11);
    /// `rq_psn`: the first PSN expected by the responder.
    pub const RQ_PSN: AttrMask = AttrMask(1 << 12);
    /// `max_rd_atomic`: outstanding RDMA READ/atomics as requester.
    pub const MAX_QP_RD_ATOMIC: AttrMask = AttrMask(1 << 13);
    /// `alt_ah_attr` and friends: the alternate path.
    pub const ALT_PATH: AttrMask = AttrMask(1 << 14);
    /// `min_rnr_timer`: the RNR NAK timer code the responder sends.
    pub const MIN_RNR_TIMER: AttrMask = AttrMask(1 << 15);
    /// `sq_psn`: the first PSN the requester sends.
    pub const SQ_PSN: AttrMask = AttrMask(1 << 16);
    /// `max_dest_rd_atomic`: outstanding RDMA READ/atomics as responder.
    pub const MAX_DEST_RD_ATOMIC: AttrMask = AttrMask(1 << 17);
    /// `path_mig_state`.
    pub const PATH_MIG_STATE: AttrMask = AttrMask(1 << 18);
    /// `cap`: queue sizes (resizing is not part of any transition).
    pub const CAP: AttrMask = AttrMask(1 << 19);
    /// `dest_qp_num`.
    pub const DEST_QPN: AttrMask = AttrMask(1 << 20);
    /// `rate_limit` (raw packet QPs only; outside the standard bits).
    pub const RATE_LIMIT: AttrMask = AttrMask(1 << 25);
    /// The standard bits, `IB_QP_ATTR_STANDARD_BITS` (0..=20).
    pub const STANDARD: AttrMask = AttrMask((1 << 21) - 1);

    /// From raw bits, keeping unknown ones (they are rejected later).
    #[inline]
    pub const fn from_bits_retain(bits: u32) -> AttrMask {
        AttrMask(bits)
    }

    /// The raw bits.
    #[inline]
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// No bit set.
    #[inline]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Every bit of `other` is set in `self`.
    #[inline]
    pub const fn contains(self, other: AttrMask) -> bool {
        self.0 & other.0 == other.0
    }

    /// Some bit of `other` is set in `self`.
    #[inline]
    pub const fn intersects(self, other: AttrMask) -> bool {
        self.0 & other.0 != 0
    }

    /// `self | other`.
    #[inline]
    #[must_use]
    pub const fn union(self, other: AttrMask) -> AttrMask {
        AttrMask(self.0 | other.0)
    }

    /// `self & other`.
    #[inline]
    #[must_use]
    pub const fn intersection(self, other: AttrMask) -> AttrMask {
        AttrMask(self.0 & other.0)
    }

    /// `self & !other`.
    #[inline]
    #[must_use]
    pub const fn difference(self, other: AttrMask) -> AttrMask {
        AttrMask(self.0 & !other.0)
    }
}

impl BitOr for AttrMask {
    type Output = AttrMask;
    #[inline]
    fn bitor(self, rhs: AttrMask) -> AttrMask {
        self.union(rhs)
    }
}

impl BitOrAssign for AttrMask {
    #[inline]
    fn bitor_assign(&mut self, rhs: AttrMask) {
        *self = self.union(rhs);
    }
}

impl BitAnd for AttrMask {
    type Output = AttrMask;
    #[inline]
    fn bitand(self, rhs: AttrMask) -> AttrMask {
        self.intersection(rhs)
    }
}

/// Why a `modify_qp` was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpError {
    /// Mask bits outside [`AttrMask::STANDARD`] (`EOPNOTSUPP`).
    UnknownMaskBits(AttrMask),
    /// The state change itself is not allowed (`EINVAL`).
    InvalidTransition {
        /// The actual current state.
        cur: QpState,
        /// The requested state.
        next: QpState,
    },
    /// Required attributes for the transition are absent (`EINVAL`).
    MissingAttrs(AttrMask),
    /// Attributes that the transition does not accept (`EINVAL`).
    DisallowedAttrs(AttrMask),
    /// `CUR_STATE` names a state other than the actual one (`EINVAL`).
    CurStateMismatch {
        /// What the caller said.
        claimed: QpState,
        /// What the QP is in.
        actual: QpState,
    },
    /// The QP is in SQD but its send queue has not drained yet (`EINVAL`).
    SqDraining,
    /// The value of this attribute is out of range (`EINVAL`).
    InvalidValue(AttrMask),
    /// This attribute is legal here but rroce does not implement it
    /// (`EOPNOTSUPP`).
    Unsupported(AttrMask),
}

impl QpError {
    /// The positive errno the verbs call fails with (asm-generic numbering).
    pub const fn errno(self) -> i32 {
        match self {
            QpError::UnknownMaskBits(_) | QpError::Unsupported(_) => EOPNOTSUPP,
            _ => EINVAL,
        }
    }
}

/// Shorthands for the parameter table.
const PKEY: AttrMask = AttrMask::PKEY_INDEX;
const PORT: AttrMask = AttrMask::PORT;
const QKEY: AttrMask = AttrMask::QKEY;
const ACCESS: AttrMask = AttrMask::ACCESS_FLAGS;
const CUR: AttrMask = AttrMask::CUR_STATE;
const ALT: AttrMask = AttrMask::ALT_PATH;
const MIG: AttrMask = AttrMask::PATH_MIG_STATE;
const RNR_TIMER: AttrMask = AttrMask::MIN_RNR_TIMER;
const NONE: AttrMask = AttrMask::EMPTY;

/// Mask values joined with `|` in a `const` context.
const fn any(mut masks: &[AttrMask]) -> AttrMask {
    let mut bits = 0;
    while let [first, rest @ ..] = masks {
        bits |= first.0;
        masks = rest;
    }
    AttrMask(bits)
}

/// `(required, optional)` attributes of the transition `cur → next` for a QP
/// of type `ty`, or `None` if the transition is not allowed at all.
///
/// `STATE` appears in neither set; it is always allowed.  A `modify_qp`
/// without `STATE` is the transition `cur → cur`.
pub const fn transition_params(
    cur: QpState,
    next: QpState,
    ty: QpType,
) -> Option<(AttrMask, AttrMask)> {
    use QpState::*;
    use QpType::*;

    // Attributes that may be changed while in RTS, or on the way back to RTS
    // from SQD.
    let rts_opt = match ty {
        Rc | XrcTgt => any(&[CUR, ACCESS, ALT, MIG, RNR_TIMER]),
        Uc | XrcIni => any(&[CUR, ACCESS, ALT, MIG]),
        Ud | Gsi => any(&[CUR, QKEY]),
    };
    // The addressing attributes set on RESET → INIT and changeable in INIT.
    let init_attrs = match ty {
        Rc | Uc | XrcIni | XrcTgt => any(&[PKEY, PORT, ACCESS]),
        Ud => any(&[PKEY, PORT, QKEY]),
        Gsi => any(&[PKEY, QKEY]),
    };

    let params = match (cur, next) {
        // Back to RESET from anywhere, to ERR from anywhere but RESET, and
        // ERR → ERR: no attributes.
        (_, Reset) | (Init | Rtr | Rts | Sqd | Sqe | Err, Err) => (NONE, NONE),
        (Reset, Init) => (init_attrs, NONE),
        (Init, Init) => (NONE, init_attrs),
        (Init, Rtr) => match ty {
            Rc | XrcTgt => (
                any(&[
                    AttrMask::AV,
                    AttrMask::PATH_MTU,
                    AttrMask::DEST_QPN,
                    AttrMask::RQ_PSN,
                    AttrMask::MAX_DEST_RD_ATOMIC,
                    RNR_TIMER,
                ]),
                any(&[ALT, ACCESS, PKEY]),
            ),
            Uc | XrcIni => (
                any(&[
                    AttrMask::AV,
                    AttrMask::PATH_MTU,
                    AttrMask::DEST_QPN,
                    AttrMask::RQ_PSN,
                ]),
                any(&[ALT, ACCESS, PKEY]),
            ),
            Ud | Gsi => (NONE, any(&[PKEY, QKEY])),
        },
        (Rtr, Rts) => {
            let req = match ty {
                Rc | XrcIni => any(&[
                    AttrMask::TIMEOUT,
                    AttrMask::RETRY_CNT,
                    AttrMask::RNR_RETRY,
                    AttrMask::SQ_PSN,
                    AttrMask::MAX_QP_RD_ATOMIC,
                ]),
                XrcTgt => any(&[AttrMask::TIMEOUT, AttrMask::SQ_PSN]),
                Uc | Ud | Gsi => AttrMask::SQ_PSN,
            };
            (req, rts_opt)
        }
        (Rts | Sqd, Rts) => (NONE, rts_opt),
        (Rts, Sqd) => (NONE, AttrMask::EN_SQD_ASYNC_NOTIFY),
        (Sqd, Sqd) => {
            let rc = any(&[
                PORT,
                AttrMask::AV,
                AttrMask::TIMEOUT,
                AttrMask::RETRY_CNT,
                AttrMask::RNR_RETRY,
                AttrMask::MAX_QP_RD_ATOMIC,
                AttrMask::MAX_DEST_RD_ATOMIC,
                ALT,
                ACCESS,
                PKEY,
                RNR_TIMER,
                MIG,
            ]);
            let opt = match ty {
                Rc => rc,
                Uc => any(&[AttrMask::AV, ALT, ACCESS, PKEY, MIG]),
                // As ib_core: the initiator has no responder attributes,
                // the target no requester ones.
                XrcIni => rc.difference(any(&[AttrMask::MAX_DEST_RD_ATOMIC, RNR_TIMER])),
                XrcTgt => rc.difference(any(&[
                    AttrMask::RETRY_CNT,
                    AttrMask::RNR_RETRY,
                    AttrMask::MAX_QP_RD_ATOMIC,
                ])),
                Ud | Gsi => any(&[PKEY, QKEY]),
            };
            (NONE, opt)
        }
        (Sqe, Rts) => {
            let opt = match ty {
                // An RC or XRC QP never is in SQE; the transition exists
                // but takes nothing.
                Rc | XrcIni | XrcTgt => NONE,
                Uc => any(&[CUR, ACCESS]),
                Ud | Gsi => any(&[CUR, QKEY]),
            };
            (NONE, opt)
        }
        _ => return None,
    };
    Some(params)
}

/// Whether `modify_qp` with attribute mask `mask` may move a QP of type `ty`
/// from its actual state `cur` to `next`.
///
/// This checks the mask only; [`QpAttrs::apply`] also checks the values.
pub fn check_transition(
    cur: QpState,
    next: QpState,
    ty: QpType,
    mask: AttrMask,
) -> Result<(), QpError> {
    let unknown = mask.difference(AttrMask::STANDARD);
    if !unknown.is_empty() {
        return Err(QpError::UnknownMaskBits(unknown));
    }
    if mask.contains(AttrMask::CUR_STATE)
        && !matches!(
            cur,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
        )
    {
        return Err(QpError::DisallowedAttrs(AttrMask::CUR_STATE));
    }
    let Some((req, opt)) = transition_params(cur, next, ty) else {
        return Err(QpError::InvalidTransition { cur, next });
    };
    let missing = req.difference(mask);
    if !missing.is_empty() {
        return Err(QpError::MissingAttrs(missing));
    }
    let extra = mask.difference(req.union(opt).union(AttrMask::STATE));
    if !extra.is_empty() {
        return Err(QpError::DisallowedAttrs(extra));
    }
    Ok(())
}

/// `IB_ACCESS_LOCAL_WRITE`.
pub const ACCESS_LOCAL_WRITE: u32 = 1 << 0;
/// `IB_ACCESS_REMOTE_WRITE`.
pub const ACCESS_REMOTE_WRITE: u32 = 1 << 1;
/// `IB_ACCESS_REMOTE_READ`.
pub const ACCESS_REMOTE_READ: u32 = 1 << 2;
/// `IB_ACCESS_REMOTE_ATOMIC`.
pub const ACCESS_REMOTE_ATOMIC: u32 = 1 << 3;
/// `IB_ACCESS_FLUSH_GLOBAL`: FLUSH with the global placement type.
pub const ACCESS_FLUSH_GLOBAL: u32 = 1 << 8;
/// `IB_ACCESS_FLUSH_PERSISTENT`: FLUSH with the persistent placement type.
pub const ACCESS_FLUSH_PERSISTENT: u32 = 1 << 9;
/// `IB_ACCESS_ON_DEMAND`: meaningless for a QP, but applications pass
/// their regions' flags (rdma-core's ODP tests do); accepted and kept.
pub const ACCESS_ON_DEMAND: u32 = 1 << 6;
/// The access flags a QP accepts; any other bit is `EINVAL`.  (rdma_cm
/// sets both FLUSH bits on the QPs of a device that advertises FLUSH.)
pub const QP_ACCESS_SUPPORTED: u32 = ACCESS_LOCAL_WRITE
    | ACCESS_ON_DEMAND
    | ACCESS_REMOTE_WRITE
    | ACCESS_REMOTE_READ
    | ACCESS_REMOTE_ATOMIC
    | ACCESS_FLUSH_GLOBAL
    | ACCESS_FLUSH_PERSISTENT;

/// The access flags a FLUSH with placement type bits `placement` needs of
/// the QP and of the region.
pub const fn flush_access(placement: u8) -> u32 {
    let mut a = 0;
    if placement & super::hdr::FLUSH_GLOBAL != 0 {
        a |= ACCESS_FLUSH_GLOBAL;
    }
    if placement & super::hdr::FLUSH_PERSISTENT != 0 {
        a |= ACCESS_FLUSH_PERSISTENT;
    }
    a
}

/// `IB_MIG_MIGRATED`: the only path-migration state without APM.
pub const MIG_MIGRATED: u32 = 0;

/// The only port number of an rroce device.
pub const PORT_NUM: u32 = 1;
/// Entries in the P_Key table (just the default P_Key).
pub const PKEY_TABLE_LEN: u16 = 1;
/// Largest local ACK timeout exponent.
pub const MAX_TIMEOUT: u8 = 31;
/// Largest `retry_cnt` / `rnr_retry`.
pub const MAX_RETRY: u8 = 7;
/// `rnr_retry` value that means "retry RNR NAKs forever".
pub const RNR_RETRY_INFINITE: u8 = 7;
/// `retry_cnt` that never runs out (rdma_rxe's convention, see
/// [`RetryState::on_timeout`]).
pub const RETRY_CNT_INFINITE: u8 = 7;
/// Largest RNR NAK timer code.
pub const MAX_RNR_TIMER: u8 = 31;
/// Largest QP number (24 bits).
pub const QPN_MAX: u32 = 0x00FF_FFFF;

/// What the device and its port allow, as reported by `query_device` and
/// `query_port`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceLimits {
    /// The port's active MTU; `path_mtu` may not exceed it.
    pub active_mtu: IbMtu,
    /// `max_qp_init_rd_atom`: bound for `max_rd_atomic`.
    pub max_qp_init_rd_atom: u32,
    /// `max_qp_rd_atom`: bound for `max_dest_rd_atomic`.
    pub max_qp_rd_atom: u32,
}

/// The attributes of a QP, or those of one `modify_qp` request, with the
/// field types of `struct ib_qp_attr`.
///
/// In a request only the fields selected by the mask mean anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpAttrs {
    /// The state (in a request, the state to move to).
    pub state: QpState,
    /// In a request with `CUR_STATE`: the state the caller believes the QP is
    /// in.  Not used in the stored attributes.
    pub cur_state: QpState,
    /// Raise the SQ-drained event when an RTS → SQD drain completes.
    pub en_sqd_async_notify: bool,
    /// The send queue is still draining after RTS → SQD.  Set by
    /// [`QpAttrs::apply`], cleared by [`QpAttrs::sq_drained`]; ignored in a
    /// request.
    pub sq_draining: bool,
    /// `IB_ACCESS_*` bits (see [`QP_ACCESS_SUPPORTED`]).
    pub access_flags: u32,
    /// Index into the P_Key table.
    pub pkey_index: u16,
    /// Port number (always [`PORT_NUM`] once set).
    pub port: u32,
    /// Q_Key for UD/GSI.
    pub qkey: u32,
    /// Path MTU as an `enum ib_mtu` code (use [`QpAttrs::mtu`]).
    pub path_mtu: u32,
    /// Local ACK timeout exponent (0 = no timer).
    pub timeout: u8,
    /// Transport retries after a timeout or sequence NAK.
    pub retry_cnt: u8,
    /// Retries after an RNR NAK (7 = infinite).
    pub rnr_retry: u8,
    /// Receive PSN (24 bits once stored).
    pub rq_psn: u32,
    /// Send PSN (24 bits once stored).
    pub sq_psn: u32,
    /// Destination QP number.
    pub dest_qpn: u32,
    /// Outstanding RDMA READ/atomics as requester.
    pub max_rd_atomic: u8,
    /// Outstanding RDMA READ/atomics as responder.
    pub max_dest_rd_atomic: u8,
    /// RNR NAK timer code sent by the responder (see [`rnr_timer_ns`]).
    pub min_rnr_timer: u8,
    /// `enum ib_mig_state`; always [`MIG_MIGRATED`].
    pub path_mig_state: u32,
}

impl Default for QpAttrs {
    /// The attributes of a freshly created QP: RESET, port 1, 256-byte MTU,
    /// everything else zero.
    fn default() -> QpAttrs {
        QpAttrs {
            state: QpState::Reset,
            cur_state: QpState::Reset,
            en_sqd_async_notify: false,
            sq_draining: false,
            access_flags: 0,
            pkey_index: 0,
            port: PORT_NUM,
            qkey: 0,
            path_mtu: PathMtu::Mtu256.ib_enum(),
            timeout: 0,
            retry_cnt: 0,
            rnr_retry: 0,
            rq_psn: 0,
            sq_psn: 0,
            dest_qpn: 0,
            max_rd_atomic: 0,
            max_dest_rd_atomic: 0,
            min_rnr_timer: 0,
            path_mig_state: MIG_MIGRATED,
        }
    }
}

impl QpAttrs {
    /// The path MTU; 256 bytes if the stored code were ever invalid (it cannot
    /// be after [`QpAttrs::apply`]).
    pub const fn mtu(&self) -> PathMtu {
        match PathMtu::from_ib_enum(self.path_mtu) {
            Some(m) => m,
            None => PathMtu::Mtu256,
        }
    }

    /// Checks the values of the attributes in `mask` (not the transition).
    fn check_values(new: &QpAttrs, mask: AttrMask, limits: &DeviceLimits) -> Result<(), QpError> {
        let bad = |m: AttrMask, ok: bool| {
            if mask.contains(m) && !ok {
                Err(QpError::InvalidValue(m))
            } else {
                Ok(())
            }
        };
        if mask.contains(AttrMask::ALT_PATH) {
            return Err(QpError::Unsupported(AttrMask::ALT_PATH));
        }
        bad(
            AttrMask::ACCESS_FLAGS,
            new.access_flags & !QP_ACCESS_SUPPORTED == 0,
        )?;
        bad(AttrMask::PKEY_INDEX, new.pkey_index < PKEY_TABLE_LEN)?;
        bad(AttrMask::PORT, new.port == PORT_NUM)?;
        bad(
            AttrMask::PATH_MTU,
            match PathMtu::from_ib_enum(new.path_mtu) {
                Some(m) => m.ib_enum() <= limits.active_mtu.code(),
                None => false,
            },
        )?;
        bad(AttrMask::TIMEOUT, new.timeout <= MAX_TIMEOUT)?;
        bad(AttrMask::RETRY_CNT, new.retry_cnt <= MAX_RETRY)?;
        bad(AttrMask::RNR_RETRY, new.rnr_retry <= MAX_RETRY)?;
        bad(AttrMask::MIN_RNR_TIMER, new.min_rnr_timer <= MAX_RNR_TIMER)?;
        bad(
            AttrMask::MAX_QP_RD_ATOMIC,
            u32::from(new.max_rd_atomic) <= limits.max_qp_init_rd_atom,
        )?;
        bad(
            AttrMask::MAX_DEST_RD_ATOMIC,
            u32::from(new.max_dest_rd_atomic) <= limits.max_qp_rd_atom,
        )?;
        bad(AttrMask::DEST_QPN, new.dest_qpn <= QPN_MAX)?;
        bad(AttrMask::PATH_MIG_STATE, new.path_mig_state == MIG_MIGRATED)?;
        Ok(())
    }

    /// Carries out `modify_qp` on a QP of type `ty` whose actual state is
    /// `cur`: checks the transition to `new.state` (or `cur` if `mask` lacks
    /// `STATE`), `CUR_STATE`, the SQD drain and every masked value, then
    /// stores the masked fields and the new state in `self` and returns the
    /// new state.  On error `self` is left untouched.
    ///
    /// `cur` is authoritative (the datapath may have moved the QP to SQE or
    /// ERR behind the caller's back); `self.state` is overwritten with the
    /// result.  PSNs are stored truncated to 24 bits.  `AV`, `CAP` and the
    /// alternate path are not part of `QpAttrs`; the driver handles `AV`
    /// itself after this succeeds.
    pub fn apply(
        &mut self,
        cur: QpState,
        ty: QpType,
        new: &QpAttrs,
        mask: AttrMask,
        limits: &DeviceLimits,
    ) -> Result<QpState, QpError> {
        let next = if mask.contains(AttrMask::STATE) {
            new.state
        } else {
            cur
        };
        check_transition(cur, next, ty, mask)?;
        if mask.contains(AttrMask::CUR_STATE) && new.cur_state != cur {
            return Err(QpError::CurStateMismatch {
                claimed: new.cur_state,
                actual: cur,
            });
        }
        if cur == QpState::Sqd && self.sq_draining && !matches!(next, QpState::Reset | QpState::Err)
        {
            return Err(QpError::SqDraining);
        }
        Self::check_values(new, mask, limits)?;

        // Everything is valid; from here on nothing fails.
        let mut out = *self;
        if mask.contains(AttrMask::ACCESS_FLAGS) {
            out.access_flags = new.access_flags;
        }
        if mask.contains(AttrMask::PKEY_INDEX) {
            out.pkey_index = new.pkey_index;
        }
        if mask.contains(AttrMask::PORT) {
            out.port = new.port;
        }
        if mask.contains(AttrMask::QKEY) {
            out.qkey = new.qkey;
        }
        if mask.contains(AttrMask::PATH_MTU) {
            out.path_mtu = new.path_mtu;
        }
        if mask.contains(AttrMask::TIMEOUT) {
            out.timeout = new.timeout;
        }
        if mask.contains(AttrMask::RETRY_CNT) {
            out.retry_cnt = new.retry_cnt;
        }
        if mask.contains(AttrMask::RNR_RETRY) {
            out.rnr_retry = new.rnr_retry;
        }
        if mask.contains(AttrMask::RQ_PSN) {
            out.rq_psn = new.rq_psn & PSN_MASK;
        }
        if mask.contains(AttrMask::SQ_PSN) {
            out.sq_psn = new.sq_psn & PSN_MASK;
        }
        if mask.contains(AttrMask::DEST_QPN) {
            out.dest_qpn = new.dest_qpn;
        }
        if mask.contains(AttrMask::MAX_QP_RD_ATOMIC) {
            out.max_rd_atomic = new.max_rd_atomic;
        }
        if mask.contains(AttrMask::MAX_DEST_RD_ATOMIC) {
            out.max_dest_rd_atomic = new.max_dest_rd_atomic;
        }
        if mask.contains(AttrMask::MIN_RNR_TIMER) {
            out.min_rnr_timer = new.min_rnr_timer;
        }
        if mask.contains(AttrMask::PATH_MIG_STATE) {
            out.path_mig_state = new.path_mig_state;
        }
        if cur == QpState::Rts && next == QpState::Sqd {
            // The notify flag belongs to this one drain.
            out.sq_draining = true;
            out.en_sqd_async_notify =
                mask.contains(AttrMask::EN_SQD_ASYNC_NOTIFY) && new.en_sqd_async_notify;
        } else if next != QpState::Sqd {
            out.sq_draining = false;
        }
        out.state = next;
        out.cur_state = next;
        *self = out;
        Ok(next)
    }

    /// The datapath has finished draining the send queue in SQD.  Returns
    /// whether the `IB_EVENT_SQ_DRAINED` event should be raised (a drain was
    /// in progress and its RTS → SQD asked for the notification).
    pub fn sq_drained(&mut self) -> bool {
        let notify = self.state == QpState::Sqd && self.sq_draining && self.en_sqd_async_notify;
        if self.state == QpState::Sqd {
            self.sq_draining = false;
        }
        notify
    }
}

/// The local ACK timeout for a `timeout` exponent: 4.096 µs × 2^timeout, in
/// nanoseconds; `None` for 0, which means "no retransmit timer".  Exponents
/// above 31 (rejected by [`QpAttrs::apply`]) are treated as 31.
pub const fn ack_timeout_ns(timeout: u8) -> Option<u64> {
    if timeout == 0 {
        return None;
    }
    let t = if timeout > MAX_TIMEOUT {
        MAX_TIMEOUT
    } else {
        timeout
    };
    Some(4096u64 << t)
}

/// The RNR NAK timer values of IBTA table 45, in microseconds, by code.
const RNR_TIMER_US: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560, 3_840,
    5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840,
    245_760, 327_680, 491_520,
];

/// The minimum time to wait after an RNR NAK carrying timer `code`, in
/// nanoseconds.  Only the 5 low bits are used, as in the AETH.
pub fn rnr_timer_ns(code: u8) -> u64 {
    let us = RNR_TIMER_US
        .get(usize::from(code & 0x1F))
        .copied()
        .unwrap_or(655_360);
    u64::from(us) * 1000
}

/// Retry budgets of an RC requester, reloaded whenever the peer makes
/// progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryState {
    retry_cnt: u8,
    rnr_retry: u8,
    retry_left: u8,
    rnr_left: u8,
}

impl RetryState {
    /// Budgets from the QP's `retry_cnt` and `rnr_retry`.
    pub const fn new(retry_cnt: u8, rnr_retry: u8) -> RetryState {
        RetryState {
            retry_cnt,
            rnr_retry,
            retry_left: retry_cnt,
            rnr_left: rnr_retry,
        }
    }

    /// A local ACK timeout or a sequence-error NAK: `true` to retransmit,
    /// `false` when the budget is spent (`IB_WC_RETRY_EXC_ERR`).
    /// `retry_cnt == 7` never runs out: the IBA reserves the infinite value
    /// for `rnr_retry` only, but rdma_rxe treats a transport retry count of
    /// 7 the same way, and so do we, so that a QP behaves alike on both
    /// (tools such as ibv_rc_pingpong and perftest ask for 7).
    pub fn on_timeout(&mut self) -> bool {
        if self.retry_cnt == RETRY_CNT_INFINITE {
            return true;
        }
        match self.retry_left.checked_sub(1) {
            Some(left) => {
                self.retry_left = left;
                true
            }
            None => false,
        }
    }

    /// An RNR NAK: `true` to retry after the RNR timer, `false` when the
    /// budget is spent (`IB_WC_RNR_RETRY_EXC_ERR`).  `rnr_retry == 7` never
    /// runs out.
    pub fn on_rnr_nak(&mut self) -> bool {
        if self.rnr_retry == RNR_RETRY_INFINITE {
            return true;
        }
        match self.rnr_left.checked_sub(1) {
            Some(left) => {
                self.rnr_left = left;
                true
            }
            None => false,
        }
    }

    /// An ACK or response advanced the send queue: both budgets start over.
    pub fn on_progress(&mut self) {
        self.retry_left = self.retry_cnt;
        self.rnr_left = self.rnr_retry;
    }

    /// Timeout retries left.
    pub const fn retry_left(&self) -> u8 {
        self.retry_left
    }

    /// RNR retries left (meaningless when infinite).
    pub const fn rnr_left(&self) -> u8 {
        self.rnr_left
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use QpState::{Init, Reset, Rtr, Rts, Sqd, Sqe};
    /// `QpState::Err`, named apart from `Result::Err`.
    const ERR: QpState = QpState::Err;
    use QpType::*;

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
    }

    const LIMITS: DeviceLimits = DeviceLimits {
        active_mtu: IbMtu::Mtu1024,
        max_qp_init_rd_atom: 16,
        max_qp_rd_atom: 16,
    };

    /// Every single-bit mask of the standard range.
    fn standard_bits() -> impl Iterator<Item = AttrMask> {
        (0..21).map(|b| AttrMask::from_bits_retain(1 << b))
    }

    /// The legal `(cur, next)` pairs, independent of the QP type.
    const LEGAL: &[(QpState, QpState)] = &[
        (Reset, Reset),
        (Reset, Init),
        (Init, Reset),
        (Init, ERR),
        (Init, Init),
        (Init, Rtr),
        (Rtr, Reset),
        (Rtr, ERR),
        (Rtr, Rts),
        (Rts, Reset),
        (Rts, ERR),
        (Rts, Rts),
        (Rts, Sqd),
        (Sqd, Reset),
        (Sqd, ERR),
        (Sqd, Rts),
        (Sqd, Sqd),
        (Sqe, Reset),
        (Sqe, ERR),
        (Sqe, Rts),
        (ERR, Reset),
        (ERR, ERR),
    ];

    /// Attributes valid for every transition that accepts them.
    fn good_attrs() -> QpAttrs {
        QpAttrs {
            state: Reset,
            cur_state: Reset,
            en_sqd_async_notify: true,
            sq_draining: false,
            access_flags: QP_ACCESS_SUPPORTED,
            pkey_index: 0,
            port: 1,
            qkey: 0x1111_1111,
            path_mtu: 3,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            rq_psn: 0x12_3456,
            sq_psn: 0x65_4321,
            dest_qpn: 0x00AB_CDEF,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 16,
            min_rnr_timer: 12,
            path_mig_state: MIG_MIGRATED,
        }
    }

    #[test]
    fn state_and_type_numbering() {
        for (i, s) in QpState::ALL.iter().enumerate() {
            assert_eq!(s.to_ib(), i as u32);
            assert_eq!(QpState::from_ib(i as u32), Some(*s));
        }
        assert_eq!(QpState::from_ib(7), None);
        assert_eq!(QpState::from_ib(u32::MAX), None);
        assert_eq!(QpType::from_ib(1), Some(Gsi));
        assert_eq!(QpType::from_ib(2), Some(Rc));
        assert_eq!(QpType::from_ib(3), Some(Uc));
        assert_eq!(QpType::from_ib(4), Some(Ud));
        assert_eq!(QpType::from_ib(9), Some(XrcIni));
        assert_eq!(QpType::from_ib(10), Some(XrcTgt));
        // SMI, RAW_IPV6, RAW_ETHERTYPE, RAW_PACKET (8), DRIVER (0xFF) and
        // reserved types are not supported.
        for v in [0, 5, 6, 7, 8, 11, 0xFF, 0x1000, u32::MAX] {
            assert_eq!(QpType::from_ib(v), None, "{v}");
        }
        for t in QpType::ALL {
            assert_eq!(QpType::from_ib(t.to_ib()), Some(t));
        }
    }

    #[test]
    fn mask_bits_match_ib_verbs() {
        let expect: &[(AttrMask, u32)] = &[
            (AttrMask::STATE, 1),
            (AttrMask::CUR_STATE, 1 << 1),
            (AttrMask::EN_SQD_ASYNC_NOTIFY, 1 << 2),
            (AttrMask::ACCESS_FLAGS, 1 << 3),
            (AttrMask::PKEY_INDEX, 1 << 4),
            (AttrMask::PORT, 1 << 5),
            (AttrMask::QKEY, 1 << 6),
            (AttrMask::AV, 1 << 7),
            (AttrMask::PATH_MTU, 1 << 8),
            (AttrMask::TIMEOUT, 1 << 9),
            (AttrMask::RETRY_CNT, 1 << 10),
            (AttrMask::RNR_RETRY, 1 << 11),
            (AttrMask::RQ_PSN, 1 << 12),
            (AttrMask::MAX_QP_RD_ATOMIC, 1 << 13),
            (AttrMask::ALT_PATH, 1 << 14),
            (AttrMask::MIN_RNR_TIMER, 1 << 15),
            (AttrMask::SQ_PSN, 1 << 16),
            (AttrMask::MAX_DEST_RD_ATOMIC, 1 << 17),
            (AttrMask::PATH_MIG_STATE, 1 << 18),
            (AttrMask::CAP, 1 << 19),
            (AttrMask::DEST_QPN, 1 << 20),
            (AttrMask::RATE_LIMIT, 1 << 25),
            (AttrMask::STANDARD, 0x001F_FFFF),
        ];
        for &(m, v) in expect {
            assert_eq!(m.bits(), v);
        }
        let m = AttrMask::QKEY | AttrMask::PORT;
        assert!(m.contains(AttrMask::QKEY) && m.intersects(AttrMask::PORT));
        assert!(!m.contains(AttrMask::QKEY | AttrMask::AV));
        assert_eq!(m & AttrMask::PORT, AttrMask::PORT);
        assert_eq!(m.difference(AttrMask::PORT), AttrMask::QKEY);
        let mut n = AttrMask::EMPTY;
        assert!(n.is_empty());
        n |= AttrMask::AV;
        assert_eq!(n, AttrMask::AV);
    }

    #[test]
    fn legal_transitions_exactly() {
        for ty in QpType::ALL {
            for cur in QpState::ALL {
                for next in QpState::ALL {
                    let legal = LEGAL.contains(&(cur, next));
                    assert_eq!(
                        transition_params(cur, next, ty).is_some(),
                        legal,
                        "{cur:?} -> {next:?} {ty:?}"
                    );
                    if !legal {
                        for mask in [AttrMask::EMPTY, AttrMask::STATE, AttrMask::STANDARD] {
                            let want = if mask.contains(AttrMask::CUR_STATE)
                                && !matches!(cur, Rtr | Rts | Sqd | Sqe)
                            {
                                QpError::DisallowedAttrs(AttrMask::CUR_STATE)
                            } else {
                                QpError::InvalidTransition { cur, next }
                            };
                            assert_eq!(
                                check_transition(cur, next, ty, mask),
                                Err(want),
                                "{cur:?} -> {next:?} {ty:?} {mask:?}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn required_attrs_spot_checks() {
        let rtr_uc = AttrMask::AV | AttrMask::PATH_MTU | AttrMask::DEST_QPN | AttrMask::RQ_PSN;
        let rts_rc = AttrMask::SQ_PSN
            | AttrMask::TIMEOUT
            | AttrMask::RETRY_CNT
            | AttrMask::RNR_RETRY
            | AttrMask::MAX_QP_RD_ATOMIC;
        let expect: &[(QpState, QpState, QpType, AttrMask)] = &[
            (Reset, Init, Rc, PKEY | PORT | ACCESS),
            (Reset, Init, Uc, PKEY | PORT | ACCESS),
            (Reset, Init, Ud, PKEY | PORT | QKEY),
            (Reset, Init, Gsi, PKEY | QKEY),
            (
                Init,
                Rtr,
                Rc,
                rtr_uc | AttrMask::MAX_DEST_RD_ATOMIC | AttrMask::MIN_RNR_TIMER,
            ),
            (Init, Rtr, Uc, rtr_uc),
            (Init, Rtr, Ud, NONE),
            (Init, Rtr, Gsi, NONE),
            (Rtr, Rts, Rc, rts_rc),
            (Rtr, Rts, Uc, AttrMask::SQ_PSN),
            (Rtr, Rts, Ud, AttrMask::SQ_PSN),
            (Rtr, Rts, Gsi, AttrMask::SQ_PSN),
        ];
        for &(cur, next, ty, req) in expect {
            assert_eq!(transition_params(cur, next, ty).map(|p| p.0), Some(req));
        }
        // Everything else needs nothing.
        for ty in QpType::ALL {
            for &(cur, next) in LEGAL {
                if !matches!((cur, next), (Reset, Init) | (Init, Rtr) | (Rtr, Rts)) {
                    assert_eq!(
                        transition_params(cur, next, ty).map(|p| p.0),
                        Some(NONE),
                        "{cur:?} -> {next:?} {ty:?}"
                    );
                }
            }
            // To RESET and to ERR nothing is even allowed.
            for cur in QpState::ALL {
                for next in [Reset, ERR] {
                    if let Some(p) = transition_params(cur, next, ty) {
                        assert_eq!(p, (NONE, NONE));
                    }
                }
            }
        }
    }

    #[test]
    fn optional_attrs_spot_checks() {
        assert_eq!(
            transition_params(Rts, Rts, Rc).map(|p| p.1),
            Some(CUR | ACCESS | ALT | MIG | RNR_TIMER)
        );
        assert_eq!(
            transition_params(Rts, Rts, Ud).map(|p| p.1),
            Some(CUR | QKEY)
        );
        assert_eq!(
            transition_params(Rts, Sqd, Gsi).map(|p| p.1),
            Some(AttrMask::EN_SQD_ASYNC_NOTIFY)
        );
        assert_eq!(transition_params(Sqe, Rts, Rc).map(|p| p.1), Some(NONE));
        assert_eq!(
            transition_params(Sqe, Rts, Uc).map(|p| p.1),
            Some(CUR | ACCESS)
        );
        assert_eq!(
            transition_params(Init, Init, Gsi).map(|p| p.1),
            Some(PKEY | QKEY)
        );
        // RTR → RTS does not accept QKEY for connected QPs, nor ACCESS for UD.
        assert_eq!(
            check_transition(Rtr, Rts, Uc, AttrMask::SQ_PSN | QKEY),
            Err(QpError::DisallowedAttrs(QKEY))
        );
        assert_eq!(
            check_transition(Rtr, Rts, Ud, AttrMask::SQ_PSN | ACCESS),
            Err(QpError::DisallowedAttrs(ACCESS))
        );
    }

    #[test]
    fn every_legal_transition_mask_rules() {
        for ty in QpType::ALL {
            for &(cur, next) in LEGAL {
                let (req, opt) = transition_params(cur, next, ty).unwrap();
                assert!(!req.intersects(opt));
                assert!(!req.union(opt).intersects(AttrMask::STATE));
                // Minimal and maximal masks, with and without STATE.
                for mask in [req, req | AttrMask::STATE, req | opt | AttrMask::STATE] {
                    assert_eq!(check_transition(cur, next, ty, mask), Ok(()));
                }
                // Dropping any single required attribute fails.
                for bit in standard_bits().filter(|b| req.contains(*b)) {
                    assert_eq!(
                        check_transition(cur, next, ty, req.difference(bit) | AttrMask::STATE),
                        Err(QpError::MissingAttrs(bit)),
                        "{cur:?} -> {next:?} {ty:?} without {bit:?}"
                    );
                }
                // Adding any single attribute outside required ∪ optional fails.
                for bit in
                    standard_bits().filter(|b| !req.union(opt).union(AttrMask::STATE).contains(*b))
                {
                    assert_eq!(
                        check_transition(cur, next, ty, req | opt | bit),
                        Err(QpError::DisallowedAttrs(bit)),
                        "{cur:?} -> {next:?} {ty:?} with {bit:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn unknown_mask_bits_are_eopnotsupp() {
        for bits in [1 << 21, 1 << 24, 1 << 25, 1 << 31, u32::MAX] {
            let mask = AttrMask::from_bits_retain(bits);
            let e = check_transition(Reset, Reset, Rc, mask).unwrap_err();
            assert_eq!(
                e,
                QpError::UnknownMaskBits(mask.difference(AttrMask::STANDARD))
            );
            assert_eq!(e.errno(), EOPNOTSUPP);
        }
        // CAP is a standard bit, so it is a plain EINVAL.
        let e = check_transition(Rts, Rts, Rc, AttrMask::CAP).unwrap_err();
        assert_eq!(e, QpError::DisallowedAttrs(AttrMask::CAP));
        assert_eq!(e.errno(), EINVAL);
    }

    #[test]
    fn cur_state_only_out_of_rtr_rts_sqd_sqe() {
        // Allowed by the table for these.
        for (cur, ty) in [(Rtr, Rc), (Rts, Uc), (Sqd, Ud), (Sqe, Gsi)] {
            let (req, _) = transition_params(cur, Rts, ty).unwrap();
            assert_eq!(check_transition(cur, Rts, ty, req | CUR), Ok(()));
        }
        for cur in [Reset, Init, ERR] {
            assert_eq!(
                check_transition(cur, Reset, Rc, CUR),
                Err(QpError::DisallowedAttrs(CUR))
            );
        }
        // Not accepted towards SQD, RESET or ERR even from RTS.
        for next in [Sqd, Reset, ERR] {
            assert_eq!(
                check_transition(Rts, next, Ud, CUR | AttrMask::STATE),
                Err(QpError::DisallowedAttrs(CUR))
            );
        }
    }

    #[test]
    fn errnos() {
        let einval = [
            QpError::InvalidTransition {
                cur: Reset,
                next: ERR,
            },
            QpError::MissingAttrs(AttrMask::QKEY),
            QpError::DisallowedAttrs(AttrMask::AV),
            QpError::CurStateMismatch {
                claimed: Rts,
                actual: Sqe,
            },
            QpError::SqDraining,
            QpError::InvalidValue(AttrMask::PORT),
        ];
        for e in einval {
            assert_eq!(e.errno(), 22);
        }
        assert_eq!(QpError::Unsupported(AttrMask::ALT_PATH).errno(), 95);
        assert_eq!(QpError::UnknownMaskBits(AttrMask::RATE_LIMIT).errno(), 95);
    }

    /// Drives `q` through `steps` of `(next, mask)` using `good_attrs` values.
    fn drive(q: &mut QpAttrs, ty: QpType, steps: &[(QpState, AttrMask)]) {
        for &(next, mask) in steps {
            let new = QpAttrs {
                state: next,
                ..good_attrs()
            };
            let cur = q.state;
            assert_eq!(
                q.apply(cur, ty, &new, mask | AttrMask::STATE, &LIMITS),
                Ok(next),
                "{cur:?} -> {next:?} {ty:?}"
            );
            assert_eq!(q.state, next);
        }
    }

    fn bring_up(ty: QpType) -> QpAttrs {
        let mut q = QpAttrs::default();
        for next in [Init, Rtr, Rts] {
            let (req, _) = transition_params(q.state, next, ty).unwrap();
            // The driver handles AV itself; apply accepts the bit.
            drive(&mut q, ty, &[(next, req)]);
        }
        q
    }

    /// ib_core's `qp_state_table` for the XRC types, in raw
    /// `enum ib_qp_attr_mask` bits.
    #[test]
    fn xrc_masks_match_ib_core() {
        const CUR: u32 = 1 << 1;
        const ACCESS: u32 = 1 << 3;
        const PKEY: u32 = 1 << 4;
        const PORT: u32 = 1 << 5;
        const AV: u32 = 1 << 7;
        const MTU: u32 = 1 << 8;
        const TIMEOUT: u32 = 1 << 9;
        const RETRY: u32 = 1 << 10;
        const RNR_RETRY: u32 = 1 << 11;
        const RQ_PSN: u32 = 1 << 12;
        const RD_ATOMIC: u32 = 1 << 13;
        const ALT: u32 = 1 << 14;
        const RNR_TIMER: u32 = 1 << 15;
        const SQ_PSN: u32 = 1 << 16;
        const DEST_RD_ATOMIC: u32 = 1 << 17;
        const MIG: u32 = 1 << 18;
        const DEST_QPN: u32 = 1 << 20;
        let bits =
            |cur, next, ty| transition_params(cur, next, ty).map(|(r, o)| (r.bits(), o.bits()));
        for ty in [XrcIni, XrcTgt] {
            assert_eq!(bits(Reset, Init, ty), Some((PKEY | PORT | ACCESS, 0)));
            assert_eq!(bits(Init, Init, ty), Some((0, PKEY | PORT | ACCESS)));
        }
        let rtr = AV | MTU | DEST_QPN | RQ_PSN;
        assert_eq!(bits(Init, Rtr, XrcIni), Some((rtr, ALT | ACCESS | PKEY)));
        assert_eq!(
            bits(Init, Rtr, XrcTgt),
            Some((rtr | DEST_RD_ATOMIC | RNR_TIMER, ALT | ACCESS | PKEY))
        );
        let ini_opt = CUR | ACCESS | ALT | MIG;
        let tgt_opt = ini_opt | RNR_TIMER;
        let ini_rts = TIMEOUT | RETRY | RNR_RETRY | SQ_PSN | RD_ATOMIC;
        assert_eq!(bits(Rtr, Rts, XrcIni), Some((ini_rts, ini_opt)));
        assert_eq!(bits(Rtr, Rts, XrcTgt), Some((TIMEOUT | SQ_PSN, tgt_opt)));
        assert_eq!(bits(Rts, Rts, XrcIni), Some((0, ini_opt)));
        assert_eq!(bits(Rts, Rts, XrcTgt), Some((0, tgt_opt)));
        let sqd = PORT | AV | TIMEOUT | ALT | ACCESS | PKEY | MIG;
        assert_eq!(
            bits(Sqd, Sqd, XrcIni),
            Some((0, sqd | RETRY | RNR_RETRY | RD_ATOMIC))
        );
        assert_eq!(
            bits(Sqd, Sqd, XrcTgt),
            Some((0, sqd | DEST_RD_ATOMIC | RNR_TIMER))
        );
    }

    #[test]
    fn bring_up_every_type() {
        for ty in QpType::ALL {
            let q = bring_up(ty);
            assert_eq!(q.state, Rts);
            assert_eq!(q.sq_psn, 0x65_4321);
            match ty {
                Rc => {
                    assert_eq!(q.access_flags, QP_ACCESS_SUPPORTED);
                    assert_eq!(q.mtu(), PathMtu::Mtu1024);
                    assert_eq!(q.dest_qpn, 0x00AB_CDEF);
                    assert_eq!(q.rq_psn, 0x12_3456);
                    assert_eq!((q.timeout, q.retry_cnt, q.rnr_retry), (14, 7, 7));
                    assert_eq!((q.max_rd_atomic, q.max_dest_rd_atomic), (16, 16));
                    assert_eq!(q.min_rnr_timer, 12);
                    assert_eq!(q.qkey, 0);
                }
                Uc => {
                    assert_eq!(q.rq_psn, 0x12_3456);
                    assert_eq!(q.timeout, 0);
                    assert_eq!(q.min_rnr_timer, 0);
                }
                // As ib_core's table: the initiator is a requester (no
                // responder resources, no RNR timer), the target a
                // responder (no retry counts, no initiator depth).
                XrcIni => {
                    assert_eq!((q.timeout, q.retry_cnt, q.rnr_retry), (14, 7, 7));
                    assert_eq!((q.max_rd_atomic, q.max_dest_rd_atomic), (16, 0));
                    assert_eq!(q.min_rnr_timer, 0);
                }
                XrcTgt => {
                    assert_eq!((q.timeout, q.retry_cnt, q.rnr_retry), (14, 0, 0));
                    assert_eq!((q.max_rd_atomic, q.max_dest_rd_atomic), (0, 16));
                    assert_eq!(q.min_rnr_timer, 12);
                }
                Ud | Gsi => {
                    assert_eq!(q.qkey, 0x1111_1111);
                    assert_eq!(q.access_flags, 0);
                    assert_eq!(q.rq_psn, 0);
                    assert_eq!(q.mtu(), PathMtu::Mtu256);
                }
            }
        }
    }

    #[test]
    fn every_legal_transition_applies_with_minimal_attrs() {
        // Reach each legal source state, then take the transition.
        let reach: &[(QpState, &[QpState])] = &[
            (Reset, &[]),
            (Init, &[Init]),
            (Rtr, &[Init, Rtr]),
            (Rts, &[Init, Rtr, Rts]),
            (Sqd, &[Init, Rtr, Rts, Sqd]),
            (ERR, &[ERR]),
        ];
        for ty in QpType::ALL {
            for &(cur, next) in LEGAL {
                let mut q = QpAttrs::default();
                let actual = if cur == Sqe {
                    // Only the datapath enters SQE; pretend it did.
                    q = bring_up(ty);
                    q.state = Sqe;
                    Sqe
                } else {
                    let path = reach.iter().find(|r| r.0 == cur).unwrap().1;
                    let mut s = Reset;
                    if path == [ERR] {
                        q = bring_up(ty);
                        s = Rts;
                    }
                    for &n in path {
                        let (req, _) = transition_params(s, n, ty).unwrap();
                        drive(&mut q, ty, &[(n, req)]);
                        s = n;
                    }
                    q.sq_drained();
                    s
                };
                assert_eq!(actual, cur);
                let (req, _) = transition_params(cur, next, ty).unwrap();
                let new = QpAttrs {
                    state: next,
                    ..good_attrs()
                };
                assert_eq!(
                    q.apply(cur, ty, &new, req | AttrMask::STATE, &LIMITS),
                    Ok(next),
                    "{cur:?} -> {next:?} {ty:?}"
                );
            }
        }
    }

    #[test]
    fn rc_full_optional_sets_apply() {
        // RTS → RTS with everything optional but ALT_PATH.
        let mut q = bring_up(Rc);
        let new = QpAttrs {
            state: Rts,
            cur_state: Rts,
            access_flags: ACCESS_REMOTE_READ,
            min_rnr_timer: 31,
            ..good_attrs()
        };
        let mask = AttrMask::STATE | CUR | ACCESS | MIG | RNR_TIMER;
        assert_eq!(q.apply(Rts, Rc, &new, mask, &LIMITS), Ok(Rts));
        assert_eq!(q.access_flags, ACCESS_REMOTE_READ);
        assert_eq!(q.min_rnr_timer, 31);
        // Without STATE the transition is RTS → RTS.
        let new = QpAttrs {
            min_rnr_timer: 1,
            state: Reset, // ignored without STATE
            ..good_attrs()
        };
        assert_eq!(q.apply(Rts, Rc, &new, RNR_TIMER, &LIMITS), Ok(Rts));
        assert_eq!(q.min_rnr_timer, 1);
        assert_eq!(q.state, Rts);
    }

    #[test]
    fn value_checks() {
        type Case = (QpState, QpType, AttrMask, fn(&mut QpAttrs));
        let cases: &[Case] = &[
            (Reset, Rc, PORT, |a| a.port = 0),
            (Reset, Rc, PORT, |a| a.port = 2),
            (Reset, Rc, PKEY, |a| a.pkey_index = 1),
            (Reset, Rc, PKEY, |a| a.pkey_index = u16::MAX),
            (Reset, Rc, ACCESS, |a| a.access_flags = 1 << 4),
            (Reset, Uc, ACCESS, |a| a.access_flags = 1 << 20),
            (Reset, Rc, ACCESS, |a| a.access_flags = u32::MAX),
            (Init, Rc, AttrMask::PATH_MTU, |a| a.path_mtu = 0),
            (Init, Rc, AttrMask::PATH_MTU, |a| a.path_mtu = 6),
            (Init, Uc, AttrMask::PATH_MTU, |a| a.path_mtu = 4), // > active 1024
            (Init, Rc, AttrMask::DEST_QPN, |a| a.dest_qpn = 0x0100_0000),
            (Init, Rc, AttrMask::MAX_DEST_RD_ATOMIC, |a| {
                a.max_dest_rd_atomic = 17
            }),
            (Init, Rc, RNR_TIMER, |a| a.min_rnr_timer = 32),
            (Rtr, Rc, AttrMask::TIMEOUT, |a| a.timeout = 32),
            (Rtr, Rc, AttrMask::RETRY_CNT, |a| a.retry_cnt = 8),
            (Rtr, Rc, AttrMask::RNR_RETRY, |a| a.rnr_retry = 8),
            (Rtr, Rc, AttrMask::MAX_QP_RD_ATOMIC, |a| {
                a.max_rd_atomic = 17
            }),
            (Rtr, Rc, MIG, |a| a.path_mig_state = 1),
            (Rtr, Uc, MIG, |a| a.path_mig_state = 2),
        ];
        let next_of = |s: QpState| match s {
            Reset => Init,
            Init => Rtr,
            _ => Rts,
        };
        for &(cur, ty, bit, spoil) in cases {
            // Reach `cur`.
            let mut q = QpAttrs::default();
            let mut s = Reset;
            while s != cur {
                let n = next_of(s);
                let (req, _) = transition_params(s, n, ty).unwrap();
                drive(&mut q, ty, &[(n, req)]);
                s = n;
            }
            let next = next_of(cur);
            let (req, opt) = transition_params(cur, next, ty).unwrap();
            assert!(req.union(opt).contains(bit), "{bit:?}");
            let mut new = QpAttrs {
                state: next,
                ..good_attrs()
            };
            // The good values pass.
            let mut probe = q;
            assert_eq!(
                probe.apply(cur, ty, &new, req | bit | AttrMask::STATE, &LIMITS),
                Ok(next)
            );
            spoil(&mut new);
            let before = q;
            let e = q
                .apply(cur, ty, &new, req | bit | AttrMask::STATE, &LIMITS)
                .unwrap_err();
            assert_eq!(e, QpError::InvalidValue(bit), "{bit:?}");
            assert_eq!(e.errno(), EINVAL);
            assert_eq!(q, before, "all or nothing");
        }
    }

    #[test]
    fn value_bounds_inclusive() {
        let mut q = bring_up(Rc);
        let mut new = QpAttrs {
            state: Sqd,
            ..good_attrs()
        };
        assert_eq!(q.apply(Rts, Rc, &new, AttrMask::STATE, &LIMITS), Ok(Sqd));
        q.sq_drained();
        new.state = Sqd;
        new.timeout = 31;
        new.retry_cnt = 7;
        new.rnr_retry = 0;
        new.max_rd_atomic = 0;
        new.max_dest_rd_atomic = 0;
        let mask = AttrMask::STATE
            | AttrMask::TIMEOUT
            | AttrMask::RETRY_CNT
            | AttrMask::RNR_RETRY
            | AttrMask::MAX_QP_RD_ATOMIC
            | AttrMask::MAX_DEST_RD_ATOMIC
            | PORT
            | PKEY;
        assert_eq!(q.apply(Sqd, Rc, &new, mask, &LIMITS), Ok(Sqd));
        assert_eq!((q.timeout, q.retry_cnt, q.rnr_retry), (31, 7, 0));
        assert_eq!((q.max_rd_atomic, q.max_dest_rd_atomic), (0, 0));
        // The MTU may equal the active MTU, and every smaller one is fine.
        let mut q = QpAttrs::default();
        drive(&mut q, Uc, &[(Init, PKEY | PORT | ACCESS)]);
        for code in 1..=5u32 {
            let new = QpAttrs {
                state: Rtr,
                path_mtu: code,
                ..good_attrs()
            };
            let limits = DeviceLimits {
                active_mtu: IbMtu::Mtu4096,
                ..LIMITS
            };
            let (req, _) = transition_params(Init, Rtr, Uc).unwrap();
            let mut p = q;
            assert_eq!(
                p.apply(Init, Uc, &new, req | AttrMask::STATE, &limits),
                Ok(Rtr)
            );
            assert_eq!(p.mtu().ib_enum(), code);
        }
    }

    #[test]
    fn psns_truncate_to_24_bits() {
        let mut q = QpAttrs::default();
        drive(&mut q, Uc, &[(Init, PKEY | PORT | ACCESS)]);
        let new = QpAttrs {
            state: Rtr,
            rq_psn: 0xFFAB_CDEF,
            ..good_attrs()
        };
        let (req, _) = transition_params(Init, Rtr, Uc).unwrap();
        assert_eq!(
            q.apply(Init, Uc, &new, req | AttrMask::STATE, &LIMITS),
            Ok(Rtr)
        );
        assert_eq!(q.rq_psn, 0x00AB_CDEF);
        let new = QpAttrs {
            state: Rts,
            sq_psn: 0x8000_0001,
            ..good_attrs()
        };
        assert_eq!(
            q.apply(Rtr, Uc, &new, AttrMask::SQ_PSN | AttrMask::STATE, &LIMITS),
            Ok(Rts)
        );
        assert_eq!(q.sq_psn, 1);
    }

    #[test]
    fn transition_errors_leave_attrs_untouched() {
        let mut q = QpAttrs::default();
        let before = q;
        let new = QpAttrs {
            state: Init,
            ..good_attrs()
        };
        // Missing ACCESS for RC.
        assert_eq!(
            q.apply(Reset, Rc, &new, AttrMask::STATE | PKEY | PORT, &LIMITS),
            Err(QpError::MissingAttrs(ACCESS))
        );
        // RESET → RTR.
        let new_rtr = QpAttrs {
            state: Rtr,
            ..good_attrs()
        };
        assert_eq!(
            q.apply(Reset, Rc, &new_rtr, AttrMask::STATE, &LIMITS),
            Err(QpError::InvalidTransition {
                cur: Reset,
                next: Rtr
            })
        );
        // RESET → ERR is not allowed (as in ib_core).
        let new_err = QpAttrs {
            state: ERR,
            ..good_attrs()
        };
        assert!(matches!(
            q.apply(Reset, Rc, &new_err, AttrMask::STATE, &LIMITS),
            Err(QpError::InvalidTransition { .. })
        ));
        // A value error in one attribute keeps the valid ones out too.
        let bad = QpAttrs {
            state: Init,
            port: 9,
            ..good_attrs()
        };
        assert_eq!(
            q.apply(
                Reset,
                Rc,
                &bad,
                AttrMask::STATE | PKEY | PORT | ACCESS,
                &LIMITS
            ),
            Err(QpError::InvalidValue(PORT))
        );
        assert_eq!(q, before);
    }

    #[test]
    fn cur_state_must_match() {
        let mut q = bring_up(Ud);
        let before = q;
        let new = QpAttrs {
            state: Rts,
            cur_state: Sqe,
            ..good_attrs()
        };
        assert_eq!(
            q.apply(Rts, Ud, &new, AttrMask::STATE | CUR | QKEY, &LIMITS),
            Err(QpError::CurStateMismatch {
                claimed: Sqe,
                actual: Rts
            })
        );
        assert_eq!(q, before);
        // The datapath moved the QP to SQE; the caller knows and says so.
        assert!(Rts.can_enter_sqe(Ud));
        q.state = Sqe;
        let new = QpAttrs {
            state: Rts,
            cur_state: Sqe,
            qkey: 5,
            ..good_attrs()
        };
        assert_eq!(
            q.apply(Sqe, Ud, &new, AttrMask::STATE | CUR | QKEY, &LIMITS),
            Ok(Rts)
        );
        assert_eq!(q.qkey, 5);
        // The caller still believes RTS while the QP is in SQE.
        q.state = Sqe;
        let new = QpAttrs {
            state: Rts,
            cur_state: Rts,
            ..good_attrs()
        };
        assert!(matches!(
            q.apply(Sqe, Ud, &new, AttrMask::STATE | CUR, &LIMITS),
            Err(QpError::CurStateMismatch { .. })
        ));
    }

    #[test]
    fn sqe_only_for_unreliable_from_rts() {
        for ty in QpType::ALL {
            for s in QpState::ALL {
                assert_eq!(
                    s.can_enter_sqe(ty),
                    s == Rts && matches!(ty, Uc | Ud | Gsi),
                    "{s:?} {ty:?}"
                );
            }
        }
        // No modify_qp ever requests SQE.
        for ty in QpType::ALL {
            for cur in QpState::ALL {
                assert!(transition_params(cur, Sqe, ty).is_none());
            }
        }
    }

    #[test]
    fn alt_path_is_unsupported() {
        let mut q = QpAttrs::default();
        drive(&mut q, Rc, &[(Init, PKEY | PORT | ACCESS)]);
        let before = q;
        let (req, _) = transition_params(Init, Rtr, Rc).unwrap();
        let new = QpAttrs {
            state: Rtr,
            ..good_attrs()
        };
        let e = q
            .apply(Init, Rc, &new, req | ALT | AttrMask::STATE, &LIMITS)
            .unwrap_err();
        assert_eq!(e, QpError::Unsupported(ALT));
        assert_eq!(e.errno(), EOPNOTSUPP);
        assert_eq!(q, before);
        // Where the table forbids it, it is the usual EINVAL.
        assert_eq!(
            check_transition(Init, Rtr, Ud, ALT),
            Err(QpError::DisallowedAttrs(ALT))
        );
    }

    #[test]
    fn sqd_drain() {
        for notify in [false, true] {
            let mut q = bring_up(Rc);
            let new = QpAttrs {
                state: Sqd,
                en_sqd_async_notify: notify,
                ..good_attrs()
            };
            let mask = AttrMask::STATE | AttrMask::EN_SQD_ASYNC_NOTIFY;
            assert_eq!(q.apply(Rts, Rc, &new, mask, &LIMITS), Ok(Sqd));
            assert!(q.sq_draining);
            assert_eq!(q.en_sqd_async_notify, notify);
            // While draining: no SQD → SQD, no SQD → RTS.
            let before = q;
            for next in [Sqd, Rts] {
                let new = QpAttrs {
                    state: next,
                    ..good_attrs()
                };
                assert_eq!(
                    q.apply(Sqd, Rc, &new, AttrMask::STATE, &LIMITS),
                    Err(QpError::SqDraining)
                );
                assert_eq!(q, before);
            }
            assert_eq!(q.sq_drained(), notify);
            assert!(!q.sq_draining);
            assert!(!q.sq_drained(), "only once");
            // Drained: modify in SQD, then back to RTS.
            let new = QpAttrs {
                state: Sqd,
                timeout: 20,
                ..good_attrs()
            };
            assert_eq!(
                q.apply(Sqd, Rc, &new, AttrMask::STATE | AttrMask::TIMEOUT, &LIMITS),
                Ok(Sqd)
            );
            assert_eq!(q.timeout, 20);
            let new = QpAttrs {
                state: Rts,
                ..good_attrs()
            };
            assert_eq!(q.apply(Sqd, Rc, &new, AttrMask::STATE, &LIMITS), Ok(Rts));
        }
        // Without EN_SQD_ASYNC_NOTIFY in the mask the flag is off, and a drain
        // can always be abandoned by RESET or ERR.
        for next in [Reset, ERR] {
            let mut q = bring_up(Uc);
            q.en_sqd_async_notify = true;
            let new = QpAttrs {
                state: Sqd,
                ..good_attrs()
            };
            assert_eq!(q.apply(Rts, Uc, &new, AttrMask::STATE, &LIMITS), Ok(Sqd));
            assert!(q.sq_draining && !q.en_sqd_async_notify);
            let new = QpAttrs {
                state: next,
                ..good_attrs()
            };
            assert_eq!(q.apply(Sqd, Uc, &new, AttrMask::STATE, &LIMITS), Ok(next));
            assert!(!q.sq_draining);
            assert!(!q.sq_drained());
        }
    }

    /// Fields of `a` and `b` that differ, as attribute-mask bits.
    fn changed(a: &QpAttrs, b: &QpAttrs) -> AttrMask {
        let mut m = AttrMask::EMPTY;
        let mut f = |bit: AttrMask, differs: bool| {
            if differs {
                m |= bit;
            }
        };
        f(ACCESS, a.access_flags != b.access_flags);
        f(PKEY, a.pkey_index != b.pkey_index);
        f(PORT, a.port != b.port);
        f(QKEY, a.qkey != b.qkey);
        f(AttrMask::PATH_MTU, a.path_mtu != b.path_mtu);
        f(AttrMask::TIMEOUT, a.timeout != b.timeout);
        f(AttrMask::RETRY_CNT, a.retry_cnt != b.retry_cnt);
        f(AttrMask::RNR_RETRY, a.rnr_retry != b.rnr_retry);
        f(AttrMask::RQ_PSN, a.rq_psn != b.rq_psn);
        f(AttrMask::SQ_PSN, a.sq_psn != b.sq_psn);
        f(AttrMask::DEST_QPN, a.dest_qpn != b.dest_qpn);
        f(
            AttrMask::MAX_QP_RD_ATOMIC,
            a.max_rd_atomic != b.max_rd_atomic,
        );
        f(
            AttrMask::MAX_DEST_RD_ATOMIC,
            a.max_dest_rd_atomic != b.max_dest_rd_atomic,
        );
        f(RNR_TIMER, a.min_rnr_timer != b.min_rnr_timer);
        f(MIG, a.path_mig_state != b.path_mig_state);
        m
    }

    #[test]
    fn random_requests_all_or_nothing() {
        let mut rng = Rng(0x5EED);
        for _ in 0..20_000 {
            let ty = QpType::ALL[(rng.next() % QpType::ALL.len() as u64) as usize];
            let cur = QpState::ALL[(rng.next() % 7) as usize];
            let mut q = bring_up(ty);
            q.state = cur;
            q.sq_draining = cur == Sqd && rng.next() & 1 == 0;
            let r = rng.next();
            let small = |shift: u32, m: u64| ((r >> shift) % m) as u8;
            let new = QpAttrs {
                state: QpState::ALL[(rng.next() % 7) as usize],
                cur_state: QpState::ALL[(rng.next() % 7) as usize],
                en_sqd_async_notify: rng.next() & 1 == 0,
                sq_draining: rng.next() & 1 == 0,
                access_flags: (rng.next() as u32) & if rng.next() & 3 == 0 { !0 } else { 0xF },
                pkey_index: (rng.next() % 2) as u16,
                port: (rng.next() % 3) as u32,
                qkey: rng.next() as u32,
                path_mtu: (rng.next() % 7) as u32,
                timeout: small(0, 34),
                retry_cnt: small(8, 9),
                rnr_retry: small(16, 9),
                rq_psn: rng.next() as u32,
                sq_psn: rng.next() as u32,
                dest_qpn: (rng.next() as u32) >> (rng.next() % 9),
                max_rd_atomic: small(24, 18),
                max_dest_rd_atomic: small(32, 18),
                min_rnr_timer: small(40, 33),
                path_mig_state: (rng.next() % 3) as u32,
            };
            // Mostly the standard bits, sometimes anything.
            let bits = rng.next() as u32;
            let mask = AttrMask::from_bits_retain(if rng.next() & 7 == 0 {
                bits
            } else {
                bits & AttrMask::STANDARD.bits() & (rng.next() as u32)
            });
            let before = q;
            match q.apply(cur, ty, &new, mask, &LIMITS) {
                Ok(next) => {
                    let want = if mask.contains(AttrMask::STATE) {
                        new.state
                    } else {
                        cur
                    };
                    assert_eq!(next, want);
                    assert_eq!(q.state, next);
                    assert!(check_transition(cur, next, ty, mask).is_ok());
                    let diff = changed(&before, &q);
                    assert!(mask.contains(diff), "{mask:?} changed {diff:?}");
                    assert!(q.rq_psn <= PSN_MASK && q.sq_psn <= PSN_MASK);
                    assert!(q.dest_qpn <= QPN_MAX);
                    assert!(PathMtu::from_ib_enum(q.path_mtu).is_some());
                }
                Err(e) => {
                    assert_eq!(q, before, "{e:?}");
                    assert!(e.errno() == EINVAL || e.errno() == EOPNOTSUPP);
                }
            }
        }
    }

    #[test]
    fn ack_timeout() {
        assert_eq!(ack_timeout_ns(0), None);
        assert_eq!(ack_timeout_ns(1), Some(8_192));
        assert_eq!(ack_timeout_ns(14), Some(67_108_864)); // ~67 ms
        assert_eq!(ack_timeout_ns(31), Some(4096 << 31)); // ~2.4 h
        assert_eq!(ack_timeout_ns(32), ack_timeout_ns(31));
        assert_eq!(ack_timeout_ns(255), ack_timeout_ns(31));
        for t in 1..31u8 {
            assert_eq!(
                ack_timeout_ns(t + 1),
                ack_timeout_ns(t).map(|v| v * 2),
                "{t}"
            );
        }
    }

    #[test]
    fn rnr_timer_table() {
        assert_eq!(rnr_timer_ns(0), 655_360_000);
        assert_eq!(rnr_timer_ns(1), 10_000);
        assert_eq!(rnr_timer_ns(2), 20_000);
        assert_eq!(rnr_timer_ns(12), 640_000);
        assert_eq!(rnr_timer_ns(14), 1_280_000);
        assert_eq!(rnr_timer_ns(25), 61_440_000); // not rxe's 61410
        assert_eq!(rnr_timer_ns(31), 491_520_000);
        // Strictly increasing from code 1 on, and code 0 is the longest.
        for c in 1..31u8 {
            assert!(rnr_timer_ns(c) < rnr_timer_ns(c + 1), "{c}");
        }
        assert!(rnr_timer_ns(0) > rnr_timer_ns(31));
        // Only the low 5 bits count.
        for c in 0..=255u8 {
            assert_eq!(rnr_timer_ns(c), rnr_timer_ns(c & 0x1F));
        }
    }

    #[test]
    fn retry_budgets() {
        let mut r = RetryState::new(3, 2);
        assert!(r.on_timeout() && r.on_timeout() && r.on_timeout());
        assert!(!r.on_timeout());
        assert!(!r.on_timeout());
        assert_eq!(r.retry_left(), 0);
        assert!(r.on_rnr_nak() && r.on_rnr_nak());
        assert!(!r.on_rnr_nak());
        r.on_progress();
        assert_eq!((r.retry_left(), r.rnr_left()), (3, 2));
        assert!(r.on_timeout());

        // retry_cnt 6 is six retries; 7 never runs out (as in rxe).
        let mut r = RetryState::new(6, 0);
        for _ in 0..6 {
            assert!(r.on_timeout());
        }
        assert!(!r.on_timeout());
        let mut r = RetryState::new(RETRY_CNT_INFINITE, 0);
        for _ in 0..1000 {
            assert!(r.on_timeout());
        }
        // rnr_retry 0: the first RNR NAK is fatal.
        assert!(!r.on_rnr_nak());

        // rnr_retry 7 never runs out.
        let mut r = RetryState::new(0, RNR_RETRY_INFINITE);
        for _ in 0..1000 {
            assert!(r.on_rnr_nak());
        }
        assert!(!r.on_timeout());
    }
}
