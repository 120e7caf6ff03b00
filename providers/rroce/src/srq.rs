// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Shared receive queues, basic and XRC: the kernel creates the SRQ and
//! hands out its receive ring (the RQ format); the provider is its
//! producer.
//!
//! An XRC SRQ (`ibv_create_srq_ex` with `IBV_SRQT_XRC`, an XRC domain and
//! a CQ) is a basic SRQ to the provider: the same driver command and
//! response, the same ring and `post_srq_recv`; its SRQ number (what XRC
//! senders name, `ibv_get_srq_num`) is the core response's `srqn`, which
//! libibverbs keeps in the `verbs_srq`.  Tag-matching SRQs are not
//! supported (`EOPNOTSUPP`).
//!
//! `post_srq_recv` encodes each work request like `post_recv` does for an
//! RQ (validated with the kernel's decoder) and publishes the producer
//! index once; the kernel reads the ring when a message arrives for any
//! QP attached to the SRQ, so there is no system call.  `modify_srq`
//! with `IBV_SRQ_MAX_WR` resizes the ring ([`RroceSrq::resize`]);
//! otherwise it, `query_srq` and `destroy_srq` are plain commands.

use core::ffi::c_int;
use core::mem::offset_of;
use std::sync::{Arc, Mutex, PoisonError};

use rroce_proto::abi::{CreateSrqResp, ResizeSrqResp};
use rroce_proto::ring::Producer;
use rroce_proto::wqe::{recv_max_sge, RecvLimits, MAX_MSG_SIZE};

use crate::device::warn;
use crate::ffi::alloc::RES_TYPE_SRQ;
use crate::ffi::*;
use crate::pd::{buffers, RrocePd};
use crate::qp::{check_ring, post_recv_list, PostError, RecvRequest, WorkQueue};

/// Provider SRQ, basic or XRC; libibverbs sees only `vsrq` (the
/// `verbs_srq`, whose tail it fills for an XRC SRQ).
#[repr(C)]
pub(crate) struct RroceSrq {
    vsrq: Opaque<VerbsSrq>,
    lim: RecvLimits,
    rq: Mutex<Option<WorkQueue>>,
    /// The parent domain the SRQ was created on (`None`: a protection
    /// domain), held while the SRQ lives; dropped after the queue.
    domain: Option<Arc<RrocePd>>,
}
const _: () = assert!(offset_of!(RroceSrq, vsrq) == 0);

impl RroceSrq {
    /// An SRQ without a ring yet, its C part zeroed, on parent domain
    /// `domain` (`None`: a protection domain).
    pub(crate) fn new(domain: Option<Arc<RrocePd>>) -> Self {
        Self {
            vsrq: Opaque::zeroed(),
            lim: RecvLimits {
                max_sge: 0,
                max_msg_size: 0,
            },
            rq: Mutex::new(None),
            domain,
        }
    }

    /// The C part (the kernel's user_handle for this SRQ: it must not move).
    pub(crate) fn vsrq(&self) -> *mut VerbsSrq {
        self.vsrq.get()
    }

    /// The `ibv_srq` of the C part (its first member).
    pub(crate) fn ibv(&self) -> *mut IbvSrq {
        self.vsrq().cast::<IbvSrq>()
    }

    /// Takes the ring the kernel made for this SRQ (CREATE_SRQ or
    /// CREATE_XSRQ succeeded with `drv`; `core_srqn`: the SRQ number the
    /// core response gave an XRC SRQ), checked against `requested`;
    /// returns the capacities it really has.  `EPROTO` if the answer
    /// breaks the rroce ABI, or mmap's errno; a warning says why.
    pub(crate) fn attach(
        &mut self,
        cmd_fd: c_int,
        drv: &CreateSrqResp,
        core_srqn: Option<u32>,
        requested: &IbvSrqAttr,
    ) -> Result<IbvSrqAttr, c_int> {
        let source = buffers(self.domain.as_deref(), RES_TYPE_SRQ);
        let mapped = match core_srqn {
            Some(n) if n != drv.srqn => {
                Err((EPROTO, "SRQ numbers of core and driver response differ"))
            }
            _ => map_srq_ring(cmd_fd, drv, requested, &source),
        };
        match mapped {
            Ok((lim, wq)) => {
                self.lim = lim;
                *self.rq.get_mut().unwrap_or_else(PoisonError::into_inner) = Some(wq);
                Ok(IbvSrqAttr {
                    max_wr: drv.entries,
                    max_sge: drv.max_sge,
                    srq_limit: requested.srq_limit,
                })
            }
            Err((err, why)) => {
                warn(format_args!("create_srq: {why} (srqn {})", drv.srqn));
                Err(err)
            }
        }
    }

