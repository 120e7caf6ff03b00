// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Completion queues: created by the kernel, polled entirely in user space.
//!
//! `create_cq` sends `CreateCqCmd` as driver data, validates the
//! `CreateCqResp` that comes back and maps the ring.  `poll_cq` is the
//! ring's consumer: it copies each CQE out of the mapping, decodes it with
//! [`Cqe::decode`] and releases the slots it consumed (one release-store of
//! the consumer index per call).  A CQE that does not decode, or a producer
//! index that the ring protocol rejects, breaks the CQ for good: that
//! `poll_cq` call returns the completions before the bad entry (or
//! `-EIO` if there were none), every later call returns `-EIO`.  So does
//! a CQ whose ring the kernel closed (`ring::PROD_CLOSED`: ib_core
//! destroyed the CQ because its device was removed) once it is empty,
//! instead of returning 0 forever.
//!
//! `resize_cq` holds the ring lock (so no `poll_cq` runs meanwhile) while
//! it sends `RESIZE_CQ` with a `ResizeCqCmd`; the kernel moves the unpolled
//! CQEs into a new ring at the same indices and answers with its geometry
//! (`ResizeCqResp`).  The provider maps the new ring, attaches its consumer
//! (which must continue at the index the old one reached), and only then
//! unmaps the old ring.  If the kernel refuses, nothing changes.  If the
//! kernel accepted but the new ring cannot be used (mmap fails, the reply
//! breaks the ABI), the CQ is marked broken: the kernel already produces
//! into the new ring and there is no way back.

use core::ffi::c_int;
use core::mem::{offset_of, MaybeUninit};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rroce_proto::abi::CreateCqResp;
use rroce_proto::ring::{Consumer, RingLayout};
use rroce_proto::wqe::{Cqe, CQE_BYTES};

use crate::device::warn;
use crate::ffi::*;
use crate::pd::RrocePd;
use crate::session::SessionLock;

/// The consumer side of a CQ ring.
struct CqRing {
    map: RingMap,
    consumer: Consumer,
    /// Set once the ring or an entry was found corrupt.
    broken: bool,
    /// The completion `start_poll`/`next_poll` consumed last (what the
    /// `read_*` functions of `ibv_cq_ex` report) and its timestamp.
    current: IbvWc,
    current_ts: u64,
}

/// Provider CQ; libibverbs sees only `ibv`: an `ibv_cq`, or for a CQ made
/// by `create_cq_ex` the `ibv_cq_ex` (`verbs_cq`) that begins with it.
#[repr(C)]
pub(crate) struct RroceCq {
    ibv: Opaque<IbvCqEx>,
    cqn: u32,
    ring: Mutex<Option<CqRing>>,
    /// Held from a successful `start_poll` to `end_poll`, and by
    /// `poll_cq`, `resize_cq` and a QP's purge meanwhile: the completion
    /// the `read_*` functions report is one slot of the CQ
    /// ([`crate::session`]).
    session: SessionLock,
    /// The parent domain of `IBV_CQ_INIT_ATTR_MASK_PD`, held while the CQ
    /// lives.  A CQ has no buffer of the provider's own (its ring is
    /// kernel memory, a CQE is decoded on the stack), so its allocator is
    /// not used.
    _domain: Option<Arc<RrocePd>>,
}
const _: () = assert!(offset_of!(RroceCq, ibv) == 0);

/// A CQ's ring has not been attached (never the case for a created CQ).
const NO_RING: c_int = EINVAL;

impl RroceCq {
    /// A CQ without a ring yet, its C part zeroed, on parent domain
    /// `domain` (`None`: none given).
    pub(crate) fn new(domain: Option<Arc<RrocePd>>) -> Self {
        Self {
            ibv: Opaque::zeroed(),
            cqn: 0,
            ring: Mutex::new(None),
            session: SessionLock::new(),
            _domain: domain,
        }
    }

    /// The C part (the kernel's user_handle for this CQ: it must not move).
    pub(crate) fn ibv(&self) -> *mut IbvCqEx {
        self.ibv.get()
    }

