// SPDX-License-Identifier: GPL-2.0
//! The RC and UC data path of one QP: taking WQEs from the mapped rings,
//! building and sending packets, applying the decisions of the `proto::rc`
//! engines (RC, or the unreliable requester mode and `UcResponder` for UC)
//! to received packets, writing completions.  UD/GSI QPs use the `ud_*`
//! and [`Dp::on_ud`] paths.
//!
//! Everything here runs under the QP's lock with bottom halves disabled
//! (doorbell in process context, receive in softirq, retransmission timer)
//! and inside an RCU read-side section ([`Ctx::rcu`]), for which the
//! memory regions and windows it looks up are borrowed (see
//! [`crate::mr::lookup`]).
//!
//! Shared memory is never trusted: every send WQE is copied out of the SQ
//! ring into a private shadow ring and validated there (`decode_send`), every
//! receive WQE is copied before use, and every L_Key/R_Key is looked up and
//! range-checked on each access.

#![forbid(unsafe_code)]

use kernel::bindings;
use kernel::prelude::*;

use crate::cq::{self, CqPriv};
use crate::ib::cq::CqHandle;
use crate::device::RroceDev;
use crate::keys::Region;
use crate::mr::{MrError, Need};
use crate::sync::rcu::ReadGuard;
use crate::proto::hdr::{self, Bth, Ext, DEFAULT_PKEY};
use crate::proto::icrc;
use crate::proto::link;
use crate::proto::ud;
use crate::av::AddressVector;
use crate::proto::net::{self, udp_sport, IpAddr, IpUdp};
use crate::proto::qp::{QpAttrs, QpState, QpType};
use crate::proto::rc::{
    AccessError, Action, Access, AtomicOp, MemCheck, PacketDesc, Pending, Place, Pushed, RecvSource, ReplyQueue,
    ReqConfig, Reply, ResSlot, RespConfig, RespDesc, RespVerdict, Requester, Responder, Slot, Store, UcResponder,
};
use crate::proto::ring::{Consumer, RingLayout, SharedRegion, CONS_FLAGS_OFFSET, CONS_FLUSHING, CONS_POLLING};
use crate::proto::wqe::{
    self, Cqe, MsgSource, OpcodeSet, RecvLimits, RecvWqe, SendLimits, SendOpcode, SendWqe, SgeIter, WcOpcode,
    WcStatus,
    RECV_HDR_BYTES, SEND_SIGNALED,
};
use crate::proto::rc::{Backoff, Outcome, ReadResponder, RecvCompletion, ReqCounters, RespCounters};
use crate::ib::shm::{PrivVec, SharedBuf};
use crate::net::route::DstCache;
use crate::net::skb::{SkBuff, TxFill};
use crate::net::txgauge::TxGauge;
use crate::sync::timer::{TimerRef, WorkRef};
use crate::ib::qp::QpEvents;
use crate::ib::srq::SrqRef;
use crate::stats::Counter;

/// Responder resources (outstanding READ/atomic requests) per QP: the
/// device's `max_qp_rd_atom` (128, as rdma_rxe: a READ stream between two
/// hosts needs many in flight to fill the path).
pub(crate) const MAX_RD_RES: usize = crate::limits::MAX_RD_ATOM as usize;
// `max_dest_rd_atomic` is a u8: the cap below must fit one.
const _: () = assert!(MAX_RD_RES >= 1 && MAX_RD_RES <= u8::MAX as usize);

/// Capacity of an RC QP's response queue (`proto::rc::replyq`): the READ
/// and atomic responses of every responder resource with a coalesced ACK
/// behind each, and room for a NAK.  When it is full, requests are dropped
/// before the responder sees them (back-pressure), never responses.
const PENDING_MAX: usize = 2 * MAX_RD_RES + 2;
/// Response packets sent per run of the softirq work item that follows a
/// receive batch ([`Dp::on_flush`]) / of the work item.
const RESP_BUDGET_RX: u32 = 32;
const RESP_BUDGET_WORK: u32 = 128;
/// Ring entries (WQEs taken, flushed or sent) one pass handles under the
/// QP lock with bottom halves off; the QP's work item does the rest in
/// later passes.  User space controls the producer index and may keep
/// moving it: without a budget one doorbell could keep a CPU in the kernel
/// (and every RCU grace period waiting) for as long as it likes.
const RING_BUDGET: u32 = 256;
/// UC request packets sent per run: UC has no ACK clock, so a long burst
/// is cut into runs of the work item (letting the receive side, e.g. a
/// veth peer's backlog, drain in between) instead of overflowing queues.
const UC_BURST: u32 = 64;
/// RC request packets sent per run: the rest goes out from the QP's work
/// item ([`Dp::defer`]).  The window ([`ReqConfig::DEFAULT_MAX_UNACKED`],
/// 512) is larger: a go-back-N after a sequence NAK, which runs in the
/// receive softirq, would otherwise resend up to half of it there, and on
/// the debug kernel under TCG a packet costs ~7 ms.  The retransmission
/// timer sends nothing itself (see [`Dp::on_timer`]).
const RC_BURST: u32 = 128;

/// An engine's storage in the kernel (`KStore<Slot>`: the requester's WQE
/// slots, one per SQ entry; `KStore<ResSlot>`: the responder's
/// `MAX_RD_RES` resources): allocated with the QP, charged like its rings,
/// kept across RESET.
pub(crate) struct KStore<T: Copy>(PrivVec<T>);

impl<T: Copy> Store<T> for KStore<T> {
    fn items(&self) -> &[T] {
        &self.0
    }
    fn items_mut(&mut self) -> &mut [T] {
        &mut self.0
    }
}

/// Where the packets of a connected QP go: the IP/UDP header template.
#[derive(Clone, Copy)]
pub(crate) struct Path {
    pub(crate) ip: IpUdp,
    pub(crate) dest_qpn: u32,
    /// The destination address is one of the device's own: packets take
    /// the loopback queue (`loopback`) instead of the IP stack.
    pub(crate) local: bool,
    /// An XRC connection: the engines' RC opcodes go out as XRC's
    /// ([`send_pkt`]), requests with an XRCETH.
    pub(crate) xrc: bool,
}

/// The IP/UDP template of a connected QP (or of one UD destination).
pub(crate) fn path_of(dev: &RroceDev, av: &AddressVector, qpn: u32, dest_qpn: u32) -> Path {
    let dst = IpAddr::from_gid(&av.dgid);
    let addr = match &dst {
        IpAddr::V4(a) => &a[..],
        IpAddr::V6(a) => &a[..],
    };
    let local = dev.p.ndev.has_addr(addr);
    Path {
        local,
        xrc: false,
        ip: IpUdp {
            src: IpAddr::from_gid(&av.sgid),
            dst: IpAddr::from_gid(&av.dgid),
            tclass: av.traffic_class,
            hop_limit: if av.hop_limit == 0 { 64 } else { av.hop_limit },
            flow_label: av.flow_label,
            sport: udp_sport(qpn, dest_qpn),
        },
        dest_qpn,
    }
}


impl Path {
    fn ipv6(&self) -> bool {
        matches!(self.ip.src, net::IpAddr::V6(_))
    }
}

/// What the data path needs to know about its QP (all fixed at creation).
pub(crate) struct Ctx<'a> {
    pub(crate) dev: &'a RroceDev,
    pub(crate) qpn: u32,
    pub(crate) pd: crate::ib::PdId,
    /// The RCU read-side section the data path borrows regions, windows
    /// and QPs in.
    pub(crate) rcu: &'a ReadGuard,
    /// The CQs (`None`: an XRC initiator has no receive CQ, an XRC
    /// target none at all; its receives complete on the CQ of the XRC SRQ
    /// a request names, see [`Ctx::receive_into`]).
    pub(crate) send_cq: Option<&'a CqHandle<CqPriv>>,
    pub(crate) recv_cq: Option<&'a CqHandle<CqPriv>>,
    pub(crate) sq_ring: &'a SharedBuf,
    pub(crate) rq_ring: &'a SharedBuf,
    /// The SRQ receives come from instead of `rq_ring`, if any.
    pub(crate) srq: Option<&'a crate::srq::SrqPriv>,
    /// The same SRQ for ib_core (its limit event).
    pub(crate) ib_srq: Option<SrqRef<'a, crate::srq::SrqPriv>>,
    pub(crate) sig_all: bool,
    pub(crate) timer: TimerRef<'a>,
    pub(crate) work: WorkRef<'a>,
    /// The softirq work item that sends the responses of a receive batch
    /// ([`Dp::on_flush`]).
    pub(crate) flush: WorkRef<'a>,
    /// The QP's packets in the network stack: at [`TX_HIGH`](crate::net::txgauge::TX_HIGH) it stops
    /// sending until the work item is woken ([`Ctx::may_send`]).
    pub(crate) tx: &'a TxGauge,
    /// Route cache (`None` if it could not be allocated).
    pub(crate) dst: Option<&'a DstCache>,
    /// Completion handlers due ([`NOTIFY_SEND`], [`NOTIFY_RECV`]), run by
    /// [`Ctx::fire`] once the QP lock is dropped.
    pub(crate) notify: core::cell::Cell<u8>,
    /// The QP for ib_core (its event handler).
    pub(crate) ib_qp: QpEvents<'a>,
    /// Affiliated asynchronous events due ([`EV_COMM_EST`]...), raised by
    /// [`Ctx::fire`] once the QP lock is dropped.
    pub(crate) events: core::cell::Cell<u8>,
    /// A completion of this QP was lost: its CQ overflowed (and is in the
    /// error state); [`Dp::after_cq_loss`] moves the QP to ERR.
    pub(crate) cq_lost: core::cell::Cell<bool>,
    /// The first page of an on-demand paging region this section found
    /// missing ([`Ctx::note`]), for the step that stalls on it.
    pub(crate) fault: core::cell::Cell<Option<Fault>>,
}

/// A missing page of an on-demand paging region that a data-path step
/// waits for: `len` bytes at I/O address `va` of the region at key-table
/// index `index`, to be mapped for writing if `write`.  The QP's work item
/// faults it in (process context) and retries the step ([`Dp::faulted`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fault {
    pub(crate) index: u32,
    /// The region's key: the work item faults only the region that still
    /// has it (the index may hold another one by then).
    pub(crate) key: u32,
    pub(crate) va: u64,
    pub(crate) len: u32,
    pub(crate) write: bool,
}

/// A data-path step that stopped at a missing on-demand page.  While one
/// waits, the QP drops the packets it receives (its peer retransmits
/// them), sends nothing and completes nothing, so the step resumes exactly
/// where it stopped once the page is in.
enum Stalled {
    /// An atomic request, before the responder saw it.
    Request { r: crate::proto::rc::InRequest, payload: KVec<u8> },
    /// A request the responder executed but whose payload was not placed
    /// (the tail of [`Dp::on_request`]).
    Place { a: Action, r: crate::proto::rc::InRequest, payload: KVec<u8>, msn_before: Option<u32>, rq_broken: bool },
    /// READ response data (or an atomic's original value) the requester
    /// accepted but did not place.
    ReadData { wqe: u32, offset: u32, payload: KVec<u8> },
    /// A request packet not sent for want of its source pages: sent again
    /// from `psn` on.
    Tx { psn: crate::proto::psn::Psn },
    /// The READ response at the head of the response queue.
    Reply,
    /// The UD send WQE at the head of the SQ ring.
    UdSend,
    /// A UD datagram dropped: nothing to resume.
    Nothing,
}

/// A private copy of a packet's payload, kept while its step stalls.
fn copy_payload(payload: &[u8]) -> Result<KVec<u8>> {
    let mut v = KVec::with_capacity(payload.len(), GFP_ATOMIC)?;
    v.extend_from_slice(payload, GFP_ATOMIC)?;
    Ok(v)
}

/// The RNR NAK timer a stalled responder asks for at least (IBA code 18:
/// 5.12 ms, about what faulting a window in takes under TCG): a shorter
/// one brings the requester's whole window back many times per fault.
const ODP_RNR_TIMER: u8 = 18;

/// Tries of one stalled step before its missing page counts as an access
/// error (memory the process keeps taking away as fast as it comes).
const ODP_TRIES: u8 = 16;

/// [`Ctx::events`] bit: `IB_EVENT_COMM_EST` (first packet received in RTR).
pub(crate) const EV_COMM_EST: u8 = 1;
/// [`Ctx::events`] bit: `IB_EVENT_QP_LAST_WQE_REACHED` (a QP on an SRQ
/// entered the error state: it takes no more WQEs from the SRQ).
pub(crate) const EV_LAST_WQE: u8 = 2;
/// [`Ctx::events`] bit: `IB_EVENT_QP_REQ_ERR` (the responder NAKed an
/// invalid request and entered the error state).
pub(crate) const EV_REQ_ERR: u8 = 4;
/// [`Ctx::events`] bit: `IB_EVENT_QP_ACCESS_ERR` (the responder refused a
/// remote access and entered the error state).
pub(crate) const EV_ACCESS_ERR: u8 = 8;
/// [`Ctx::events`] bit: `IB_EVENT_QP_FATAL` (the QP's own rings are
/// broken: its user wrote impossible indices).
pub(crate) const EV_FATAL: u8 = 16;
/// [`Ctx::events`] bit: `IB_EVENT_SQ_DRAINED` (in SQD, every WQE taken
/// before completed, and the move to SQD asked for the event).
pub(crate) const EV_SQ_DRAINED: u8 = 32;

