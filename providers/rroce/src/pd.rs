// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Protection domains, parent domains and thread domains; XRC domains
//! ([`RroceXrcd`]).
//!
//! Every `ibv_pd` of an rroce context is an [`RrocePd`] in an `Arc`: a
//! protection domain (`ibv_alloc_pd`, a kernel object) or a parent domain
//! (`ibv_alloc_parent_domain`, provider memory only).  A parent domain's
//! `ibv_pd` carries the context and kernel handle of its protection domain
//! (driver.h's `ibv_initialize_parent_domain`), so every `ibv_cmd_*` that
//! takes it reaches the right kernel PD; it holds references to that
//! protection domain, to its thread domain ([`RroceTd`], `ibv_alloc_td`)
//! if it has one, and to its [`Allocator`] if it has one.  A QP, SRQ or CQ
//! created on a parent domain holds a reference to the parent domain.
//! The `Arc`'s count is thus the number of users, and `ibv_dealloc_pd` /
//! `ibv_dealloc_td` give `EBUSY` while anything else holds the object, as
//! mlx5 and efa do: a protection domain while a parent domain uses it, a
//! parent domain while a QP, SRQ or CQ uses it, a thread domain while a
//! parent domain uses it.  (A protection domain used by kernel objects is
//! refused by the kernel, also with `EBUSY`.)  Deallocating a parent
//! domain frees only the provider's object.
//!
//! MRs, MWs and AHs made on a parent domain are plain commands with its
//! (that is, the protection domain's) kernel handle, as on mlx5; their
//! `pd` is the parent domain the application passed, which libibverbs
//! itself stores in `ibv_mr.pd` and `ibv_ah.pd` (so `ibv_bind_mw`'s check
//! `mw->pd == mr->pd` holds for a window and a region of one parent
//! domain).  They do not hold the parent domain: the kernel PD is what
//! they use.  QPs, SRQs and CQs hold it, and its allocator serves the QP's
//! and SRQ's buffers (see `ffi::alloc`).
//!
//! Thread domains: a QP, SRQ or CQ on a parent domain with a thread domain
//! is, by the verbs contract, used by one thread at a time.  The provider
//! accepts the TD and keeps its locking as it is: each object's state is
//! behind a `std::sync::Mutex`, whose uncontended path (one atomic
//! compare-exchange and one release store) is already what any sound
//! shared Rust type needs to detect a second thread; a TD-specific
//! `try_lock` path would cost the same and only change what happens when
//! the application breaks the contract.

use core::ffi::c_int;
use core::mem::offset_of;
use std::sync::Arc;

use crate::ffi::*;

/// An `ibv_pd` of rroce: a protection or a parent domain.
#[repr(C)]
pub(crate) struct RrocePd {
    ibv: Opaque<IbvPd>,
    /// `None` for a protection domain.
    parent: Option<ParentDomain>,
}
const _: () = assert!(offset_of!(RrocePd, ibv) == 0);

/// What a parent domain adds to its `ibv_pd`.
struct ParentDomain {
    /// The protection domain whose handle it carries (held: its dealloc
    /// gives `EBUSY` meanwhile).
    _protection: Arc<RrocePd>,
    /// Held, so that `ibv_dealloc_td` gives `EBUSY` meanwhile.
    _td: Option<Arc<RroceTd>>,
    /// `alloc`/`free`, if the application gave both.
    allocator: Option<Arc<Allocator>>,
}

/// An `ibv_td` of rroce.
#[repr(C)]
pub(crate) struct RroceTd {
    ibv: Opaque<IbvTd>,
}
const _: () = assert!(offset_of!(RroceTd, ibv) == 0);

/// `ibv_parent_domain_init_attr.comp_mask` bits rroce understands.
pub(crate) const PARENT_DOMAIN_INIT_ATTR_SUPPORTED: u32 =
    IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;

/// Checks `ibv_td_init_attr.comp_mask`: no bit is defined, `EINVAL` for
/// any (as mlx5).
pub(crate) fn check_td_comp_mask(comp_mask: u32) -> Result<(), c_int> {
    if comp_mask != 0 {
        return Err(EINVAL);
    }
    Ok(())
}

/// Checks `ibv_parent_domain_init_attr.comp_mask`: `EINVAL` for unknown
/// bits (as mlx5).
pub(crate) fn check_parent_domain_comp_mask(comp_mask: u32) -> Result<(), c_int> {
    if comp_mask & !PARENT_DOMAIN_INIT_ATTR_SUPPORTED != 0 {
        return Err(EINVAL);
    }
    Ok(())
}

impl RrocePd {
    /// A protection domain, its `ibv_pd` zeroed for `ibv_cmd_alloc_pd`.
    pub(crate) fn protection() -> Self {
        Self {
            ibv: Opaque::zeroed(),
            parent: None,
        }
    }