    /// `ibv_modify_srq` with `IBV_SRQ_MAX_WR`: 0 or an errno value.
    ///
    /// Holds the ring lock across `command` (MODIFY_SRQ, whose driver
    /// data names where the kernel writes the new ring's
    /// [`ResizeSrqResp`]), so that no post lands in the old ring while the
    /// kernel copies the posted WQEs to the same indices of the new one;
    /// then maps the new ring and continues producing there (the old one
    /// is unmapped).  If the new ring cannot be taken over after the
    /// kernel switched, the SRQ is unusable (posts give `EINVAL`).
    pub(crate) fn resize(
        &self,
        cmd_fd: c_int,
        want: u32,
        command: impl FnOnce(&mut RroceModifySrqCmd) -> c_int,
    ) -> c_int {
        let mut guard = self.rq.lock().unwrap_or_else(PoisonError::into_inner);
        if guard.is_none() {
            return EINVAL;
        }
        let mut answer = [0u8; ResizeSrqResp::SIZE];
        let mut cmd = RroceModifySrqCmd::default();
        cmd.drv.resp_addr = answer.as_mut_ptr() as u64;
        let ret = command(&mut cmd);
        if ret != 0 {
            return crate::device::errno_of(ret);
        }
        let d = ResizeSrqResp::from_bytes(&answer);
        let taken = check_ring(d.entries, d.entry_size, d.ring_bytes)
            .map_err(|why| (EPROTO, why))
            .and_then(|layout| {
                if d.entries < want {
                    return Err((EPROTO, "SRQ smaller than requested"));
                }
                let map = RingMap::map(cmd_fd, d.mmap_offset, d.ring_bytes, layout)
                    .map_err(|e| (e, "mapping the SRQ ring failed"))?;
                let producer = Producer::attach(layout, &map.region())
                    .map_err(|_| (EPROTO, "ring header is inconsistent"))?;
                Ok((map, producer))
            });
        match (taken, guard.as_mut()) {
            (Ok((map, producer)), Some(wq)) if wq.map.layout().entry_size() == d.entry_size => {
                // Dropping the old map unmaps the old ring.
                wq.map = map;
                wq.producer = producer;
                0
            }
            (r, _) => {
                let (err, why) = r.err().unwrap_or((EPROTO, "entry size changed"));
                warn(format_args!(
                    "modify_srq: {why}; the kernel resized the SRQ, which is unusable now"
                ));
                *guard = None;
                err
            }
        }
    }

    /// The SRQ's capacity (its ring's entries; 0 once unusable).
    pub(crate) fn max_wr(&self) -> u32 {
        let g = self.rq.lock().unwrap_or_else(PoisonError::into_inner);
        g.as_ref().map_or(0, |wq| wq.map.layout().entries())
    }

    /// The most SGEs a receive request may have.
    pub(crate) fn max_sge(&self) -> u16 {
        self.lim.max_sge
    }

    /// `ibv_post_srq_recv` of `wrs` (`EINVAL` for a bad request, `ENOMEM`
    /// when the SRQ is full, `EIO` once the ring is broken).  No system
    /// call.
    pub(crate) fn post_recv<'a>(
        &self,
        wrs: impl IntoIterator<Item = RecvRequest<'a>>,
    ) -> Result<(), PostError> {
        let mut guard = self.rq.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(rq) = guard.as_mut() else {
            return Err(PostError {
                bad: Some(0),
                err: EINVAL,
            });
        };
        post_recv_list(&self.lim, rq, wrs)
    }
}