/// Event types of the [`Ctx::events`] bits, in the order they are raised.
const EVENTS: [(u8, bindings::ib_event_type); 6] = [
    (EV_COMM_EST, bindings::ib_event_type_IB_EVENT_COMM_EST),
    (EV_FATAL, bindings::ib_event_type_IB_EVENT_QP_FATAL),
    (EV_REQ_ERR, bindings::ib_event_type_IB_EVENT_QP_REQ_ERR),
    (EV_ACCESS_ERR, bindings::ib_event_type_IB_EVENT_QP_ACCESS_ERR),
    (EV_LAST_WQE, bindings::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED),
    (EV_SQ_DRAINED, bindings::ib_event_type_IB_EVENT_SQ_DRAINED),
];

/// [`Ctx::notify`] bit: the send CQ's handler is due.
pub(crate) const NOTIFY_SEND: u8 = 1;
/// [`Ctx::notify`] bit: the receive CQ's handler is due.
pub(crate) const NOTIFY_RECV: u8 = 2;
/// [`Ctx::notify`] bit: the SRQ's limit event is due.
pub(crate) const NOTIFY_SRQ_LIMIT: u8 = 4;
/// [`Ctx::notify`]: `NOTIFY_SEND`/`NOTIFY_RECV` shifted by this much: that
/// CQ overflowed (first lost completion), IB_EVENT_CQ_ERR is due.
const CQ_ERR_SHIFT: u8 = 3;

impl<'a> Ctx<'a> {
    /// An XRC target's request names the XRC SRQ `srq` (of its domain):
    /// the responder takes the receive WQE from it, completes on its CQ
    /// and checks keys against its PD.
    pub(crate) fn receive_into(&mut self, srq: SrqRef<'a, crate::srq::SrqPriv>) {
        let s = srq.p();
        if let Some(x) = s.xrc.as_ref() {
            self.pd = x.pd;
            self.recv_cq = Some(&x.cq);
            self.srq = Some(s);
            self.ib_srq = Some(srq);
        }
    }

    /// Notes `len` bytes at `va` of `mr` as the missing on-demand page that
    /// an access just failed on (`MrError::NotPresent`); the first note of
    /// a section counts.
    fn note(&self, mr: &Region, va: u64, len: u32, write: bool) {
        if self.fault.get().is_none() {
            let index = mr.index.load(core::sync::atomic::Ordering::Relaxed);
            let key = mr.key.load(core::sync::atomic::Ordering::Relaxed);
            self.fault.set(Some(Fault { index, key, va, len, write }));
        }
    }

    /// Whether the QP may transmit another packet: not with [`TX_HIGH`](crate::net::txgauge::TX_HIGH)
    /// of its packets still in the network stack (counted as `tx_waits`);
    /// its work item runs once they drained to half of that.
    pub(crate) fn may_send(&self) -> bool {
        let ok = self.tx.may_send();
        if !ok {
            self.dev.p.stats.inc(Counter::TxWaits);
        }
        ok
    }

    /// Marks the affiliated event `bit` due.
    pub(crate) fn raise(&self, bit: u8) {
        self.events.set(self.events.get() | bit);
    }

    fn pushed(&self, r: cq::Pushed, bit: u8) {
        match r {
            cq::Pushed::Notify => self.notify.set(self.notify.get() | bit),
            cq::Pushed::Lost => self.cq_lost.set(true),
            cq::Pushed::Overflow => {
                self.cq_lost.set(true);
                self.notify.set(self.notify.get() | (bit << CQ_ERR_SHIFT));
            }
            cq::Pushed::Stored => {}
        }
    }

    /// Calls `f` on the send CQ if `bits` has [`NOTIFY_SEND`] and on the
    /// receive CQ if it has [`NOTIFY_RECV`], once per CQ even if both
    /// queues share it.  (The QP holds a use count on its CQs, an XRC SRQ
    /// on its CQ.)
    fn each_cq(&self, bits: u8, f: impl Fn(&CqHandle<CqPriv>)) {
        let send = self.send_cq.filter(|_| bits & NOTIFY_SEND != 0);
        if let Some(cq) = send {
            f(cq);
        }
        if let Some(cq) = self.recv_cq.filter(|_| bits & NOTIFY_RECV != 0) {
            if !send.is_some_and(|s| s.same(cq)) {
                f(cq);
            }
        }
    }

    /// Runs the completion handlers that became due and delivers the
    /// loopback packets sent.  Call without the QP lock held.
    pub(crate) fn fire(&self) {
        let dev = self.dev;
        // In softirq context (a packet from the wire, the retransmission
        // timer) the drain would add up to DRAIN_BUDGET loopback packets to
        // every packet NAPI delivers -- seconds of softirq under a
        // loopback flood.  There the QP's work item drains instead.
        let left = if crate::sync::lock::in_atomic_bh() {
            dev.p.loopq.has_packets()
        } else {
            dev.p.loopq.drain(|pkt, rcu| {
                (dev.p.local_rx)(dev, rcu, pkt);
            })
        };
        if left {
            // This QP's work item drains the rest (`Dp::on_work` ends in
            // another `fire`).
            self.work.queue();
        }
        let n = self.notify.replace(0);
        self.each_cq(n, |cq| cq.notify());
        // IB_EVENT_CQ_ERR of an overflowed CQ, here, without the QP lock
        // (until 2026-12-07 raised under it: a kernel consumer's handler
        // that called into the QP deadlocked; found by review).
        self.each_cq(n >> CQ_ERR_SHIFT, |cq| cq.error_event());
        if n & NOTIFY_SRQ_LIMIT != 0 {
            // No lock is held here.
            if let Some(srq) = self.ib_srq {
                srq.limit_reached();
            }
        }
        let ev = self.events.replace(0);
        // No lock is held here.
        if ev != 0 {
            for (bit, event) in EVENTS {
                if ev & bit != 0 {
                    self.ib_qp.raise(event);
                }
            }
        }
    }
}

/// Per-QP data path state (under the QP lock).
pub(crate) struct Dp {
    sq: Consumer,
    rq: Consumer,
    sq_layout: RingLayout,
    sq_shadow: PrivVec<u8>,
    /// Ring index of requester WQE 0.
    sq_base: u32,
    req: Option<Requester<KStore<Slot>>>,
    spare: Option<KStore<Slot>>,
    resp: Option<Responder<KStore<ResSlot>>>,
    /// The responder's resources while there is no responder.
    res_spare: Option<KStore<ResSlot>>,
    /// The responder of a UC QP (instead of `resp`).
    uc_resp: Option<UcResponder>,
    /// The RQ head as last peeked, and whether it decoded.
    rq_scratch: KVVec<u8>,
    scratch_ok: bool,
    /// Bytes of a receive WQE of the current receive source (the RQ's or
    /// SRQ's entry size; an XRC target's varies with the SRQ a request
    /// names, its buffers are sized for the largest).
    recv_esz: usize,
    /// The receive WQE being filled by a multi-packet SEND, and its size.
    cur_recv: KVVec<u8>,
    cur_esz: usize,
    cur_ok: bool,
    has_cur: bool,
    path: Option<Path>,
    send_lim: SendLimits,
    recv_lim: RecvLimits,
    /// RC: responses not sent yet, in PSN order.  Heap-allocated,
    /// `PENDING_MAX` long: keeps `Dp` small (it is built on the stack of
    /// `create_qp`, which may run deep in `ib_register_device`).
    replyq: Option<ReplyQueue<KStore<Option<Pending>>>>,
    /// The network stack refused a READ response: `replyq` sends no READ
    /// response until then (ns; [`Dp::send_pending`]); the pauses'
    /// lengths.
    reply_hold: Option<u64>,
    reply_backoff: Backoff,
    /// Engine counters already added to the device's.
    seen_req: ReqCounters,
    seen_resp: RespCounters,
    /// `CONS_POLLING` as last published in the SQ ring.
    polling: bool,
    /// UD/GSI QP (no RC engines; [`Dp::ud_send_all`], [`Dp::on_ud`]).
    ud: bool,
    /// UC QP: the requester in its unreliable mode and `uc_resp`.
    uc: bool,
    /// XRC target (a responder only).
    xrc_tgt: bool,
    /// The QP's Q_Key and next PSN (UD).
    qkey: u32,
    ud_psn: u32,
    /// `IB_EVENT_COMM_EST` raised since the last RESET.
    comm_est: bool,
    /// A local operation taken from the SQ that must wait: LOCAL_INV
    /// until every earlier message was sent, a fenced one until every
    /// earlier WQE completed (`Requester::local_may_run`; [`Dp::run_held`]);
    /// no later WQE is taken meanwhile.  REG_MR and BIND_MW run when they
    /// are taken.
    held: Option<SendWqe>,
    /// SQD: no new WQE is taken from the SQ (those taken complete;
    /// [`Dp::sq_idle`] says when they have).
    sq_paused: bool,
    /// UD: the page of the head receive could not be faulted in (its
    /// stall's last try failed): the next datagram that misses a page
    /// completes that receive with `LOC_PROT_ERR` instead of stalling
    /// again (datagrams arrive in softirq, where `odp_hard` never holds).
    ud_recv_hard: bool,
    /// The work item runs the doorbell path ([`Dp::defer`]): a ring loop
    /// stopped at [`RING_BUDGET`], or the retransmission timer fired.
    resume: bool,
    /// The step waiting for an on-demand page, and the page (until the
    /// work item takes it to fault it in).
    stall: Option<Stalled>,
    fault: Option<Fault>,
    /// Tries of the stalled step so far; the last fault failed.
    stall_tries: u8,
    fault_failed: bool,
    /// A missing on-demand page is an access error now, not a stall (the
    /// step's last try).
    odp_hard: bool,
    /// The responder found an error (a fatal NAK, a receive that failed)
    /// while responses before it were still queued: the QP enters ERR once
    /// they are sent ([`Self::error_after_replies`]).
    err_pending: bool,
    /// Packets were dropped during the stall; an RNR NAK went out for it.
    stall_dropped: bool,
    stall_rnr_sent: bool,
}

fn zeroed(n: usize) -> Result<KVVec<u8>> {
    Ok(KVVec::from_elem(0u8, n, GFP_KERNEL_ACCOUNT)?)
}

