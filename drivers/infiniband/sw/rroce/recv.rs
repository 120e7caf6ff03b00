// SPDX-License-Identifier: GPL-2.0
//! Receive dispatch: a RoCEv2 datagram from the namespace's sockets (or
//! from the device's own loopback queue) is checked (layout, ICRC, P_Key)
//! and handed to its QP (`qp::deliver`), which runs the data path on it.
//! Softirq context, under RCU.

#![forbid(unsafe_code)]

use crate::device::RroceDev;
use crate::net::netdev::NetDevView;
use crate::sync::rcu::ReadGuard;
use crate::proto::hdr::{self, DEFAULT_PKEY};
use crate::proto::icrc;
use crate::proto::split::{Pieces, Split};
use crate::stats::{Counter, RxDrop};

/// Receives one RoCEv2 IP datagram (`pkt`: IP header to the end, its
/// headers in `pkt.head`; `copied` into one buffer first) that arrived on
/// `in_dev`.  Softirq context.
pub(crate) fn rx(in_dev: NetDevView<'_>, pkt: Split<'_>, copied: bool) -> Result<(), RxDrop> {
    // The UDP stack has validated the IP header: find the device first,
    // so that a datagram too short for a BTH and ICRC (which the layout
    // check refuses) is still counted as dropped on it.
    let ipv6 = pkt.head.first().is_some_and(|b| b >> 4 == 6);
    let dst = if ipv6 { pkt.head.get(24..40) } else { pkt.head.get(16..20) }.ok_or(RxDrop::Malformed)?;
    let rcu = ReadGuard::new();
    let dev = crate::device::rx_device(in_dev, dst, &rcu).ok_or(RxDrop::NoDevice)?;
    if copied {
        dev.p.stats.inc(Counter::RxLinearized);
    }
    // One piece (a linear skb) takes the slice versions of the parsers,
    // two pieces their split versions.
    if pkt.tail.is_empty() {
        rx_checked(dev, &rcu, pkt.head)
    } else {
        rx_checked(dev, &rcu, pkt)
    }
}

/// The part of [`rx`] after the device is known: layout, then [`rx_on`]
/// with the ICRC checked.
fn rx_checked<'a>(dev: &RroceDev, rcu: &ReadGuard, pkt: impl Pieces<'a>) -> Result<(), RxDrop> {
    let Ok(l) = icrc::ip_layout_of(pkt) else {
        dev.p.stats.inc(Counter::RxDropped);
        return Err(RxDrop::Malformed);
    };
    rx_on(dev, rcu, pkt, &l, true)
}

/// Receives a packet `dev` sent to itself (`loopback`): no ICRC.
/// Bottom halves disabled, inside the loopback drain's RCU section (one
/// for the whole drain, not one per packet).  (A dropped packet is
/// counted like one from the wire; the requester retransmits.)
pub(crate) fn rx_local(dev: &RroceDev, rcu: &ReadGuard, pkt: &[u8]) {
    if let Ok(l) = icrc::ip_layout(pkt) {
        let _ = rx_on(dev, rcu, pkt, &l, false);
    }
}

/// Parses, checks and delivers a datagram of layout `l` on `dev`.
fn rx_on<'a>(dev: &RroceDev, rcu: &ReadGuard, pkt: impl Pieces<'a>, l: &icrc::IpLayout, check_icrc: bool) -> Result<(), RxDrop> {
    let roce = pkt.part(l.roce_off, l.end).ok_or(RxDrop::Malformed)?;
    let s = &dev.p.stats;
    let Ok(parsed) = hdr::parse_of(roce) else {
        s.inc(Counter::RxDropped);
        return Err(RxDrop::Malformed);
    };
    if check_icrc && icrc::verify_of(|c, d: &[u8]| dev.p.crc.update(c, d), pkt, l).is_err() {
        s.inc(Counter::RxIcrcErrors);
        return Err(RxDrop::Icrc);
    }
    // The receive path splits a datagram only at its headers' end, so the
    // payload is in one piece.
    let payload = parsed.payload_of(roce);
    let Some(payload) = payload.filter(|_| parsed.bth.pkey & 0x7fff == DEFAULT_PKEY & 0x7fff) else {
        s.inc(Counter::RxDropped);
        return Err(RxDrop::Malformed);
    };
    let ip = pkt.first().get(..l.roce_off.saturating_sub(8)).unwrap_or(&[]);
    if crate::qp::deliver(dev, rcu, &parsed, payload, ip) {
        s.inc(Counter::RxPackets);
        Ok(())
    } else {
        s.inc(Counter::RxDropped);
        Err(RxDrop::NoQp)
    }
}
