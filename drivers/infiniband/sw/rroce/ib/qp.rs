// SPDX-License-Identifier: GPL-2.0
//! Queue pairs (the part on the layer so far): raising a QP's affiliated
//! asynchronous events.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use core::marker::PhantomData;
use core::ptr::NonNull;
use kernel::bindings;

/// The event side of a created QP.
///
/// # Invariants
///
/// `self.0` is a QP whose creation completed (ib_core set its event
/// handler and context), alive for `'a`.
#[derive(Clone, Copy)]
pub(crate) struct QpEvents<'a>(NonNull<bindings::ib_qp>, PhantomData<&'a bindings::ib_qp>);

impl<'a> QpEvents<'a> {
    /// # Safety
    ///
    /// `qp` is a fully created QP that stays alive for `'a`.
    pub(crate) unsafe fn new(qp: NonNull<bindings::ib_qp>) -> Self {
        // INVARIANT: per the requirements.
        Self(qp, PhantomData)
    }

    /// Raises the affiliated event `event`.  Call without driver locks.
    pub(crate) fn raise(&self, event: bindings::ib_event_type) {
        let qp = self.0.as_ptr();
        // SAFETY: alive (type invariant); ib_core set these fields when
        // creating the QP and does not change them.
        let (handler, device, context) = unsafe { ((*qp).event_handler, (*qp).device, (*qp).qp_context) };
        if let Some(h) = handler {
            let mut ev = bindings::ib_event { device, event, ..Default::default() };
            ev.element.qp = qp;
            // SAFETY: the consumer's handler and context, as registered.
            unsafe { h(&mut ev, context) };
        }
    }
}