impl Dp {
    /// State for a QP with the given ring layouts (both rings start at
    /// `start`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        sq_layout: RingLayout,
        rq_layout: RingLayout,
        start: u32,
        max_sge: u16,
        recv_max_sge: u16,
        max_inline: u32,
        max_msg: u32,
        ty: QpType,
    ) -> Result<KBox<Dp>> {
        let ud = matches!(ty, QpType::Ud | QpType::Gsi);
        let uc = ty == QpType::Uc;
        // No responder: nothing to keep for one.
        let no_resp = ud || uc || ty == QpType::XrcIni;
        let entries = sq_layout.entries() as usize;
        let esz = sq_layout.entry_size() as usize;
        // Both grow with the queue depth: charged like the rings.
        let shadow = PrivVec::new(entries.checked_mul(esz).ok_or(EINVAL)?, 0u8)?;
        let slots = PrivVec::new(entries, Slot::EMPTY)?;
        let resz = rq_layout.entry_size() as usize;
        let dp = Dp {
            sq: Consumer::new(sq_layout, start),
            rq: Consumer::new(rq_layout, start),
            sq_layout,
            sq_shadow: shadow,
            sq_base: start,
            req: None,
            spare: Some(KStore(slots)),
            resp: None,
            res_spare: if no_resp { None } else { Some(KStore(PrivVec::new(MAX_RD_RES, ResSlot::EMPTY)?)) },
            uc_resp: None,
            rq_scratch: zeroed(resz)?,
            scratch_ok: false,
            recv_esz: resz,
            cur_recv: zeroed(resz)?,
            cur_esz: resz,
            cur_ok: false,
            has_cur: false,
            path: None,
            send_lim: SendLimits {
                max_sge,
                max_inline,
                max_msg_size: max_msg,
                opcodes: match ty {
                    QpType::Ud | QpType::Gsi => OpcodeSet::UD,
                    QpType::Uc => OpcodeSet::UC,
                    QpType::XrcIni => OpcodeSet::XRC,
                    // An XRC target sends nothing of its own.
                    QpType::XrcTgt => OpcodeSet(0),
                    QpType::Rc => OpcodeSet::RC,
                },
                // The destination QPN (UD) or XRC SRQ number: 24 bits.
                ud: ud || ty == QpType::XrcIni,
            },
            recv_lim: RecvLimits { max_sge: recv_max_sge, max_msg_size: max_msg },
            replyq: if no_resp { None } else { Some(ReplyQueue::new(KStore(PrivVec::new(PENDING_MAX, None)?))) },
            seen_req: ReqCounters::default(),
            seen_resp: RespCounters::default(),
            polling: false,
            resume: false,
            reply_hold: None,
            reply_backoff: Backoff::default(),
            ud,
            uc,
            xrc_tgt: ty == QpType::XrcTgt,
            qkey: 0,
            ud_psn: 0,
            comm_est: false,
            held: None,
            sq_paused: false,
            ud_recv_hard: false,
            stall: None,
            fault: None,
            stall_tries: 0,
            fault_failed: false,
            odp_hard: false,
            err_pending: false,
            stall_dropped: false,
            stall_rnr_sent: false,
        };
        Ok(KBox::new(dp, GFP_KERNEL_ACCOUNT)?)
    }

    /// An XRC target: the next request's receive WQE comes from an SRQ
    /// whose entries are `esz` bytes and hold what `lim` allows.
    pub(crate) fn receive_from(&mut self, lim: RecvLimits, esz: u32) {
        self.recv_lim = lim;
        self.recv_esz = (esz as usize).min(self.rq_scratch.len());
    }

    /// SQD: whether every WQE taken from the SQ has completed (nothing
    /// held, the requester's all completed and their completions written,
    /// no send and no READ's data waiting for an on-demand page).
    pub(crate) fn sq_idle(&self) -> bool {
        self.held.is_none()
            && self.req.as_ref().map_or(true, |r| r.is_idle())
            && !matches!(self.stall, Some(Stalled::Tx { .. } | Stalled::UdSend | Stalled::ReadData { .. }))
    }

    /// Whether a multi-packet SEND holds a receive WQE it is filling.
    pub(crate) fn holds_recv(&self) -> bool {
        self.has_cur
    }

    /// An XRC target: whether a request may name another XRC SRQ than the
    /// last one (whose PD and CQ the work item and timer use): not while a
    /// step stalls on it, nor while responses wait that read memory under
    /// its PD unless the new SRQ has the same PD.
    pub(crate) fn xrc_may_switch(&self, same_pd: bool) -> bool {
        self.stall.is_none() && (same_pd || !self.replyq.as_ref().is_some_and(|q| !q.is_empty()))
    }

    /// Whether the QP waits for an on-demand page; the packet just
    /// received is then dropped (counted; the peer retransmits it).
    fn stalled(&mut self, ctx: &Ctx<'_>) -> bool {
        if self.stall.is_none() {
            return false;
        }
        ctx.dev.p.stats.inc(Counter::OdpStallDrops);
        self.stall_dropped = true;
        true
    }

    /// A request arrived while the responder's own step stalls: besides
    /// dropping it, tell the requester to wait (an RNR NAK for the stalled
    /// request's PSN, with its MSN), so that it does not resend its whole
    /// window at every timeout meanwhile.  Once per stall, and again each
    /// time that PSN comes back; never while responses wait in the queue
    /// (a NAK acknowledges everything before its PSN) or for a stall of
    /// another kind.
    fn rnr_while_stalled(&mut self, ctx: &Ctx<'_>, r: &crate::proto::rc::InRequest) {
        let (psn, msn) = match &self.stall {
            Some(Stalled::Place { r: s, msn_before: Some(m), .. }) => (s.psn, *m),
            Some(Stalled::Request { r: s, .. }) => match self.resp.as_ref() {
                Some(resp) => (s.psn, resp.msn()),
                None => return,
            },
            _ => return,
        };
        if self.stall_rnr_sent && r.psn != psn {
            return;
        }
        if !self.replyq.as_ref().is_some_and(|q| q.is_empty()) {
            return;
        }
        let (Some(resp), Some(path)) = (self.resp.as_ref(), self.path) else { return };
        let _ = send_reply(ctx, &path, &resp.rnr_nak(psn, msn, ODP_RNR_TIMER), true);
        ctx.dev.p.stats.inc(Counter::RnrNaksSent);
        self.stall_rnr_sent = true;
    }

    /// Stops at `step` until the page the section noted
    /// ([`Ctx::note`]) is in: the work item faults it in and retries.
    fn stall_on(&mut self, ctx: &Ctx<'_>, step: Stalled) {
        ctx.dev.p.stats.inc(Counter::OdpFaults);
        self.fault = ctx.fault.take();
        self.stall = Some(step);
        self.stall_rnr_sent = false;
        self.stall_tries = self.stall_tries.saturating_add(1);
        ctx.work.queue();
    }

    /// Forgets a stalled step (RESET, ERR: what it was part of is gone or
    /// flushed), and its fault if the work item has not taken it yet (one
    /// it took ends for nothing: [`Dp::faulted`] ignores it).
    fn end_stall(&mut self) {
        self.stall = None;
        self.fault = None;
        self.ud_recv_hard = false;
        self.stall_tries = 0;
        self.stall_dropped = false;
        self.stall_rnr_sent = false;
        self.fault_failed = false;
        self.odp_hard = false;
    }

    /// Whether a page waits to be faulted in by the work item.
    pub(crate) fn has_fault(&self) -> bool {
        self.fault.is_some()
    }

    /// For the work item: the page to fault in (outside the QP lock).
    pub(crate) fn take_fault(&mut self) -> Option<Fault> {
        self.fault.take()
    }

    /// For the work item: the fault it took is done (`ok`: the pages are
    /// in; else the next miss is an access error).
    pub(crate) fn faulted(&mut self, ok: bool) {
        // (A fault for a stall that ended meanwhile, at ERR or RESET, says
        // nothing about the next one.)
        if self.stall.is_some() {
            self.fault_failed |= !ok;
        }
    }

    /// The work item retries the stalled step, once its page was faulted
    /// in, then what waited behind it.  After [`ODP_TRIES`] tries, or when
    /// the fault failed, a missing page is an access error instead (until
    /// the end of this run of the work item).
    fn resume_stall(&mut self, ctx: &Ctx<'_>, st: &mut QpState, qp_access: u32) {
        if self.fault.is_some() {
            // Stalled after this run of the work item looked for a fault
            // (`QpPriv::odp_fault` is set as this section ends): again.
            ctx.work.queue();
            return;
        }
        let Some(step) = self.stall.take() else { return };
        self.odp_hard = self.fault_failed || self.stall_tries >= ODP_TRIES;
        self.fault_failed = false;
        let dropped = core::mem::take(&mut self.stall_dropped);
        let read_data = matches!(step, Stalled::ReadData { .. });
        // A send, reply or UD send is tried again by what follows (the
        // first packet `pump`, `send_pending` or `ud_send_all` makes, which
        // clears `odp_hard`); the other steps run now.
        let later = matches!(step, Stalled::Tx { .. } | Stalled::Reply | Stalled::UdSend);
        match step {
            Stalled::Request { r, payload } => self.on_request(ctx, st, qp_access, &r, &payload),
            Stalled::Place { a, r, payload, msn_before, rq_broken } => {
                self.finish_request(ctx, st, a, &r, &payload, msn_before, rq_broken)
            }
            Stalled::ReadData { wqe, offset, payload } => {
                if self.place_response(ctx, wqe, offset, &payload) {
                    self.after_response(ctx, st);
                }
            }
            Stalled::Tx { psn } => {
                if let Some(r) = self.req.as_mut() {
                    r.restart_from(psn);
                }
            }
            // A UD receive: the next datagram retries it.
            Stalled::Nothing => self.ud_recv_hard = self.odp_hard,
            Stalled::Reply | Stalled::UdSend => {}
        }
        if !later {
            // The last try of this step only: the steps that follow fault
            // their pages in as usual.
            self.odp_hard = false;
        }
        if self.stall.is_some() {
            return;
        }
        self.stall_tries = 0;
        if self.ud {
            if matches!(*st, QpState::Rts | QpState::Sqd) {
                self.ud_send_all(ctx, st);
            }
            return;
        }
        if !matches!(*st, QpState::Rts | QpState::Sqd) {
            return;
        }
        // READ response data dropped meanwhile: ask again now rather than
        // at the timeout.  (Dropped ACKs need nothing, the next one covers
        // them: after a send stall, resending from the oldest
        // unacknowledged PSN would only repeat what the responder has.)
        if dropped && read_data {
            if let Some(r) = self.req.as_mut() {
                if r.outstanding() > 0 {
                    r.restart_from(r.unacked_psn());
                }
            }
        }
        self.pump(ctx, st);
        self.take_and_pump(ctx, st);
        self.update_polling(ctx, st);
    }

    /// Lets a kernel RC QP post `IB_WR_REG_MR`.
    pub(crate) fn allow_fast_reg(&mut self) {
        if self.send_lim.opcodes == OpcodeSet::RC {
            self.send_lim.opcodes = OpcodeSet::RC_KERNEL;
        }
    }

    fn shadow_range(&self, ring_idx: u32) -> core::ops::Range<usize> {
        let esz = self.sq_layout.entry_size() as usize;
        let i = (ring_idx & (self.sq_layout.entries() - 1)) as usize;
        i * esz..(i + 1) * esz
    }

    /// The shadow copy of requester WQE `wqe`.
    fn wqe_entry(&self, wqe: u32) -> &[u8] {
        let r = self.shadow_range(self.sq_base.wrapping_add(wqe));
        self.sq_shadow.get(r).unwrap_or(&[])
    }

    /// Adds what the engines counted since the last call to the device's
    /// counters.
    fn sync_counters(&mut self, ctx: &Ctx<'_>) {
        let s = &ctx.dev.p.stats;
        if let Some(r) = self.req.as_ref() {
            let (n, o) = (r.counters(), &self.seen_req);
            s.add(Counter::Retransmits, n.retransmitted.wrapping_sub(o.retransmitted));
            s.add(Counter::AckTimeouts, n.timeouts.wrapping_sub(o.timeouts));
            s.add(Counter::SeqNaksRcvd, n.seq_naks.wrapping_sub(o.seq_naks));
            s.add(Counter::RnrNaksRcvd, n.rnr_naks.wrapping_sub(o.rnr_naks));
            s.add(Counter::RetryExceeded, n.retry_exceeded.wrapping_sub(o.retry_exceeded));
            s.add(Counter::RnrRetryExceeded, n.rnr_retry_exceeded.wrapping_sub(o.rnr_retry_exceeded));
            s.add(Counter::WindowCuts, n.window_cuts.wrapping_sub(o.window_cuts));
            let dup = n.duplicate_responses.wrapping_sub(o.duplicate_responses);
            s.add(Counter::IgnoredResponses, dup.wrapping_add(n.ignored_responses.wrapping_sub(o.ignored_responses)));
            self.seen_req = *n;
        }
        if let Some(r) = self.uc_resp.as_ref() {
            let (n, o) = (r.counters(), &self.seen_resp);
            let d = |x: Outcome| n.get(x).wrapping_sub(o.get(x));
            s.add(Counter::UcDropped, d(Outcome::SeqDrop) + d(Outcome::MsgDrop) + d(Outcome::AccessError));
            self.seen_resp = *n;
        }
        if let Some(r) = self.resp.as_ref() {
            let (n, o) = (r.counters(), &self.seen_resp);
            let d = |x: Outcome| n.get(x).wrapping_sub(o.get(x));
            s.add(
                Counter::DuplicateRequests,
                d(Outcome::Duplicate) + d(Outcome::DuplicateRead) + d(Outcome::DuplicateAtomic) + d(Outcome::DuplicateUnknown),
            );
            s.add(Counter::OutOfSequence, d(Outcome::SeqNak) + d(Outcome::OutOfSequence));
            s.add(Counter::RnrNaksSent, d(Outcome::RnrNak));
            s.add(Counter::AccessNaksSent, d(Outcome::AccessError));
            s.add(Counter::InvalidNaksSent, d(Outcome::InvalidRequest) + d(Outcome::LengthError));
            self.seen_resp = *n;
        }
    }

    /// Sets the connection path (after `modify_qp` with an AV or a new
    /// destination QP).
    pub(crate) fn set_path(&mut self, ctx: &Ctx<'_>, path: Option<Path>) {
        if path.is_none() {
            // Leaving RTR/RTS/SQD (`modify_qp` to ERR or RESET comes
            // here before `on_modify`): the ACKs still queued go out on
            // the path they are owed on, before it is forgotten.
            self.send_queued_acks(ctx);
        }
        let changed = match (self.path, path) {
            (Some(a), Some(b)) => a.ip != b.ip || a.local != b.local,
            (None, None) => false,
            _ => true,
        };
        if changed {
            if let Some(d) = ctx.dst {
                d.reset();
            }
        }
        self.path = path;
    }

    /// A state change made by `modify_qp` (`prev` → `next`, both legal).
    pub(crate) fn on_modify(&mut self, ctx: &Ctx<'_>, st: &mut QpState, attrs: &QpAttrs, prev: QpState, next: QpState) {
        match next {
            QpState::Rtr if prev == QpState::Init && self.ud => {}
            QpState::Rtr if prev == QpState::Init && self.uc => {
                self.seen_resp = RespCounters::default();
                self.uc_resp = Some(UcResponder::from_attrs(attrs));
            }
            QpState::Rtr if prev == QpState::Init => {
                self.seen_resp = RespCounters::default();
                let mut cfg = RespConfig::from_attrs(attrs);
                cfg.max_dest_rd_atomic = cfg.max_dest_rd_atomic.min(MAX_RD_RES as u8);
                // Allocated with the QP and back on every RESET, so always
                // here (an RC QP reaches RTR only from INIT).
                if let Some(res) = self.res_spare.take() {
                    self.resp = Some(Responder::with_store(cfg, res));
                }
            }
            QpState::Sqd => self.sq_paused = true,
            QpState::Rts if prev == QpState::Sqd => {
                // Back from SQD: WQEs posted meanwhile go now.
                self.sq_paused = false;
                let _ = self.doorbell(ctx, st);
            }
            QpState::Rts if prev == QpState::Rtr && self.ud => self.ud_psn = attrs.sq_psn,
            // An XRC target has no requester.
            QpState::Rts if self.xrc_tgt => {}
            QpState::Rts if prev == QpState::Rtr => {
                if let Some(slots) = self.spare.take() {
                    self.sq_base = self.sq.index();
                    self.seen_req = ReqCounters::default();
                    let cfg = if self.uc {
                        ReqConfig::uc_from_attrs(attrs)
                    } else {
                        ReqConfig::from_attrs(attrs)
                    };
                    self.req = Some(Requester::with_store(cfg, slots));
                }
            }
            QpState::Err => {
                self.sq_paused = false;
                // `st` is ERR already (set by modify_qp).
                if ctx.srq.is_some() && !self.xrc_tgt {
                    ctx.raise(EV_LAST_WQE);
                }
                self.enter_error(ctx, st);
            }
            QpState::Reset => self.reset(ctx),
            _ => {}
        }
    }

    /// Attributes a `modify_qp` may change while the QP is in RTS or SQD
    /// (RTS → RTS, SQD → SQD, SQD → RTS): the engines take the new
    /// `timeout`, `retry_cnt`, `rnr_retry`, `max_rd_atomic`,
    /// `min_rnr_timer` and `max_dest_rd_atomic` from now on.  (The path
    /// MTU and PSNs stay those of RTR/RTS.)
    pub(crate) fn refresh_timing(&mut self, attrs: &QpAttrs) {
        if let Some(r) = self.req.as_mut() {
            r.set_timing(attrs.timeout, attrs.retry_cnt, attrs.rnr_retry, attrs.max_rd_atomic);
        }
        if let Some(r) = self.resp.as_mut() {
            r.set_timing(attrs.min_rnr_timer, attrs.max_dest_rd_atomic.min(MAX_RD_RES as u8));
        }
    }

    /// Back to RESET: engines dropped, unconsumed WQEs discarded.
    fn reset(&mut self, ctx: &Ctx<'_>) {
        self.stop_polling(ctx);
        ctx.rq_ring.store_u32_release(CONS_FLAGS_OFFSET, 0);
        if let Some(r) = self.req.take() {
            self.spare = Some(r.into_store());
        }
        if let Some(r) = self.resp.take() {
            self.res_spare = Some(r.into_store());
        }
        self.uc_resp = None;
        // (Its ACKs went out in `set_path`, before the path was cleared.)
        self.clear_replies();
        self.err_pending = false;
        self.end_stall();
        self.has_cur = false;
        self.held = None;
        self.sq_paused = false;
        self.path = None;
        self.comm_est = false;
        for (c, ring) in [(&mut self.sq, ctx.sq_ring), (&mut self.rq, ctx.rq_ring)] {
            if let Ok(n) = c.refresh(ring) {
                for _ in 0..n {
                    let _ = c.consume();
                }
            }
            let _ = c.release_all(ring);
        }
    }

    /// Enters the error state: everything outstanding completes with
    /// `WR_FLUSH_ERR` (or the error already decided).
    pub(crate) fn enter_error(&mut self, ctx: &Ctx<'_>, st: &mut QpState) {
        self.err_pending = false;
        // An XRC target takes from the SRQs of its domain, not one of its
        // own: no last-WQE event.
        if *st != QpState::Err && ctx.srq.is_some() && !self.xrc_tgt {
            ctx.raise(EV_LAST_WQE);
        }
        *st = QpState::Err;
        // A READ or atomic whose response data waited for a page: it
        // completed in the requester when its response arrived, but its
        // data was never placed.
        if let (Some(Stalled::ReadData { wqe, .. }), Some(r)) = (self.stall.as_ref(), self.req.as_mut()) {
            r.local_error(*wqe, WcStatus::WrFlushErr);
        }
        self.end_stall();
        self.stop_polling(ctx);
        // Receives posted from now on need the doorbell to be flushed; the
        // barrier orders the flag before the ring is read (`proto::ring`,
        // CONS_FLUSHING).
        ctx.rq_ring.store_u32_release(CONS_FLAGS_OFFSET, CONS_FLUSHING);
        crate::sync::smp_mb();
        if let Some(r) = self.req.as_mut() {
            r.flush();
        }
        self.drain_in_error(ctx);
        if let Some(r) = self.resp.as_mut() {
            r.flush();
        }
        if let Some(r) = self.uc_resp.as_mut() {
            r.flush();
        }
        self.send_queued_acks(ctx);
        self.clear_replies();
        if self.has_cur {
            self.has_cur = false;
            let wr_id = recv_wr_id(&self.cur_recv);
            push_recv(ctx, &Cqe::new(wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, ctx.qpn), false);
        }
        self.flush_rq(ctx);
    }

    /// After a section of work under the QP lock: if a completion was lost
    /// to an overflowed CQ, the QP enters the error state (IBA 11.6.2: a
    /// CQ overrun is an error of the CQ and of the work queues that
    /// complete into it).  Its flush completions are lost too; the CQ
    /// raised `IB_EVENT_CQ_ERR` once.
    pub(crate) fn after_cq_loss(&mut self, ctx: &Ctx<'_>, st: &mut QpState) {
        if ctx.cq_lost.replace(false) && *st != QpState::Err {
            self.enter_error(ctx, st);
            ctx.cq_lost.set(false);
        }
    }

    /// Completes every WQE in the RQ ring with `WR_FLUSH_ERR` (error state).
    pub(crate) fn flush_rq(&mut self, ctx: &Ctx<'_>) {
        let mut buf = [0u8; RECV_HDR_BYTES];
        for _ in 0..RING_BUDGET {
            if !matches!(self.rq.read_next(ctx.rq_ring, &mut buf), Ok(true)) {
                return;
            }
            let wr_id = recv_wr_id(&buf);
            push_recv(ctx, &Cqe::new(wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, ctx.qpn), false);
            let _ = self.rq.release_all(ctx.rq_ring);
        }
        self.defer(ctx);
    }

    /// A loop reached [`RING_BUDGET`]: the work item continues where it
    /// stopped (through the doorbell, [`Dp::on_work`]) once the lock has
    /// been dropped.
    fn defer(&mut self, ctx: &Ctx<'_>) {
        self.resume = true;
        ctx.work.queue();
    }

    /// In the error state: completes every WQE in the SQ ring with
    /// `WR_FLUSH_ERR`, through the requester (which flushes what it is
    /// given) if there is one.
    fn drain_in_error(&mut self, ctx: &Ctx<'_>) {
        if self.req.is_none() {
            self.flush_sq_ring(ctx);
            return;
        }
        let start = self.sq.index();
        loop {
            self.complete_sends(ctx);
            let before = self.sq.index();
            if self.take_wqes(ctx).is_err() {
                return;
            }
            self.complete_sends(ctx);
            if self.sq.index() == before {
                return;
            }
            if self.sq.index().wrapping_sub(start) >= RING_BUDGET {
                self.defer(ctx);
                return;
            }
        }
    }

    /// Flushes SQ ring entries when there is no requester.
    fn flush_sq_ring(&mut self, ctx: &Ctx<'_>) {
        let mut hdr = [0u8; 16];
        for _ in 0..RING_BUDGET {
            if !matches!(self.sq.read_next(ctx.sq_ring, &mut hdr), Ok(true)) {
                return;
            }
            let wr_id = u64::from_ne_bytes([hdr[0], hdr[1], hdr[2], hdr[3], hdr[4], hdr[5], hdr[6], hdr[7]]);
            push_send(ctx, &Cqe::new(wr_id, WcStatus::WrFlushErr, WcOpcode::Send, ctx.qpn));
            let _ = self.sq.release_all(ctx.sq_ring);
        }
        self.defer(ctx);
    }

    /// The QP's Q_Key (after every `modify_qp`).
    pub(crate) fn set_qkey(&mut self, qkey: u32) {
        self.qkey = qkey;
    }

    /// The doorbell: take new send WQEs and start sending; in the error
    /// state, flush both rings (the provider rings it after posting
    /// receives when the RQ ring says CONS_FLUSHING).
    pub(crate) fn doorbell(&mut self, ctx: &Ctx<'_>, st: &mut QpState) -> Result {
        if self.ud {
            return match *st {
                QpState::Reset | QpState::Init | QpState::Rtr => Err(EINVAL),
                QpState::Rts | QpState::Sqd => {
                    self.ud_send_all(ctx, st);
                    Ok(())
                }
                _ => {
                    self.flush_sq_ring(ctx);
                    if *st == QpState::Err {
                        self.flush_rq(ctx);
                    }
                    Ok(())
                }
            };
        }
        match *st {
            QpState::Reset | QpState::Init | QpState::Rtr => return Err(EINVAL),
            QpState::Err => {
                self.drain_in_error(ctx);
                self.flush_rq(ctx);
                self.update_polling(ctx, st);
                return Ok(());
            }
            _ => {}
        }
        self.take_and_pump(ctx, st);
        self.update_polling(ctx, st);
        Ok(())
    }

    /// From now on every post needs the doorbell (RESET, ERR).
    fn stop_polling(&mut self, ctx: &Ctx<'_>) {
        self.polling = false;
        ctx.sq_ring.store_u32_release(CONS_FLAGS_OFFSET, 0);
    }

    /// Publishes whether the provider may skip its doorbell: yes while
    /// sends are in flight (their ACKs or the timer take new WQEs), no
    /// once idle.  Going idle re-checks the ring after a full barrier, so
    /// a WQE published while the flag was still set is taken now (see
    /// `proto::ring`, "Doorbell suppression").
    pub(crate) fn update_polling(&mut self, ctx: &Ctx<'_>, st: &mut QpState) {
        for _ in 0..RING_BUDGET {
            let active =
                *st == QpState::Rts && self.req.as_ref().is_some_and(|r| r.outstanding() > 0 && !r.is_error());
            if active == self.polling {
                return;
            }
            self.polling = active;
            ctx.sq_ring.store_u32_release(CONS_FLAGS_OFFSET, if active { CONS_POLLING } else { 0 });
            if active {
                return;
            }
            crate::sync::smp_mb();
            match self.sq.refresh(ctx.sq_ring) {
                Ok(n) if n > 0 => self.take_and_pump(ctx, st),
                Ok(_) => return,
                Err(_) => {
                    ctx.raise(EV_FATAL);
                    self.enter_error(ctx, st);
                    return;
                }
            }
        }
        self.defer(ctx);
    }

    /// Takes new WQEs and sends; a broken SQ ring moves the QP to ERR.
    fn take_and_pump(&mut self, ctx: &Ctx<'_>, st: &mut QpState) {
        for _ in 0..RING_BUDGET {
            if self.take_wqes(ctx).is_err() {
                ctx.raise(EV_FATAL);
                self.enter_error(ctx, st);
                return;
            }
            self.pump(ctx, st);
            if self.resume {
                // `pump` stopped at its burst; the work item goes on.
                return;
            }
            // A local operation held back by sends that `pump` just
            // finished sending (LOCAL_INV) or completed (fenced; UC
            // completes them as they are sent) runs now; each round
            // consumes one.
            let ready = match (self.held.as_ref(), self.req.as_ref()) {
                (Some(w), Some(r)) => r.local_may_run(w) && !r.is_error(),
                _ => false,
            };
            if !ready || *st == QpState::Err {
                return;
            }
        }
        self.defer(ctx);
    }

    /// Moves new SQ entries into the requester while it has room.  `Err`
    /// if the user broke the ring indices.
    fn take_wqes(&mut self, ctx: &Ctx<'_>) -> Result<(), ()> {
        loop {
            if self.held.is_some() && !self.run_held(ctx) {
                return Ok(());
            }
            if self.sq_paused {
                return Ok(());
            }
            let Some(req) = self.req.as_ref() else { return Ok(()) };
            if req.outstanding() as usize >= req.capacity() {
                return Ok(());
            }
            let idx = self.sq.index();
            let r = self.shadow_range(idx);
            let Some(entry) = self.sq_shadow.get_mut(r.clone()) else { return Ok(()) };
            match self.sq.read_next(ctx.sq_ring, entry) {
                Ok(true) => {}
                Ok(false) => return Ok(()),
                Err(_) => return Err(()),
            }
            let entry = self.sq_shadow.get(r).unwrap_or(&[]);
            let decoded = wqe::decode_send(entry, &self.send_lim).map(|v| (v.wqe, v.length));
            let Some(req) = self.req.as_mut() else { return Ok(()) };
            match decoded {
                Ok((mut w, len)) => {
                    if ctx.sig_all {
                        w.flags |= SEND_SIGNALED;
                    }
                    if w.opcode.is_local() {
                        if !req.local_may_run(&w) {
                            // Executed once everything before it was sent
                            // (LOCAL_INV) or completed (fenced).
                            self.held = Some(w);
                            continue;
                        }
                        // In order, without waiting for earlier messages:
                        // executed now, completed after them.
                        let status = if req.will_flush() { WcStatus::WrFlushErr } else { exec_local(ctx, &w) };
                        if req.post_local(w, status).is_err() {
                            bad_wqe(req, w.wr_id, WcStatus::LocQpOpErr);
                        }
                        continue;
                    }
                    match req.post(w, len) {
                        Ok(_) => {}
                        Err(_) => bad_wqe(req, raw_wr_id(entry), WcStatus::LocQpOpErr),
                    }
                }
                Err(_) => bad_wqe(req, raw_wr_id(entry), WcStatus::LocQpOpErr),
            }
        }
    }

    /// Executes the held local operation if it may run now (or flushes
    /// it in the error state); returns whether it is done.
    fn run_held(&mut self, ctx: &Ctx<'_>) -> bool {
        let (Some(w), Some(req)) = (self.held, self.req.as_ref()) else { return false };
        let status = if req.will_flush() {
            WcStatus::WrFlushErr
        } else if req.local_may_run(&w) {
            exec_local(ctx, &w)
        } else {
            return false;
        };
        let Some(req) = self.req.as_mut() else { return false };
        if req.post_local(w, status).is_err() {
            bad_wqe(req, w.wr_id, WcStatus::LocQpOpErr);
        }
        self.held = None;
        true
    }

    /// Whether another packet may go out now (see [`Ctx::may_send`]); if
    /// not, the work item goes on when the QP's packets drained.
    fn may_send(&mut self, ctx: &Ctx<'_>) -> bool {
        let ok = ctx.may_send();
        if !ok {
            self.resume = true;
        }
        ok
    }

    /// Delivers completions, sends what the requester allows, arms the
    /// timer.
    fn pump(&mut self, ctx: &Ctx<'_>, st: &mut QpState) {
        if self.stall.is_some() {
            return;
        }
        let now = now();
        self.complete_sends(ctx);
        if let Some(path) = self.path {
            let mut sent = 0u32;
            loop {
                if self.uc && sent >= UC_BURST {
                    ctx.work.queue();
                    break;
                }
                if !self.uc && sent >= RC_BURST {
                    self.defer(ctx);
                    break;
                }
                if !self.may_send(ctx) {
                    break;
                }
                sent += 1;
                let Some(d) = self.req.as_mut().and_then(|r| r.next_packet(now)) else { break };
                let sent_one = self.send_request(ctx, &path, &d);
                // (A resumed stall's last try is for this first packet only.)
                self.odp_hard = false;
                match sent_one {
                    Ok(true) => {}
                    Ok(false) => {
                        // The network stack did not take it (a full
                        // queue or backlog, no memory for the skb, no
                        // route; counted as `tx_errors`): the requester
                        // pauses and sends this packet again, instead of
                        // building the rest of the burst only to see it
                        // refused too and recovering it all by go-back-N
                        // (a sequence NAK's round trip, or an ACK timeout
                        // when refused packets end the burst).  A packet
                        // it gives up on (UC's limit) is lost, as on the
                        // wire.
                        if self.req.as_mut().is_some_and(|r| r.refused(&d, now)) {
                            break;
                        }
                    }
                    Err(TxError::NotPresent) => {
                        // RC goes back to the packet when the page is in
                        // (`restart_from`); UC takes it back now: it must
                        // not count as sent, nor complete its WQE.
                        if let Some(r) = self.req.as_mut().filter(|r| r.config().unreliable) {
                            if !r.unsend(&d) {
                                r.local_error(d.wqe, WcStatus::WrFlushErr);
                            }
                        }
                        self.stall_on(ctx, Stalled::Tx { psn: d.psn });
                        return;
                    }
                    Err(TxError::Status(status)) => {
                        if let Some(r) = self.req.as_mut() {
                            r.local_error(d.wqe, status);
                        }
                    }
                }
            }
        }
        self.complete_sends(ctx);
        self.sync_counters(ctx);
        if self.req.as_ref().is_some_and(|r| r.is_error()) && *st != QpState::Err {
            self.enter_error(ctx, st);
        }
        self.arm_timer(ctx, now);
    }

    /// Arms the QP's timer for the requester's next deadline or the end
    /// of the responder's pause after a refused READ response, whichever
    /// comes first (one timer: arming it replaces the expiry).
    fn arm_timer(&self, ctx: &Ctx<'_>, now: u64) {
        let req = self.req.as_ref().and_then(|r| r.next_deadline());
        if let Some(dl) = [req, self.reply_hold].into_iter().flatten().min() {
            ctx.timer.arm(dl.saturating_sub(now));
        }
    }

    /// The retransmission timer fired.
    pub(crate) fn on_timer(&mut self, ctx: &Ctx<'_>) {
        if self.stall.is_some() {
            // The work item resumes and re-arms the timer.
            return;
        }
        let now = now();
        if let Some(r) = self.req.as_mut() {
            r.on_timer(now);
        }
        // The resend (up to a window) goes out from the work item, not
        // from here: one timer run handles every QP whose timer expired,
        // in softirq context, and on the debug kernel under TCG (~7 ms a
        // packet) resending their windows here kept a CPU for 7 s.
        self.defer(ctx);
    }

    fn complete_sends(&mut self, ctx: &Ctx<'_>) {
        let Some(req) = self.req.as_mut() else { return };
        while let Some(c) = req.poll_completion() {
            // Free the ring entry before the CQE is visible: a user who
            // sees the completion may immediately reuse the slot.
            let _ = self.sq.release(ctx.sq_ring, 1);
            if c.needs_cqe() {
                let mut cqe = Cqe::new(c.wr_id, c.status, c.opcode, ctx.qpn);
                cqe.byte_len = c.byte_len;
                push_send(ctx, &cqe);
            }
        }
    }

    /// Builds and transmits request packet `d`: whether the network stack
    /// took it.
    fn send_request(&self, ctx: &Ctx<'_>, path: &Path, d: &PacketDesc) -> Result<bool, TxError> {
        let entry = self.wqe_entry(d.wqe);
        let view = wqe::decode_send(entry, &self.send_lim).map_err(|_| TxError::Status(WcStatus::LocQpOpErr))?;
        let bth = d.bth(path.dest_qpn, DEFAULT_PKEY);
        let mut ext = d.ext();
        if path.xrc {
            // The XRC SRQ the initiator's WQE names.
            ext.xrceth = Some(hdr::Xrceth { srqn: view.wqe.remote_qpn });
        }
        let mut local = Ok(());
        let sent = send_pkt(ctx, path, &bth, &ext, d.payload_len(), |buf| {
            let Some((off, _)) = d.payload else { return true };
            local = copy_source(ctx, &view, off, buf, self.odp_hard);
            local.is_ok()
        });
        local.map(|()| sent)
    }

    /// Whether a packet whose IP header is `ip` comes from this connected
    /// QP's peer: its source is the path's destination and its
    /// destination the path's source (the RoCE counterpart of the LRH
    /// address check, IBA 9.6.1.2).  Without a path (before RTR), never.
    pub(crate) fn is_from_peer(&self, ip: &[u8]) -> bool {
        let Some(path) = self.path.as_ref() else { return false };
        net::ip_addrs(ip).is_some_and(|(src, dst)| src == path.ip.dst && dst == path.ip.src)
    }

    /// A response for our requester.
    pub(crate) fn on_response(&mut self, ctx: &Ctx<'_>, st: &mut QpState, r: &crate::proto::rc::InResponse, payload: &[u8]) {
        if self.stalled(ctx) {
            return;
        }
        let Some(req) = self.req.as_mut() else { return };
        let placed = match req.on_response(r, now()) {
            RespVerdict::ReadData { wqe, offset, middle } => {
                let placed = self.place_response(ctx, wqe, offset, payload);
                // A middle READ response changes nothing the send engine
                // waits for (62 of a 64 KiB READ's 64 at MTU 1024); the
                // retransmission timer keeps its earlier deadline and, if
                // it fires first, re-arms from the READ's progress.
                if placed && middle && !self.req.as_ref().is_some_and(|r| r.is_error()) {
                    return;
                }
                placed
            }
            RespVerdict::AtomicData { wqe, orig } => self.place_response(ctx, wqe, 0, &orig.to_ne_bytes()),
            _ => true,
        };
        if placed {
            self.after_response(ctx, st);
        }
    }

    /// Places READ response data (or an atomic's original value) at
    /// message offset `offset` of WQE `wqe`'s buffers; a bad buffer fails
    /// the WQE.  `false` if the step stalled on a missing on-demand page.
    fn place_response(&mut self, ctx: &Ctx<'_>, wqe: u32, offset: u32, payload: &[u8]) -> bool {
        let res = {
            let entry = self.wqe_entry(wqe);
            wqe::decode_send(entry, &self.send_lim)
                .map_err(|_| MrError::Range)
                .and_then(|v| scatter(ctx, v.sges(), offset, payload))
        };
        match res {
            Ok(()) => true,
            Err(MrError::NotPresent) if !self.odp_hard => {
                match copy_payload(payload) {
                    Ok(payload) => self.stall_on(ctx, Stalled::ReadData { wqe, offset, payload }),
                    Err(_) => {
                        // No memory to keep it for later: the WQE fails.
                        ctx.fault.set(None);
                        if let Some(req) = self.req.as_mut() {
                            req.local_error(wqe, WcStatus::LocProtErr);
                        }
                        return true;
                    }
                }
                false
            }
            Err(_) => {
                if let Some(req) = self.req.as_mut() {
                    req.local_error(wqe, WcStatus::LocProtErr);
                }
                true
            }
        }
    }

    /// What follows an accepted response: completions, more requests.
    fn after_response(&mut self, ctx: &Ctx<'_>, st: &mut QpState) {
        self.pump(ctx, st);
        // Completions free SQ slots: take WQEs that waited for room, and
        // (doorbell suppression) WQEs posted while sends were in flight.
        if *st != QpState::Err {
            self.take_and_pump(ctx, st);
        }
        self.update_polling(ctx, st);
    }

    /// Places the payload of a request as `a` says; a failure turns the
    /// ACK into the NAK the requester must hear (IBA 9.7.5.2.x) and puts
    /// the QP into the error state.  Returns whether the local receive
    /// buffer (or memory) was at fault; `None` if a page of an on-demand
    /// paging region is missing and `stall_ok` (nothing decided yet).
    fn place(
        &mut self,
        ctx: &Ctx<'_>,
        a: &mut Action,
        r: &crate::proto::rc::InRequest,
        payload: &[u8],
        msn_before: Option<u32>,
        stall_ok: bool,
    ) -> Option<bool> {
        let res = match a.place {
            Place::None => Ok(()),
            Place::Recv { offset } => {
                if self.has_cur && self.cur_ok {
                    wqe::decode_recv(self.cur_recv.get(..self.cur_esz).unwrap_or_default(), &self.recv_lim)
                        .map_err(|_| MrError::Range)
                        .and_then(|v| scatter(ctx, v.sges(), offset, payload))
                } else {
                    Err(MrError::Range)
                }
            }
            Place::Mem { rkey, va } => remote_write(ctx, rkey, va, payload),
        };
        // Some(into_recv) if the payload could not be placed.
        let place_failed = match res {
            Ok(()) => None,
            Err(MrError::NotPresent) if stall_ok => return None,
            Err(_) => Some(matches!(a.place, Place::Recv { .. })),
        };
        if let (Some(into_recv), Some(resp), Some(msn)) = (place_failed, self.resp.as_mut(), msn_before) {
            let f = resp.placement_failed(r.psn, msn, into_recv);
            a.reply = f.reply;
            a.qp_error = true;
            if a.recv_done.is_none() && self.has_cur {
                a.recv_done = f.recv_done;
            }
        }
        let local_err = place_failed.is_some();
        if local_err && self.has_cur {
            // Our receive buffer is bad: complete it with the error now.
            self.cur_ok = false;
        }
        Some(local_err)
    }

    /// Completes the current receive WQE as `rc` says (with a local
    /// protection error if its buffer was bad); whether it completed in
    /// error.
    fn complete_recv(&mut self, ctx: &Ctx<'_>, rc: &RecvCompletion) -> bool {
        if !self.has_cur {
            return false;
        }
        let status = if self.cur_ok { rc.status } else { WcStatus::LocProtErr };
        let mut cqe = Cqe::new(recv_wr_id(&self.cur_recv), status, rc.opcode, ctx.qpn);
        if status == WcStatus::Success {
            cqe.byte_len = rc.byte_len;
            cqe.wc_flags = rc.wc_flags();
            cqe.imm_or_inv = rc.imm_or_inv();
        }
        if let Some(p) = self.path {
            cqe.src_qp = p.dest_qpn;
        }
        push_recv(ctx, &cqe, rc.solicited);
        self.has_cur = false;
        status != WcStatus::Success
    }

    /// A request for our responder.
    pub(crate) fn on_request(
        &mut self,
        ctx: &Ctx<'_>,
        st: &mut QpState,
        qp_access: u32,
        r: &crate::proto::rc::InRequest,
        payload: &[u8],
    ) {
        if self.stalled(ctx) {
            self.rnr_while_stalled(ctx, r);
            return;
        }
        // Back-pressure: with no room for its response the request is
        // dropped before the responder sees it, like a lost packet (the
        // requester's sequence NAK or timer brings it back).
        if self.replyq.as_ref().is_some_and(|q| !q.has_room()) {
            ctx.dev.p.stats.inc(Counter::RespBackpressure);
            return;
        }
        // An atomic executes inside the responder: its page must be there
        // before the responder sees the request.  Only the request it
        // expects next: a duplicate is answered from the responder's cache
        // and one out of sequence NAKed (and the RNR NAK a stall sends
        // would acknowledge the PSNs before it, which it has not received).
        if !self.odp_hard
            && self.resp.as_ref().is_some_and(|rp| rp.expected_psn() == r.psn)
            && atomic_missing(ctx, r)
        {
            match copy_payload(payload) {
                Ok(payload) => self.stall_on(ctx, Stalled::Request { r: *r, payload }),
                Err(_) => {
                    // Dropped unseen, like a lost packet.
                    ctx.fault.set(None);
                    ctx.dev.p.stats.inc(Counter::OdpStallDrops);
                }
            }
            return;
        }
        let mut mem = Mem { ctx, qp_access };
        // The SRQ (if any) is locked from the responder's peek to the
        // take, so no other QP takes the same WQE.
        let mut srq_guard = ctx.srq.map(|s| s.lock());
        let (ring, cons) = match (ctx.srq, srq_guard.as_mut()) {
            (Some(_), Some(g)) => g.parts(),
            _ => (ctx.rq_ring, &mut self.rq),
        };
        let scratch = self.rq_scratch.get_mut(..self.recv_esz).unwrap_or_default();
        let mut rq = Rq { ring, cons, scratch, ok: &mut self.scratch_ok, lim: &self.recv_lim };
        let msn_before = self.resp.as_ref().map(|r| r.msn());
        let a: Action = if let Some(uc) = self.uc_resp.as_mut() {
            uc.on_request(r, &mut mem, &mut rq)
        } else if let Some(resp) = self.resp.as_mut() {
            resp.on_request(r, &mut mem, &mut rq)
        } else {
            return;
        };
        // User space broke the RQ/SRQ indices: the ring looks empty to the
        // responder (an RNR NAK went out), but it never recovers, so the
        // QP goes to ERR like one whose SQ ring broke.
        let rq_broken = rq.cons.fault().is_some();
        if a.take_recv {
            take_recv(ctx, &mut self.rq, ctx.srq.zip(srq_guard.as_mut()));
        }
        drop(srq_guard);
        if a.take_recv {
            // The WQE is this QP's from now on: a private copy.
            core::mem::swap(&mut self.cur_recv, &mut self.rq_scratch);
            self.cur_esz = self.recv_esz;
            self.cur_ok = self.scratch_ok;
            self.has_cur = true;
        }
        self.finish_request(ctx, st, a, r, payload, msn_before, rq_broken);
    }

    /// The rest of [`Self::on_request`] once the responder decided `a`:
    /// place the payload, complete the receive, queue the reply, errors.
    #[allow(clippy::too_many_arguments)]
    fn finish_request(
        &mut self,
        ctx: &Ctx<'_>,
        st: &mut QpState,
        mut a: Action,
        r: &crate::proto::rc::InRequest,
        payload: &[u8],
        msn_before: Option<u32>,
        rq_broken: bool,
    ) {
        let placed = match self.place(ctx, &mut a, r, payload, msn_before, !self.odp_hard) {
            Some(e) => e,
            None => match copy_payload(payload) {
                Ok(payload) => {
                    // The first packet of a WRITE names the whole message:
                    // fault all of it in at once, not a window per miss.
                    if let (Place::Mem { .. }, Some(reth), Some(mut f)) = (a.place, r.reth, ctx.fault.get()) {
                        f.len = f.len.max(reth.len);
                        ctx.fault.set(Some(f));
                    }
                    let r = *r;
                    self.stall_on(ctx, Stalled::Place { a, r, payload, msn_before, rq_broken });
                    return;
                }
                Err(_) => {
                    // No memory to keep it for later: placed as if the
                    // page were bad.
                    ctx.fault.set(None);
                    self.place(ctx, &mut a, r, payload, msn_before, false).unwrap_or(true)
                }
            },
        };
        let mut local_err = placed;
        if let Some(rc) = a.recv_done {
            local_err |= self.complete_recv(ctx, &rc);
        }
        let urgent = match a.reply {
            Reply::None => false,
            Reply::Packet(d) => {
                let p = Pending::Pkt(d);
                self.queue_reply(ctx, p);
                !p.is_plain_ack()
            }
            Reply::Read(stream) => {
                self.queue_reply(ctx, Pending::Read(stream));
                true
            }
        };
        if urgent {
            // READ and atomic responses and NAKs at once: a requester
            // waits for them.
            if self.send_pending(ctx, st, RESP_BUDGET_RX) {
                ctx.work.queue();
            }
        } else if self.replyq.as_ref().is_some_and(|q| !q.is_empty()) {
            // A plain ACK goes out once the receive batch this request
            // came in is done, so that the ACKs of a batch's requests
            // coalesce into one (`proto::rc::replyq`).
            ctx.flush.queue();
        }
        if *st == QpState::Rtr && !self.comm_est && !a.qp_error {
            self.comm_est = true;
            ctx.raise(EV_COMM_EST);
        }
        if a.qp_error {
            match a.outcome {
                Outcome::AccessError => ctx.raise(EV_ACCESS_ERR),
                Outcome::InvalidRequest => ctx.raise(EV_REQ_ERR),
                // A receive completion reports the others.
                _ => {}
            }
        }
        if a.qp_error || local_err || rq_broken {
            self.error_after_replies(ctx, st);
        }
        self.sync_counters(ctx);
    }

    /// The responder failed a request (its NAK queued, if any) or a
    /// receive: the QP enters ERR, but only once the responses queued
    /// before the failure -- READ streams, ACKs, the NAK itself -- have
    /// left, so that the requester gets them in PSN order (IBA 9.7.5.2;
    /// rdma_rxe finishes a READ's responses before it takes the next
    /// request).  Until then the responder takes no request (its error
    /// flag) and the work item sends the queue.  Until 2026-12-07 the
    /// queue was forgotten at once: a NAK behind a READ's unsent
    /// responses never left, and the requester ended the READ with
    /// RETRY_EXC_ERR (or retried it for ever) instead of completing it
    /// and the failed request with its remote error (found by review).
    fn error_after_replies(&mut self, ctx: &Ctx<'_>, st: &mut QpState) {
        if self.path.is_some() && self.replyq.as_ref().is_some_and(|q| !q.is_empty()) {
            if let Some(r) = self.resp.as_mut() {
                let _ = r.flush();
            }
            self.err_pending = true;
            ctx.work.queue();
            return;
        }
        self.enter_error(ctx, st);
    }

    /// Sends every WQE in the SQ ring of a UD/GSI QP: one packet each,
    /// completed once handed to the network.  A WQE that cannot be sent
    /// completes with an error and the QP enters the SQE state.
    fn ud_send_all(&mut self, ctx: &Ctx<'_>, st: &mut QpState) {
        if self.stall.is_some() || self.sq_paused {
            return;
        }
        let mtu = link::active_mtu(ctx.dev.p.ndev.mtu()).map_or(256, |m| m.bytes());
        for _ in 0..RING_BUDGET {
            let idx = self.sq.index();
            let r = self.shadow_range(idx);
            let Some(entry) = self.sq_shadow.get_mut(r.clone()) else { return };
            // Consumed only once sent: a WQE whose on-demand source page
            // is missing stays at the head.
            match self.sq.peek(ctx.sq_ring) {
                Ok(Some(off)) if SharedRegion::read(ctx.sq_ring, off, entry) => {}
                Ok(None) => return,
                _ => {
                    ctx.raise(EV_FATAL);
                    self.enter_error(ctx, st);
                    return;
                }
            }
            // Checked with a WQE in hand, so that an empty ring is not
            // counted as a wait.
            if !self.may_send(ctx) {
                return;
            }
            let entry = self.sq_shadow.get(r).unwrap_or(&[]);
            let one = self.ud_send_one(ctx, entry, mtu);
            self.odp_hard = false;
            let res = match one {
                Err(TxError::NotPresent) => {
                    self.stall_on(ctx, Stalled::UdSend);
                    return;
                }
                Err(TxError::Status(s)) => Err(s),
                Ok(v) => Ok(v),
            };
            let _ = self.sq.consume();
            self.ud_psn = self.ud_psn.wrapping_add(1) & 0x00FF_FFFF;
            let _ = self.sq.release(ctx.sq_ring, 1);
            let (wr_id, signaled, status, len) = match res {
                Ok((w, len)) => (w.wr_id, w.flags & SEND_SIGNALED != 0, WcStatus::Success, len),
                Err(status) => (raw_wr_id(entry), true, status, 0),
            };
            if signaled || ctx.sig_all {
                let mut cqe = Cqe::new(wr_id, status, WcOpcode::Send, ctx.qpn);
                cqe.byte_len = len;
                push_send(ctx, &cqe);
            }
            if status != WcStatus::Success {
                // A UD send error stops the send queue only (IBA: the QP
                // enters SQE): what is queued behind is flushed, receives
                // go on, and modify_qp(SQE -> RTS) resumes sending (the
                // MAD layer does exactly that on its GSI QP).
                *st = QpState::Sqe;
                self.flush_sq_ring(ctx);
                return;
            }
        }
        self.defer(ctx);
    }

    /// Builds and sends the packet of one UD WQE.
    fn ud_send_one(&self, ctx: &Ctx<'_>, entry: &[u8], mtu: u32) -> Result<(SendWqe, u32), TxError> {
        let view = wqe::decode_send(entry, &self.send_lim).map_err(|_| TxError::Status(WcStatus::LocQpOpErr))?;
        let (w, len) = (view.wqe, view.length);
        let av = crate::ah::lookup(ctx.dev, ctx.pd, w.ah).ok_or(TxError::Status(WcStatus::LocQpOpErr))?;
        let pkt = ud::send_packet(&w, len, ctx.qpn, self.qkey, self.ud_psn, mtu).map_err(TxError::Status)?;
        let path = path_of(ctx.dev, &av, ctx.qpn, w.remote_qpn);
        let mut local = Ok(());
        send_pkt(ctx, &path, &pkt.bth, &pkt.ext, len, |buf| {
            local = copy_source(ctx, &view, 0, buf, self.odp_hard);
            local.is_ok()
        });
        local.map(|()| (w, len))
    }

    /// A UD packet for this UD/GSI QP (`ip`: the IP header it came with).
    pub(crate) fn on_ud(&mut self, ctx: &Ctx<'_>, parsed: &hdr::Parsed, ip: &[u8], payload: &[u8]) -> bool {
        if self.stalled(ctx) {
            return true;
        }
        let Ok(r) = ud::accept(&parsed.bth, &parsed.ext, self.qkey) else { return false };
        let Some((grh, net)) = ud::grh_area(ip) else { return false };
        // The SRQ (if any) is locked from the peek to the take.
        let mut srq_guard = ctx.srq.map(|s| s.lock());
        let (ring, cons) = match (ctx.srq, srq_guard.as_mut()) {
            (Some(_), Some(g)) => g.parts(),
            _ => (ctx.rq_ring, &mut self.rq),
        };
        let mut rq = Rq { ring, cons, scratch: &mut self.rq_scratch[..], ok: &mut self.scratch_ok, lim: &self.recv_lim };
        // No receive posted: UD has no RNR, the datagram is dropped.
        let Some(room) = rq.peek_len() else { return false };
        // Placed before the WQE is taken: if a page of an on-demand paging
        // buffer is missing the datagram is dropped (UD is unreliable) and
        // the WQE stays for the next one, once the page is in.
        let total = payload.len() + ud::GRH_BYTES;
        let res = if self.scratch_ok && total <= room as usize {
            wqe::decode_recv(&self.rq_scratch, &self.recv_lim).map_err(|_| MrError::Range).and_then(|v| {
                scatter(ctx, v.sges(), 0, &grh)?;
                scatter(ctx, v.sges(), ud::GRH_BYTES as u32, payload)
            })
        } else {
            Err(MrError::Range)
        };
        if res == Err(MrError::NotPresent) && !self.odp_hard && !core::mem::take(&mut self.ud_recv_hard) {
            drop(srq_guard);
            ctx.dev.p.stats.inc(Counter::OdpStallDrops);
            self.stall_on(ctx, Stalled::Nothing);
            return true;
        }
        self.ud_recv_hard = false;
        take_recv(ctx, &mut self.rq, ctx.srq.zip(srq_guard.as_mut()));
        drop(srq_guard);
        let placed = res.is_ok();
        let status = if placed {
            WcStatus::Success
        } else if self.scratch_ok && total > room as usize {
            WcStatus::LocLenErr
        } else {
            WcStatus::LocProtErr
        };
        let mut cqe = Cqe::new(recv_wr_id(&self.rq_scratch), status, WcOpcode::Recv, ctx.qpn);
        if placed {
            cqe.byte_len = total as u32;
            cqe.src_qp = r.src_qp;
            cqe.wc_flags = wqe::WC_GRH;
            if let Some(imm) = r.imm {
                cqe.wc_flags |= wqe::WC_WITH_IMM;
                cqe.imm_or_inv = imm;
            }
            cqe.network_hdr_type = net;
            cqe.sl = ud::roce_sl(net);
        }
        push_recv(ctx, &cqe, r.solicited);
        true
    }

    fn queue_reply(&mut self, ctx: &Ctx<'_>, p: Pending) {
        // (`on_request` made sure of the room: `Full` would be a bug,
        // counted, not hidden.)
        if self.replyq.as_mut().is_some_and(|q| q.push(p) == Pushed::Full) {
            ctx.dev.p.stats.inc(Counter::RespBackpressure);
        }
    }

    /// Sends the ACKs at the head of the response queue now (up to the
    /// first READ stream), before the queue is forgotten (ERR, RESET,
    /// destroy).  A plain ACK leaves from the softirq work item after the
    /// receive batch, so the consumer may already have polled the receive
    /// completion of the SEND it acknowledges and torn the QP down (as
    /// `rdma_disconnect` does at once): dropped, the requester would
    /// resend to a QP that is gone until its retries ran out (CI's
    /// rdma_server hung so).  A NIC has sent that ACK by then too.
    /// Needs the path: `modify_qp` calls it through [`Self::set_path`]
    /// before it clears the path for ERR or RESET.
    pub(crate) fn send_queued_acks(&mut self, ctx: &Ctx<'_>) {
        let Some(path) = self.path else { return };
        let Some(q) = self.replyq.as_mut() else { return };
        while let Some(Pending::Pkt(d)) = q.front().copied() {
            q.pop();
            send_reply(ctx, &path, &d, true);
        }
    }

    /// Forgets the queued responses (RESET, ERR, no path).
    fn clear_replies(&mut self) {
        if let Some(q) = self.replyq.as_mut() {
            q.clear();
        }
        self.reply_hold = None;
        self.reply_backoff.reset();
    }

    /// Sends up to `budget` queued responses; returns whether more wait
    /// to be sent now (not when the QP waits for its packets in flight to
    /// drain: then their destructors queue the work item; nor during the
    /// pause after a refused READ response: then the timer does).
    ///
    /// A READ response whose data cannot be read any more ends the READ
    /// with a NAK (remote access error) and the QP enters ERR.
    pub(crate) fn send_pending(&mut self, ctx: &Ctx<'_>, st: &mut QpState, mut budget: u32) -> bool {
        if self.stall.is_some() {
            // Resumed by the work item.
            return false;
        }
        let Some(path) = self.path else {
            self.clear_replies();
            if self.err_pending {
                self.enter_error(ctx, st);
            }
            return false;
        };
        // A resumed stall's last try is for the first READ response packet.
        let mut hard = core::mem::take(&mut self.odp_hard);
        // After a refused READ response, READ responses wait for the
        // pause's end (the timer's work item comes back then).  (The clock
        // is read only then: this runs after every receive batch.)
        let held = self.reply_hold.is_some_and(|t| now() < t);
        if !held {
            self.reply_hold = None;
        }
        let Some(q) = self.replyq.as_mut() else { return false };
        let mut stop = None;
        while budget > 0 && stop.is_none() {
            let Some(front) = q.front_mut() else { break };
            match front {
                // ACKs and atomic responses go out regardless of the
                // QP's packets in flight: one each per request.
                Pending::Pkt(d) => {
                    let d = *d;
                    budget -= 1;
                    q.pop();
                    let _ = send_reply(ctx, &path, &d, true);
                }
                // (ACKs and atomic responses before it still go.)
                Pending::Read(_) if held => break,
                Pending::Read(stream) => {
                    stop = send_stream(ctx, &path, stream, &mut budget, &mut hard);
                    if stream.remaining() == 0 {
                        q.pop();
                    }
                }
            }
        }
        match stop {
            Some(StreamStop::Failed(psn)) => {
                if let Some(nak) = self.resp.as_mut().map(|r| r.read_failed(psn)) {
                    let _ = send_reply(ctx, &path, &nak, true);
                }
                self.sync_counters(ctx);
                ctx.raise(EV_ACCESS_ERR);
                self.enter_error(ctx, st);
                return false;
            }
            Some(StreamStop::Missing) => {
                self.stall_on(ctx, Stalled::Reply);
                return false;
            }
            Some(StreamStop::Refused(psn)) => {
                let now = now();
                self.reply_hold = Some(now.saturating_add(self.reply_backoff.refused(psn, now)));
                self.arm_timer(ctx, now);
                return false;
            }
            Some(StreamStop::Blocked) | None => {}
        }
        let more = self.replyq.as_ref().is_some_and(|q| !q.is_empty());
        if self.err_pending && !more {
            self.enter_error(ctx, st);
            return false;
        }
        stop.is_none() && !held && more
    }

    /// The softirq work item, after a receive batch: send the responses
    /// it queued (up to a budget; the work item sends the rest).
    pub(crate) fn on_flush(&mut self, ctx: &Ctx<'_>, st: &mut QpState) {
        if matches!(st, QpState::Rtr | QpState::Rts | QpState::Sqd) && self.send_pending(ctx, st, RESP_BUDGET_RX) {
            ctx.work.queue();
        }
    }

    /// The work item: continue sending queued responses (RC) or the
    /// next burst of requests (UC).
    pub(crate) fn on_work(&mut self, ctx: &Ctx<'_>, st: &mut QpState, qp_access: u32) {
        self.resume_stall(ctx, st, qp_access);
        self.on_work_rest(ctx, st);
        self.odp_hard = false;
    }

    fn on_work_rest(&mut self, ctx: &Ctx<'_>, st: &mut QpState) {
        if core::mem::take(&mut self.resume) {
            // Continue a ring loop that stopped at its budget (it defers
            // again if there is still more).
            let _ = self.doorbell(ctx, st);
        }
        if self.uc {
            if matches!(*st, QpState::Rts | QpState::Sqd) {
                self.take_and_pump(ctx, st);
                self.update_polling(ctx, st);
            }
            return;
        }
        if matches!(st, QpState::Rtr | QpState::Rts | QpState::Sqd) && self.send_pending(ctx, st, RESP_BUDGET_WORK) {
            ctx.work.queue();
        }
    }

}