/// `ibv_srq_init_attr_ex.comp_mask` bits `create_srq_ex` understands.
const SRQ_INIT_ATTR_SUPPORTED: u32 =
    IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;

/// Checks the attributes of `ibv_create_srq_ex` and returns the SRQ type:
/// `EOPNOTSUPP` for tag matching (`IBV_SRQ_INIT_ATTR_TM`, `IBV_SRQT_TM`)
/// and unknown bits or types, `EINVAL` without a PD, or for an XRC SRQ
/// without its XRC domain and CQ.
pub(crate) fn check_srq_init_attr_ex(a: &IbvSrqInitAttrEx) -> Result<c_int, c_int> {
    let has = |bit: u32| a.comp_mask & bit != 0;
    if a.comp_mask & !SRQ_INIT_ATTR_SUPPORTED != 0 {
        return Err(EOPNOTSUPP);
    }
    if !has(IBV_SRQ_INIT_ATTR_PD) || a.pd.is_null() {
        return Err(EINVAL);
    }
    let srq_type = if has(IBV_SRQ_INIT_ATTR_TYPE) {
        a.srq_type
    } else {
        IBV_SRQT_BASIC
    };
    match srq_type {
        IBV_SRQT_BASIC => Ok(srq_type),
        IBV_SRQT_XRC
            if has(IBV_SRQ_INIT_ATTR_XRCD)
                && !a.xrcd.is_null()
                && has(IBV_SRQ_INIT_ATTR_CQ)
                && !a.cq.is_null() =>
        {
            Ok(srq_type)
        }
        IBV_SRQT_XRC => Err(EINVAL),
        _ => Err(EOPNOTSUPP),
    }
}

/// `ibv_get_srq_num` of an SRQ of type `srq_type` whose `verbs_srq` holds
/// `srq_num`: the number of an XRC SRQ; `EINVAL` for a basic SRQ, which
/// XRC senders cannot name.
pub(crate) fn srq_num(srq_type: c_int, srq_num: u32) -> Result<u32, c_int> {
    if srq_type == IBV_SRQT_XRC {
        Ok(srq_num)
    } else {
        Err(EINVAL)
    }
}