    fn lock(&self) -> MutexGuard<'_, Option<CqRing>> {
        self.ring.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the ring the kernel made for this CQ (`CREATE_CQ` succeeded
    /// with `drv`; the core reported depth `core_cqe` for `requested`
    /// entries).  `EPROTO` if the answer breaks the rroce ABI, or mmap's
    /// errno; a warning says why.
    pub(crate) fn attach(
        &mut self,
        cmd_fd: c_int,
        drv: &CreateCqResp,
        core_cqe: c_int,
        requested: c_int,
    ) -> Result<(), c_int> {
        match map_cq_ring(cmd_fd, drv, core_cqe, requested) {
            Ok(ring) => {
                self.cqn = drv.cqn;
                *self.ring.get_mut().unwrap_or_else(PoisonError::into_inner) = Some(ring);
                Ok(())
            }
            Err((err, why)) => {
                warn(format_args!("create_cq: {why} (cqn {})", drv.cqn));
                Err(err)
            }
        }
    }

    /// `ibv_poll_cq`: the number of completions written to the start of
    /// `out`, or a negative errno value: `-EIO` once the CQ is broken.
    pub(crate) fn poll(&self, out: &mut [MaybeUninit<IbvWc>]) -> c_int {
        let _session = self.session.scope();
        let mut guard = self.lock();
        let Some(ring) = guard.as_mut() else {
            return -NO_RING;
        };
        let max = out.len();
        let write = |i: usize, c: &Cqe| {
            if let Some(slot) = out.get_mut(i) {
                slot.write(wc_of(c));
            }
        };
        match drain(ring, self.cqn, write, max) {
            Drained::Ok(n) => c_int::try_from(n).unwrap_or(c_int::MAX),
            Drained::Broken(0) => -EIO,
            Drained::Broken(n) => c_int::try_from(n).unwrap_or(c_int::MAX),
        }
    }

    /// `start_poll`: takes the CQ's session (it waits for another
    /// thread's to end) and [`RroceCq::poll_one`]; the session stays taken
    /// until `end_poll` if that succeeded (the application calls
    /// `end_poll` only then), and ends now if not.
    pub(crate) fn start_poll(&self) -> Result<IbvWc, c_int> {
        self.session.acquire();
        let r = self.poll_one();
        if r.is_err() {
            self.session.release();
        }
        r
    }

    /// `end_poll`: ends the session `start_poll` began.
    pub(crate) fn end_poll(&self) {
        self.session.release();
    }

    /// Consumes the next completion for `start_poll`/`next_poll` and keeps
    /// it for the `read_*` functions: `ENOENT` if the CQ is empty, `EIO`
    /// once it is broken.
    pub(crate) fn poll_one(&self) -> Result<IbvWc, c_int> {
        let mut guard = self.lock();
        let Some(ring) = guard.as_mut() else {
            return Err(NO_RING);
        };
        let mut got = None;
        // A completion read before the ring turned out broken is still
        // delivered; the next call reports EIO.
        let _ = drain(ring, self.cqn, |_, c| got = Some(*c), 1);
        let Some(c) = got else {
            return Err(if ring.broken { EIO } else { ENOENT });
        };
        let w = wc_of(&c);
        ring.current = w;
        ring.current_ts = c.timestamp;
        Ok(w)
    }

    /// The completion the last `start_poll`/`next_poll` returned.
    pub(crate) fn current(&self) -> IbvWc {
        self.lock().as_ref().map(|r| r.current).unwrap_or_default()
    }

    /// The timestamp of that completion: the kernel's CLOCK_MONOTONIC in
    /// ns when it wrote the CQE (0 unless the CQ asked for timestamps).
    pub(crate) fn current_ts(&self) -> u64 {
        self.lock().as_ref().map_or(0, |r| r.current_ts)
    }

    /// `ibv_resize_cq` to `cqe` entries: 0 or an errno value.
    ///
    /// Holds the ring lock across `command` (which sends RESIZE_CQ and
    /// returns its result and the core's new depth), so that no poll
    /// consumes from the old ring while the kernel copies what is left in
    /// it.
    pub(crate) fn resize(
        &self,
        cqe: c_int,
        cmd_fd: c_int,
        command: impl FnOnce(&mut RroceResizeCqCmd, &mut RroceResizeCqResp) -> (c_int, c_int),
    ) -> c_int {
        let cqn = self.cqn;
        let _session = self.session.scope();
        let mut guard = self.lock();
        let Some(ring) = guard.as_mut() else {
            return NO_RING;
        };
        if ring.broken {
            return EIO;
        }
        let mut cmd = RroceResizeCqCmd::default();
        let mut resp = RroceResizeCqResp::default();
        let (ret, core_cqe) = command(&mut cmd, &mut resp);
        if ret != 0 {
            return crate::device::errno_of(ret);
        }
        let d = resp.drv;
        let geometry = CreateCqResp {
            mmap_offset: d.mmap_offset,
            ring_bytes: d.ring_bytes,
            entries: d.entries,
            entry_size: d.entry_size,
            cqn,
        };
        let new = map_cq_ring(cmd_fd, &geometry, core_cqe, cqe).and_then(|new| {
            // The kernel moved the unpolled CQEs to the same indices: the
            // new consumer starts exactly where this one stopped.
            if new.consumer.index() == ring.consumer.released() && ring.consumer.unreleased() == 0 {
                Ok(new)
            } else {
                Err((EPROTO, "resized CQ ring does not continue the old one"))
            }
        });
        match new {
            Ok(new) => {
                // Dropping the old ring unmaps it.
                *ring = new;
                0
            }
            Err((err, why)) => {
                warn(format_args!(
                    "resize_cq: {why} (cqn {cqn}); the kernel resized the CQ, which is unusable now"
                ));
                ring.broken = true;
                err
            }
        }
    }

    /// Removes the unpolled completions of QP `qpn` (the QP went to RESET:
    /// its old completions must not surface once it is reused, as on
    /// hardware providers).  A broken CQ is left alone.
    pub(crate) fn purge_qp(&self, qpn: u32) {
        let _session = self.session.scope();
        let mut g = self.lock();
        let Some(ring) = g.as_mut() else { return };
        if ring.broken {
            return;
        }
        let region = ring.map.region();
        let keep = |e: &[u8]| {
            <&[u8; CQE_BYTES]>::try_from(e)
                .ok()
                .and_then(|b| Cqe::decode(b).ok())
                .is_none_or(|c| c.qp_num != qpn)
        };
        if let Err(e) = ring.consumer.purge(&region, keep) {
            warn(format_args!(
                "CQ ring error {e:?} while removing QP {qpn}'s completions"
            ));
            ring.broken = true;
        }
    }
}

/// Checks the ring geometry of a `CreateCqResp` (or of a `ResizeCqResp`,
/// whose fields are the same) and maps the ring.
fn map_cq_ring(
    cmd_fd: c_int,
    drv: &CreateCqResp,
    core_cqe: c_int,
    requested: c_int,
) -> Result<CqRing, (c_int, &'static str)> {
    let layout = RingLayout::from_resp(drv.entries, drv.entry_size, drv.ring_bytes)
        .map_err(|_| (EPROTO, "invalid CQ ring geometry"))?;
    if (drv.entry_size as usize) < CQE_BYTES {
        return Err((EPROTO, "CQ entries smaller than a CQE"));
    }
    // The CQ depth the core reported (`cq->cqe`, what the application may
    // rely on; libibverbs fills it on both the write and the ioctl path,
    // while `resp.core` is only written on the former) must fit the ring,
    // and the ring must hold what was asked for.
    let requested = u32::try_from(requested).unwrap_or(0);
    let core_cqe = u32::try_from(core_cqe).unwrap_or(u32::MAX);
    if core_cqe > drv.entries || drv.entries < requested {
        return Err((EPROTO, "CQ ring smaller than the CQ"));
    }
    let map = RingMap::map(cmd_fd, drv.mmap_offset, drv.ring_bytes, layout)
        .map_err(|e| (e, "mapping the CQ ring failed"))?;
    let consumer = Consumer::attach(layout, &map.region())
        .map_err(|_| (EPROTO, "CQ ring header is inconsistent"))?;
    Ok(CqRing {
        map,
        consumer,
        broken: false,
        current: IbvWc::default(),
        current_ts: 0,
    })
}

/// `ibv_cq_init_attr_ex.comp_mask` bits `create_cq_ex` understands.
const CQ_INIT_ATTR_SUPPORTED: u32 = IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD;

/// `ibv_cq_init_attr_ex.wc_flags` the extended CQ offers: every field of
/// `ibv_wc` (`IBV_WC_STANDARD_FLAGS`) and completion timestamps, in device
/// clock ticks (the kernel's CLOCK_MONOTONIC ns: `hca_core_clock` 1 GHz)
/// and as wall-clock ns.  rroce has no CVLAN, flow tags or tag matching.
pub(crate) const CQ_EX_WC_FLAGS: u64 = IBV_WC_STANDARD_FLAGS
    | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP
    | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;

/// Checks the attributes of `ibv_create_cq_ex`: `EOPNOTSUPP` for wc_flags
/// beyond [`CQ_EX_WC_FLAGS`], unknown `comp_mask` bits or creation flags
/// other than `IBV_CREATE_CQ_ATTR_SINGLE_THREADED` (a hint only); `EINVAL`
/// for a depth of 0 or above `INT_MAX`.  (With `IBV_CQ_INIT_ATTR_MASK_PD`,
/// the entry point checks that `parent_domain` is a parent domain.)
pub(crate) fn check_cq_init_attr_ex(a: &IbvCqInitAttrEx) -> Result<c_int, c_int> {
    if a.wc_flags & !CQ_EX_WC_FLAGS != 0 {
        return Err(EOPNOTSUPP);
    }
    if a.comp_mask & !CQ_INIT_ATTR_SUPPORTED != 0 {
        return Err(EOPNOTSUPP);
    }
    if a.comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS != 0
        && a.flags & !IBV_CREATE_CQ_ATTR_SINGLE_THREADED != 0
    {
        return Err(EOPNOTSUPP);
    }
    match c_int::try_from(a.cqe) {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(EINVAL),
    }
}

/// The `ibv_wc` for a decoded CQE.
pub(crate) fn wc_of(c: &Cqe) -> IbvWc {
    IbvWc {
        wr_id: c.wr_id,
        status: c_int::from(c.status as u8),
        opcode: c_int::from(c.opcode as u8),
        vendor_err: c.vendor_err,
        byte_len: c.byte_len,
        // Stored as on the wire (a __be32's memory bytes) or a host-order
        // rkey: either way the native u32 carries the bytes unchanged.
        imm_data: c.imm_or_inv,
        qp_num: c.qp_num,
        src_qp: c.src_qp,
        wc_flags: u32::from(c.wc_flags),
        pkey_index: c.pkey_index,
        slid: c.slid,
        sl: c.sl,
        dlid_path_bits: c.dlid_path_bits,
    }
}

/// Outcome of draining up to `max` CQEs.
#[derive(Debug, PartialEq, Eq)]
enum Drained {
    /// This many completions were written.
    Ok(usize),
    /// This many were written, then the CQ turned out broken.
    Broken(usize),
}

/// Consumes up to `max` CQEs of `ring`, handing each to `out`.
fn drain(ring: &mut CqRing, cqn: u32, out: impl FnMut(usize, &Cqe), max: usize) -> Drained {
    let CqRing {
        map,
        consumer,
        broken,
        ..
    } = ring;
    drain_parts(map, consumer, broken, cqn, out, max)
}

/// [`drain`] on the parts of a [`CqRing`].
fn drain_parts(
    map: &RingMap,
    consumer: &mut Consumer,
    is_broken: &mut bool,
    cqn: u32,
    mut out: impl FnMut(usize, &Cqe),
    max: usize,
) -> Drained {
    if *is_broken {
        return Drained::Broken(0);
    }
    let region = map.region();
    let mut n = 0;
    let mut broken = false;
    while n < max {
        let mut buf = [0u8; CQE_BYTES];
        match consumer.read_next(&region, &mut buf) {
            Ok(true) => {}
            Ok(false) => {
                if consumer.closed_and_drained(&region) {
                    warn(format_args!(
                        "CQ {cqn}: destroyed by the kernel (device removed); no more completions"
                    ));
                    broken = true;
                }
                break;
            }
            Err(e) => {
                warn(format_args!("CQ {cqn}: ring error {e:?}; CQ is unusable"));
                broken = true;
                break;
            }
        }
        match Cqe::decode(&buf) {
            Ok(c) => {
                out(n, &c);
                n += 1;
            }
            Err(e) => {
                warn(format_args!(
                    "CQ {cqn}: corrupt CQE ({e:?}); CQ is unusable"
                ));
                broken = true;
                break;
            }
        }
    }
    if consumer.unreleased() > 0 && consumer.release_all(&region).is_err() {
        broken = true;
    }
    if broken {
        *is_broken = true;
        Drained::Broken(n)
    } else {
        Drained::Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rroce_proto::ring::{Producer, SharedRegion, CONS_OFFSET};
    use rroce_proto::wqe::{WcOpcode, WcStatus, WC_WITH_IMM};

    fn ring(entries: u32) -> CqRing {
        let layout = RingLayout::new(entries, CQE_BYTES as u32, 1024).unwrap();
        let map = RingMap::anonymous(layout);
        let consumer = Consumer::attach(layout, &map.region()).unwrap();
        CqRing {
            map,
            consumer,
            broken: false,
            current: IbvWc::default(),
            current_ts: 0,
        }
    }

    fn cqe(i: u64) -> Cqe {
        let mut c = Cqe::new(i, WcStatus::Success, WcOpcode::Recv, 0x42);
        c.wc_flags = WC_WITH_IMM;
        c.imm_or_inv = u32::from_ne_bytes([1, 2, 3, 4]);
        c.byte_len = i as u32 * 10;
        c.src_qp = 7;
        c.pkey_index = 1;
        c.slid = 2;
        c.sl = 3;
        c.dlid_path_bits = 4;
        c.vendor_err = 5;
        c
    }

    #[test]
    fn wc_fields() {
        let w = wc_of(&cqe(9));
        assert_eq!(
            w,
            IbvWc {
                wr_id: 9,
                status: 0,
                opcode: 128,
                vendor_err: 5,
                byte_len: 90,
                imm_data: u32::from_ne_bytes([1, 2, 3, 4]),
                qp_num: 0x42,
                src_qp: 7,
                wc_flags: 2,
                pkey_index: 1,
                slid: 2,
                sl: 3,
                dlid_path_bits: 4,
            }
        );
    }

    #[test]
    fn drain_releases_and_breaks_on_garbage() {
        let mut r = ring(4);
        let layout = *r.map.layout();
        let region = r.map.region();
        let mut kernel = Producer::attach(layout, &region).unwrap();
        let mut got = Vec::new();
        for round in 0..5u64 {
            for i in 0..4 {
                kernel
                    .push(&region, &cqe(round * 4 + i).to_bytes())
                    .unwrap();
            }
            assert_eq!(kernel.is_full(&region), Ok(true));
            let d = drain_parts(
                &r.map,
                &mut r.consumer,
                &mut r.broken,
                1,
                |_, w| got.push(w.wr_id),
                3,
            );
            assert_eq!(d, Drained::Ok(3));
            let d = drain_parts(
                &r.map,
                &mut r.consumer,
                &mut r.broken,
                1,
                |_, w| got.push(w.wr_id),
                8,
            );
            assert_eq!(d, Drained::Ok(1));
            assert_eq!(
                region.load_u32_acquire(CONS_OFFSET),
                Some(4 * (round as u32 + 1))
            );
        }
        assert_eq!(got, (0..20).collect::<Vec<_>>());

        // One good CQE, then one with an undefined status.
        kernel.push(&region, &cqe(100).to_bytes()).unwrap();
        let mut bad = cqe(101).to_bytes();
        bad[8] = 200;
        kernel.push(&region, &bad).unwrap();
        let mut n = 0;
        assert_eq!(
            drain_parts(&r.map, &mut r.consumer, &mut r.broken, 1, |_, _| n += 1, 8),
            Drained::Broken(1)
        );
        kernel.push(&region, &cqe(102).to_bytes()).unwrap();
        assert_eq!(
            drain_parts(&r.map, &mut r.consumer, &mut r.broken, 1, |_, _| n += 1, 8),
            Drained::Broken(0)
        );
        assert_eq!(n, 1);
    }

    #[test]
    fn closed_ring_ends_polling_after_its_last_completions() {
        fn poll(r: &mut CqRing, got: &mut Vec<u64>, max: usize) -> Drained {
            drain_parts(
                &r.map,
                &mut r.consumer,
                &mut r.broken,
                1,
                |_, w| got.push(w.wr_id),
                max,
            )
        }
        let mut r = ring(4);
        let layout = *r.map.layout();
        let mut kernel = Producer::attach(layout, &r.map.region()).unwrap();
        let mut got = Vec::new();
        assert_eq!(poll(&mut r, &mut got, 8), Drained::Ok(0));
        {
            let region = r.map.region();
            kernel.push(&region, &cqe(1).to_bytes()).unwrap();
            kernel.push(&region, &cqe(2).to_bytes()).unwrap();
            kernel.close(&region).unwrap();
        }
        // What was published before the close is delivered first.
        assert_eq!(poll(&mut r, &mut got, 1), Drained::Ok(1));
        assert_eq!(poll(&mut r, &mut got, 8), Drained::Broken(1));
        assert_eq!(poll(&mut r, &mut got, 8), Drained::Broken(0));
        assert!(r.broken);
        assert_eq!(got, [1, 2]);
    }

    #[test]
    fn impossible_producer_index() {
        let mut r = ring(2);
        let region = r.map.region();
        assert!(region.store_u32_release(0, 3));
        assert_eq!(
            drain_parts(&r.map, &mut r.consumer, &mut r.broken, 1, |_, _| {}, 8),
            Drained::Broken(0)
        );
    }
}