/// Sends one response packet (a refusal is counted by `send_pkt`; what
/// the caller does about it is [`Replied::Refused`]).  Nothing is sent
/// ([`Replied::Missing`]) if a page of the on-demand paging region it
/// reads from is missing and not `hard` (noted for the section).
fn send_reply(ctx: &Ctx<'_>, path: &Path, d: &RespDesc, hard: bool) -> Replied {
    let bth = d.bth(path.dest_qpn, DEFAULT_PKEY);
    let mut r = Replied::Sent;
    let sent = send_pkt(ctx, path, &bth, &d.ext(), d.payload_len(), |buf| match d.payload {
        None => true,
        Some(src) => match remote_read(ctx, src.rkey, src.va, buf) {
            Ok(()) => true,
            Err(e) => {
                r = if e == MrError::NotPresent && !hard { Replied::Missing } else { Replied::Failed };
                false
            }
        },
    });
    if !sent && r == Replied::Sent { Replied::Refused } else { r }
}

/// Why [`send_stream`] stopped before its budget or the stream's end.
enum StreamStop {
    /// The QP's packets in flight must drain first (the work item goes on
    /// then).
    Blocked,
    /// The network stack refused the response at this PSN: sent again
    /// after a pause, instead of losing it and the rest of the budget's
    /// responses (the requester would recover them by an implied NAK or
    /// its ACK timeout).
    Refused(crate::proto::psn::Psn),
    /// Its page is missing: this packet again once it is in.
    Missing,
    /// Its data cannot be read: the READ fails.
    Failed(crate::proto::psn::Psn),
}