/// The ring of a new SRQ from the kernel's response, checked against
/// what was requested.
fn map_srq_ring(
    cmd_fd: c_int,
    drv: &CreateSrqResp,
    req: &IbvSrqAttr,
    source: &Source,
) -> Result<(RecvLimits, WorkQueue), (c_int, &'static str)> {
    let proto = |why| (EPROTO, why);
    let layout = check_ring(drv.entries, drv.entry_size, drv.ring_bytes).map_err(proto)?;
    let max_sge = u16::try_from(drv.max_sge).map_err(|_| proto("max_sge"))?;
    if max_sge > recv_max_sge(drv.entry_size) {
        return Err(proto("SRQ capacities do not fit the entries"));
    }
    if drv.entries < req.max_wr || drv.max_sge < req.max_sge {
        return Err(proto("SRQ smaller than requested"));
    }
    let map = RingMap::map(cmd_fd, drv.mmap_offset, drv.ring_bytes, layout)
        .map_err(|e| (e, "mapping the SRQ ring failed"))?;
    let producer = Producer::attach(layout, &map.region())
        .map_err(|_| proto("ring header is inconsistent"))?;
    let lim = RecvLimits {
        max_sge,
        max_msg_size: MAX_MSG_SIZE,
    };
    let wq = WorkQueue::new(map, producer, max_sge, 0, source)
        .map_err(|e| (e, "allocating the SRQ buffers failed"))?;
    Ok((lim, wq))
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::ptr;

    #[test]
    fn srq_init_attr_ex_checks() {
        let mut pd = core::mem::MaybeUninit::<IbvPd>::uninit();
        let mut xrcd = IbvXrcd {
            context: ptr::null_mut(),
        };
        let mut cq = core::mem::MaybeUninit::<IbvCq>::uninit();
        let xrc = IbvSrqInitAttrEx {
            srq_context: ptr::null_mut(),
            attr: IbvSrqAttr::default(),
            comp_mask: IBV_SRQ_INIT_ATTR_TYPE
                | IBV_SRQ_INIT_ATTR_PD
                | IBV_SRQ_INIT_ATTR_XRCD
                | IBV_SRQ_INIT_ATTR_CQ,
            srq_type: IBV_SRQT_XRC,
            pd: pd.as_mut_ptr(),
            xrcd: &raw mut xrcd,
            cq: cq.as_mut_ptr(),
            tm_cap: [0; 2],
        };
        assert_eq!(check_srq_init_attr_ex(&xrc), Ok(IBV_SRQT_XRC));
        // Without a type: basic, whatever `srq_type` says.
        let untyped = IbvSrqInitAttrEx {
            comp_mask: IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ,
            ..xrc
        };
        assert_eq!(check_srq_init_attr_ex(&untyped), Ok(IBV_SRQT_BASIC));
        let cases = [
            (
                IbvSrqInitAttrEx {
                    comp_mask: xrc.comp_mask & !IBV_SRQ_INIT_ATTR_XRCD,
                    ..xrc
                },
                EINVAL,
            ),
            (
                IbvSrqInitAttrEx {
                    cq: ptr::null_mut(),
                    ..xrc
                },
                EINVAL,
            ),
            (
                IbvSrqInitAttrEx {
                    comp_mask: xrc.comp_mask & !IBV_SRQ_INIT_ATTR_PD,
                    ..xrc
                },
                EINVAL,
            ),
            // IBV_SRQT_TM, IBV_SRQ_INIT_ATTR_TM, an unknown bit.
            (IbvSrqInitAttrEx { srq_type: 2, ..xrc }, EOPNOTSUPP),
            (
                IbvSrqInitAttrEx {
                    comp_mask: xrc.comp_mask | 1 << 4,
                    ..xrc
                },
                EOPNOTSUPP,
            ),
            (
                IbvSrqInitAttrEx {
                    comp_mask: xrc.comp_mask | 1 << 5,
                    ..xrc
                },
                EOPNOTSUPP,
            ),
        ];
        for (a, err) in cases {
            assert_eq!(check_srq_init_attr_ex(&a), Err(err), "{:#x}", a.comp_mask);
        }
        assert_eq!(srq_num(IBV_SRQT_XRC, 77), Ok(77));
        assert_eq!(srq_num(IBV_SRQT_BASIC, 0), Err(EINVAL));
    }

    #[test]
    fn srq_response_checks() {
        let req = IbvSrqAttr {
            max_wr: 16,
            max_sge: 1,
            srq_limit: 0,
        };
        let good = CreateSrqResp {
            mmap_offset: 0,
            ring_bytes: 8192,
            entries: 16,
            entry_size: 64,
            max_sge: 3,
            srqn: 1,
            reserved: 0,
        };
        // Geometry is checked before anything is mapped.
        let bad_sge = CreateSrqResp { max_sge: 4, ..good };
        assert_eq!(
            map_srq_ring(-1, &bad_sge, &req, &Source::Heap)
                .err()
                .map(|e| e.0),
            Some(EPROTO)
        );
        let small = CreateSrqResp { entries: 8, ..good };
        assert_eq!(
            map_srq_ring(-1, &small, &req, &Source::Heap)
                .err()
                .map(|e| e.0),
            Some(EPROTO)
        );
        let odd = CreateSrqResp {
            entry_size: 48,
            ..good
        };
        assert_eq!(
            map_srq_ring(-1, &odd, &req, &Source::Heap)
                .err()
                .map(|e| e.0),
            Some(EPROTO)
        );
    }
}