    /// A parent domain on `protection`, whose `ibv_pd` (context and
    /// handle) is `ibv`: `EINVAL` if `protection` is a parent domain
    /// itself (no nesting, as efa).
    pub(crate) fn parent(
        protection: Arc<RrocePd>,
        ibv: IbvPd,
        td: Option<Arc<RroceTd>>,
        allocator: Option<Arc<Allocator>>,
    ) -> Result<Self, c_int> {
        if protection.is_parent() {
            return Err(EINVAL);
        }
        Ok(Self {
            ibv: Opaque::new(ibv),
            parent: Some(ParentDomain {
                _protection: protection,
                _td: td,
                allocator,
            }),
        })
    }

    /// The C part.
    pub(crate) fn ibv(&self) -> *mut IbvPd {
        self.ibv.get()
    }

    /// A parent domain (not a protection domain).
    pub(crate) fn is_parent(&self) -> bool {
        self.parent.is_some()
    }

    /// Whether anything but the application's own reference holds it
    /// (then `ibv_dealloc_pd`/`_td` give `EBUSY`).
    pub(crate) fn in_use(this: &Arc<Self>) -> bool {
        Arc::strong_count(this) > 1
    }
}

impl RroceTd {
    /// A thread domain of `context`.
    pub(crate) fn new(context: *mut IbvContext) -> Self {
        Self {
            ibv: Opaque::new(IbvTd { context }),
        }
    }

    /// As [`RrocePd::in_use`].
    pub(crate) fn in_use(this: &Arc<Self>) -> bool {
        Arc::strong_count(this) > 1
    }
}

/// An XRC domain (`ibv_open_xrcd`): the kernel object only; libibverbs
/// fills its `verbs_xrcd` (context and kernel handle), which XRC SRQs and
/// QPs name.  It holds nothing: the kernel refuses to close an XRC domain
/// that SRQs or QPs still use.
#[repr(C)]
pub(crate) struct RroceXrcd {
    vxrcd: Opaque<VerbsXrcd>,
}
const _: () = assert!(offset_of!(RroceXrcd, vxrcd) == 0);

impl RroceXrcd {
    /// An XRC domain not yet opened, its C part zeroed.
    pub(crate) fn new() -> Self {
        Self {
            vxrcd: Opaque::zeroed(),
        }
    }

    /// The C part (it must not move once opened).
    pub(crate) fn vxrcd(&self) -> *mut VerbsXrcd {
        self.vxrcd.get()
    }
}

/// Where the buffers of a QP or SRQ (`resource_type`) created on `domain`
/// (`None`: a protection domain) come from: the parent domain's allocator
/// if it has one, else the heap.
pub(crate) fn buffers(domain: Option<&RrocePd>, resource_type: u64) -> Source {
    match domain.and_then(|d| d.parent.as_ref().map(|p| (d, p))) {
        Some((
            d,
            ParentDomain {
                allocator: Some(a), ..
            },
        )) => Source::Domain {
            allocator: Arc::clone(a),
            pd: d.ibv(),
            resource_type,
        },
        _ => Source::Heap,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::ptr;

    fn ibv() -> IbvPd {
        IbvPd {
            context: ptr::null_mut(),
            handle: 42,
        }
    }

    #[test]
    fn comp_masks() {
        assert_eq!(check_td_comp_mask(0), Ok(()));
        assert_eq!(check_td_comp_mask(1), Err(EINVAL));
        assert_eq!(check_parent_domain_comp_mask(3), Ok(()));
        assert_eq!(check_parent_domain_comp_mask(4), Err(EINVAL));
    }

    #[test]
    fn references_count_users() {
        let pd = Arc::new(RrocePd::protection());
        let td = Arc::new(RroceTd::new(ptr::null_mut()));
        assert!(!RrocePd::in_use(&pd) && !RroceTd::in_use(&td));
        let a = Arc::new(Allocator::use_default());
        let parent = Arc::new(
            RrocePd::parent(Arc::clone(&pd), ibv(), Some(Arc::clone(&td)), Some(a)).unwrap(),
        );
        assert!(RrocePd::in_use(&pd) && RroceTd::in_use(&td));
        assert!(parent.is_parent() && !pd.is_parent());
        // No nesting.
        assert_eq!(
            RrocePd::parent(Arc::clone(&parent), ibv(), None, None).err(),
            Some(EINVAL)
        );
        assert!(matches!(
            buffers(Some(&parent), 7),
            Source::Domain {
                resource_type: 7,
                ..
            }
        ));
        assert!(matches!(buffers(Some(&pd), 7), Source::Heap));
        assert!(matches!(buffers(None, 7), Source::Heap));
        drop(parent);
        assert!(!RrocePd::in_use(&pd) && !RroceTd::in_use(&td));
    }
}