/// Sends READ responses from `stream` while `budget` lasts (`hard`: see
/// [`send_reply`], for the first one only); a packet not sent is left in
/// the stream.
fn send_stream(ctx: &Ctx<'_>, path: &Path, stream: &mut ReadResponder, budget: &mut u32, hard: &mut bool) -> Option<StreamStop> {
    while *budget > 0 {
        if !ctx.may_send() {
            return Some(StreamStop::Blocked);
        }
        let before = *stream;
        let d = stream.next()?;
        *budget -= 1;
        let r = send_reply(ctx, path, &d, core::mem::take(hard));
        match r {
            Replied::Sent => {}
            Replied::Refused | Replied::Missing => {
                *stream = before;
                return Some(if r == Replied::Refused { StreamStop::Refused(d.psn) } else { StreamStop::Missing });
            }
            Replied::Failed => return Some(StreamStop::Failed(d.psn)),
        }
    }
    None
}

/// What [`send_reply`] did.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Replied {
    /// Handed to the network stack.
    Sent,
    /// Built, but the network stack did not take it (a full queue or
    /// backlog, no memory, no route): lost unless the caller sends it
    /// again.
    Refused,
    /// A READ response whose on-demand page is missing: the stream stalls.
    Missing,
    /// A READ response whose data cannot be read (its region went away,
    /// or its page cannot be faulted in): the READ fails.
    Failed,
}

/// Whether the atomic request `r` (compare-and-swap, fetch-and-add or
/// ATOMIC WRITE) targets a missing page of an on-demand paging region
/// (noted for the section).
fn atomic_missing(ctx: &Ctx<'_>, r: &crate::proto::rc::InRequest) -> bool {
    let (rkey, va, flag) = match (r.atomic, r.atomic_write, r.reth) {
        (Some(a), _, _) => (a.rkey, a.va, bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC),
        (None, Some(_), Some(reth)) => (reth.rkey, reth.va, bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE),
        _ => return false,
    };
    let Ok((mr, at)) = remote(ctx, rkey, va, 8, flag) else { return false };
    mr.is_odp() && mr.probe(at, 8, true).inspect_err(|e| noted(ctx, mr, *e, at, 8, true)) == Err(MrError::NotPresent)
}

/// Appends `dst.remaining()` bytes at message offset `off` of the WQE
/// `view` to `dst`: from its inline data, its ATOMIC WRITE value or its
/// SGEs.  A missing on-demand page is [`TxError::NotPresent`] unless `hard`.
fn copy_source(ctx: &Ctx<'_>, view: &wqe::SendWqeView<'_>, off: u32, dst: &mut TxFill<'_>, hard: bool) -> Result<(), TxError> {
    let len = dst.remaining();
    let direct = |src: &[u8], dst: &mut TxFill<'_>| {
        let o = off as usize;
        let s = src.get(o..o.saturating_add(len)).ok_or(TxError::Status(WcStatus::LocLenErr))?;
        if dst.put(s) { Ok(()) } else { Err(TxError::Status(WcStatus::LocLenErr)) }
    };
    match view.source() {
        MsgSource::Inline(d) => direct(d, dst),
        MsgSource::Value(v) => direct(&v, dst),
        MsgSource::Sges(s) => gather(ctx, s, off, dst).map_err(|e| match e {
            MrError::NotPresent if !hard => TxError::NotPresent,
            _ => TxError::Status(WcStatus::LocProtErr),
        }),
    }
}

/// Why a request packet was not built.
enum TxError {
    /// The WQE completes with this status.
    Status(WcStatus),
    /// A page of its on-demand paging source is missing (noted in the
    /// section's [`Ctx::fault`]).
    NotPresent,
}

/// Completes a WQE that could not be queued (garbage in the ring, refused
/// by the engine) with `status` and puts the QP into the error state.
fn bad_wqe(req: &mut Requester<KStore<Slot>>, wr_id: u64, status: WcStatus) {
    let mut w = SendWqe::new(wr_id, SendOpcode::Send);
    w.flags = SEND_SIGNALED;
    if let Ok(idx) = req.post(w, 0) {
        req.local_error(idx, status);
    } else {
        req.flush();
    }
}

/// Executes a local operation of the QP's SQ; returns its completion
/// status.
fn exec_local(ctx: &Ctx<'_>, w: &SendWqe) -> WcStatus {
    match w.opcode {
        SendOpcode::LocalInv => match crate::mw::invalidate(ctx.dev, ctx.rcu, ctx.pd, None, w.imm_or_inv) {
            Some(Ok(())) => WcStatus::Success,
            // As for a region's key that cannot be invalidated.
            Some(Err(_)) => WcStatus::LocProtErr,
            None => match crate::mr::invalidate_key(ctx.dev, ctx.rcu, ctx.pd, w.imm_or_inv) {
                Ok(()) => WcStatus::Success,
                Err(e) => e.local_status(),
            },
        },
        SendOpcode::BindMw => {
            let r = crate::mw::BindReq {
                mw_key: w.imm_or_inv,
                mr_lkey: w.remote_qpn,
                req: crate::proto::mw::BindRequest {
                    type2: w.ah == wqe::BIND_TYPE2,
                    new_rkey: w.rkey,
                    addr: w.remote_addr,
                    len: w.compare_add,
                    access: w.remote_qkey,
                },
            };
            match crate::mw::bind(ctx.dev, ctx.rcu, ctx.pd, ctx.qpn, &r) {
                Ok(()) => WcStatus::Success,
                Err(_) => WcStatus::MwBindErr,
            }
        }
        SendOpcode::RegMr => {
            crate::mr::fast_register(ctx.dev, ctx.rcu, ctx.pd, &crate::proto::mr::RegRequest::from_wqe(w))
        }
        _ => WcStatus::LocQpOpErr,
    }
}

/// Takes the receive WQE just peeked: from the SRQ (whose lock `srq`
/// holds; may make its limit event due) or from the QP's own RQ.
fn take_recv(
    ctx: &Ctx<'_>,
    rq: &mut Consumer,
    srq: Option<(&crate::srq::SrqPriv, &mut kernel::sync::lock::Guard<'_, crate::srq::SrqInner, crate::sync::lock::SpinLockIrqBackend>)>,
) {
    match srq {
        Some((_, g)) => {
            if g.take() {
                ctx.notify.set(ctx.notify.get() | NOTIFY_SRQ_LIMIT);
            }
        }
        None => {
            let _ = rq.consume();
            let _ = rq.release_all(ctx.rq_ring);
        }
    }
}

fn raw_wr_id(entry: &[u8]) -> u64 {
    entry.first_chunk::<8>().map_or(0, |b| u64::from_ne_bytes(*b))
}

fn recv_wr_id(entry: &[u8]) -> u64 {
    entry.first_chunk::<RECV_HDR_BYTES>().map_or(0, |b| RecvWqe::from_bytes(b).wr_id)
}

fn push_send(ctx: &Ctx<'_>, cqe: &Cqe) {
    if cqe.status != WcStatus::Success {
        ctx.dev.p.stats.inc(Counter::CompletionErrors);
    }
    if let Some(cq) = ctx.send_cq {
        ctx.pushed(cq::push(cq, cqe, false), NOTIFY_SEND);
    }
}

fn push_recv(ctx: &Ctx<'_>, cqe: &Cqe, solicited: bool) {
    if cqe.status != WcStatus::Success {
        ctx.dev.p.stats.inc(Counter::CompletionErrors);
    }
    if let Some(cq) = ctx.recv_cq {
        ctx.pushed(cq::push(cq, cqe, solicited), NOTIFY_RECV);
    }
}

/// Monotonic time in nanoseconds.
pub(crate) fn now() -> u64 {
    crate::sync::timer::ktime_ns()
}

/// Visits the pieces of `len` bytes at message offset `off` of the SGEs:
/// `f(region, address, range in the message window)` after the key, PD,
/// access (`need`) and range checks.  Fails unless the SGEs cover it all.
fn walk_sges(
    ctx: &Ctx<'_>,
    sges: SgeIter<'_>,
    off: u32,
    len: usize,
    need: Need,
    mut f: impl FnMut(&Region, u64, core::ops::Range<usize>) -> Result<(), MrError>,
) -> Result<(), MrError> {
    let len = u32::try_from(len).map_err(|_| MrError::Range)?;
    let mut done = 0u32;
    for c in net::chunks(sges, off, len) {
        let mr = crate::mr::lookup(ctx.dev, ctx.rcu, ctx.pd, c.lkey)?;
        mr.check(c.addr, c.len, need)?;
        let a = c.at as usize;
        f(mr, c.addr, a..a + c.len as usize)
            .inspect_err(|e| noted(ctx, mr, *e, c.addr, c.len, need != Need::LocalRead))?;
        done += c.len;
    }
    if done == len {
        Ok(())
    } else {
        Err(MrError::Range)
    }
}

/// Appends `dst.remaining()` bytes at message offset `off` of the SGEs to
/// `dst`.
fn gather(ctx: &Ctx<'_>, sges: SgeIter<'_>, off: u32, dst: &mut TxFill<'_>) -> Result<(), MrError> {
    walk_sges(ctx, sges, off, dst.remaining(), Need::LocalRead, |mr, va, r| {
        // The pieces come in order, each right after the one before.
        if r.start != dst.filled() {
            return Err(MrError::Range);
        }
        mr.read_into(va, r.len() as u32, dst)
    })
}

/// Copies `data` into the SGEs at message offset `off`.
fn scatter(ctx: &Ctx<'_>, sges: SgeIter<'_>, off: u32, data: &[u8]) -> Result<(), MrError> {
    walk_sges(ctx, sges, off, data.len(), Need::LocalWrite, |mr, va, r| {
        mr.write(va, data.get(r).ok_or(MrError::Range)?)
    })
}

/// Builds and transmits one packet: IP/UDP from `path`, `bth`/`ext`,
/// `payload_len` bytes appended by `fill` (straight into the skb), pad,
/// ICRC.  Returns whether it
/// was handed to the IP stack (`fill` returning `false` aborts).
fn send_pkt(
    ctx: &Ctx<'_>,
    path: &Path,
    bth: &Bth,
    ext: &Ext,
    payload_len: u32,
    fill: impl FnOnce(&mut TxFill<'_>) -> bool,
) -> bool {
    let xbth;
    let bth = if path.xrc {
        let Some(opcode) = crate::proto::opcode::xrc_of_rc(bth.opcode) else { return false };
        xbth = Bth { opcode, ..*bth };
        &xbth
    } else {
        bth
    };
    let Some(roce_len) = hdr::packet_len(bth.opcode, payload_len as usize) else { return false };
    let Some(info) = crate::proto::opcode::lookup(bth.opcode) else { return false };
    let hl = path.ip.hdr_len();
    let total = hl + roce_len;
    let Ok(total32) = u32::try_from(total) else { return false };
    // The payload's place: after the IP/UDP, BTH and extension headers.
    let pl = hl + info.hdr_len()..hl + info.hdr_len() + payload_len as usize;
    // `fill` refusing is the WQE's error (its completion says so), not the
    // network's.
    let mut refused = false;
    let filler = |dst: &mut TxFill<'_>| {
        refused = !fill(dst);
        !refused
    };
    let built = SkBuff::build_tx(&ctx.dev.p.ndev, total32, pl.clone(), filler, |buf| {
        (|| {
            if path.ip.write(buf, roce_len).ok()? != hl {
                return None;
            }
            let roce = buf.get_mut(hl..)?;
            let n = hdr::build_headers(roce, bth, ext).ok()?;
            if hl + n != pl.start {
                return None;
            }
            // Pad (and the ICRC's place) were zeroed by `build_tx`.
            if path.local {
                // Never on a wire: no ICRC (see `loopback`).
                return Some(());
            }
            icrc::write_icrc_ip(|c, d: &[u8]| ctx.dev.p.crc.update(c, d), buf).ok().map(|_| ())
        })()
        .is_some()
    });
    let Some(mut skb) = built else {
        if !refused {
            ctx.dev.p.stats.inc(Counter::TxErrors);
        }
        return false;
    };
    let ok = if path.local {
        ctx.dev.p.loopq.put(skb)
    } else {
        skb.charge(ctx.tx);
        skb.transmit(&ctx.dev.p.ndev, path.ipv6(), ctx.dst)
    };
    ctx.dev.p.stats.inc(if ok { Counter::TxPackets } else { Counter::TxErrors });
    ok
}

/// The responder's view of memory regions.
struct Mem<'a, 'b> {
    ctx: &'a Ctx<'b>,
    qp_access: u32,
}

fn access_error(e: MrError) -> AccessError {
    match e {
        MrError::BadKey => AccessError::InvalidKey,
        MrError::Range => AccessError::OutOfRange,
        MrError::Misaligned => AccessError::Misaligned,
        // A missing on-demand page here: the stall's last try failed.
        MrError::Access | MrError::NotInvalidatable | MrError::NotPresent => AccessError::NoPermission,
    }
}

impl Mem<'_, '_> {
    /// The region behind `rkey` (a region's or a window's) and the
    /// address in it, after every check.
    fn region(&self, rkey: u32, va: u64, len: u32, access: Access) -> Result<(&Region, u64), AccessError> {
        let flag = access.ib_flag();
        if !Region::qp_allows(self.qp_access, flag) {
            return Err(AccessError::NoPermission);
        }
        remote(self.ctx, rkey, va, len, flag).map_err(access_error)
    }
}

/// [`crate::mw::remote`] for the QP of `ctx`.
fn remote<'a>(ctx: &Ctx<'a>, rkey: u32, va: u64, len: u32, flag: u32) -> Result<(&'a Region, u64), MrError> {
    crate::mw::remote(ctx.dev, ctx.rcu, ctx.pd, ctx.qpn, rkey, va, len, flag)
}

/// Writes `data` (a WRITE's payload) at `va` under `rkey`.  A zero-length
/// access touches no memory, so it checks no key (IBA 9.4.4: the R_Key of
/// a zero-length RDMA WRITE is not validated; `proto::rc` skips it too).
fn remote_write(ctx: &Ctx<'_>, rkey: u32, va: u64, data: &[u8]) -> Result<(), MrError> {
    if data.is_empty() {
        return Ok(());
    }
    let n = u32::try_from(data.len()).map_err(|_| MrError::Range)?;
    let (mr, at) = remote(ctx, rkey, va, n, bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE)?;
    mr.write(at, data).inspect_err(|e| noted(ctx, mr, *e, at, n, true))
}

/// Notes a missing on-demand page (`e`) of `mr` for the section.
fn noted(ctx: &Ctx<'_>, mr: &Region, e: MrError, va: u64, len: u32, write: bool) {
    if e == MrError::NotPresent {
        ctx.note(mr, va, len, write);
    }
}

/// Appends a READ response's payload, `dst.remaining()` bytes from `va`
/// under `rkey`, to `dst`; as [`remote_write`], a zero-length READ checks
/// no key (IBA 9.4.5).
fn remote_read(ctx: &Ctx<'_>, rkey: u32, va: u64, dst: &mut TxFill<'_>) -> Result<(), MrError> {
    if dst.remaining() == 0 {
        return Ok(());
    }
    let n = u32::try_from(dst.remaining()).map_err(|_| MrError::Range)?;
    let (mr, at) = remote(ctx, rkey, va, n, bindings::ib_access_flags_IB_ACCESS_REMOTE_READ)?;
    mr.read_into(at, n, dst).inspect_err(|e| noted(ctx, mr, *e, at, n, false))
}

impl MemCheck for Mem<'_, '_> {
    fn qp_allows(&self, access: Access) -> bool {
        Region::qp_allows(self.qp_access, access.ib_flag())
    }

    fn check(&mut self, rkey: u32, va: u64, len: u32, access: Access) -> Result<(), AccessError> {
        self.region(rkey, va, len, access).map(|_| ())
    }

    fn atomic(&mut self, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, AccessError> {
        let (mr, va) = self.region(rkey, va, 8, op.access())?;
        // The engine checked the requested address; through a zero-based
        // window the target is the window's base plus it, which must be
        // aligned too.
        if va & 7 != 0 {
            return Err(AccessError::Misaligned);
        }
        mr.atomic(va, op).map_err(access_error)
    }

    fn flush(&mut self, rkey: u32, range: Option<(u64, u32)>, placement: u8) -> Result<(), AccessError> {
        let flag = crate::proto::qp::flush_access(placement);
        if !Region::qp_allows(self.qp_access, flag) {
            return Err(AccessError::NoPermission);
        }
        // The whole region: its key and access, no range.
        let (va, len) = range.unwrap_or((0, 0));
        remote(self.ctx, rkey, va, len, flag).map_err(access_error)?;
        // Global visibility: the writes this responder made to the region
        // are CPU stores; a full fence orders them before the response
        // that follows.  (Persistence is never granted: no region carries
        // IB_ACCESS_FLUSH_PERSISTENT, see limits.)
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    fn invalidate(&mut self, rkey: u32) -> Result<(), AccessError> {
        // A type-2B window only through the QP it is bound to.
        let (dev, rcu, pd) = (self.ctx.dev, self.ctx.rcu, self.ctx.pd);
        match crate::mw::invalidate(dev, rcu, pd, Some(self.ctx.qpn), rkey) {
            Some(r) => r.map_err(|_| AccessError::InvalidKey),
            None => crate::mr::invalidate_key(dev, rcu, pd, rkey).map_err(access_error),
        }
    }
}

/// The responder's view of the RQ: the head entry, copied and validated.
struct Rq<'a> {
    ring: &'a SharedBuf,
    cons: &'a mut Consumer,
    scratch: &'a mut [u8],
    ok: &'a mut bool,
    lim: &'a RecvLimits,
}

impl RecvSource for Rq<'_> {
    fn peek_len(&mut self) -> Option<u32> {
        let off = self.cons.peek(self.ring).ok()??;
        if !crate::proto::ring::SharedRegion::read(self.ring, off, self.scratch) {
            return None;
        }
        match wqe::decode_recv(self.scratch, self.lim) {
            Ok(v) => {
                *self.ok = true;
                Some(v.length)
            }
            Err(_) => {
                // Garbage: take it and fail it (a zero-length buffer makes
                // any payload a length error).
                *self.ok = false;
                Some(0)
            }
        }
    }
}
