// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Target `wqe`: decoding of user-controlled WQEs, CQEs and ABI structs.
//!
//! Input: queue limits, then the bytes of one ring entry.  `decode_send` /
//! `decode_recv` must reject garbage with an error; whatever they accept
//! must respect the limits, and re-encode (`write_send_wqe` /
//! `write_recv_wqe`) into an entry that decodes identically.  Also CQE and
//! uverbs ABI structs (byte image -> struct -> byte image -> struct) and the
//! entry-size helpers.

use crate::Reader;
use rroce_proto::abi;
use rroce_proto::net::chunks;
use rroce_proto::wqe::{
    decode_recv, decode_send, recv_entry_size, recv_max_sge, send_caps, send_entry_size,
    write_recv_wqe, write_send_wqe, Cqe, OpcodeSet, RecvLimits, SendLimits, SendOpcode,
    SendPayload, Sge, CQE_BYTES, MAX_MSG_SIZE, RECV_HDR_BYTES, SEND_FLAGS_ALL, SEND_HDR_BYTES,
    SEND_INLINE,
};

fn limits(r: &mut Reader<'_>) -> (SendLimits, RecvLimits) {
    let opcodes = match r.u8() % 4 {
        0 => OpcodeSet::RC,
        1 => OpcodeSet::UC,
        2 => OpcodeSet::UD,
        _ => OpcodeSet(r.u16()),
    };
    let max_sge = match r.u8() % 3 {
        0 => u16::from(r.u8() % 32),
        _ => r.u16(),
    };
    let max_msg_size = match r.u8() % 3 {
        0 => MAX_MSG_SIZE,
        _ => r.u32(),
    };
    let s = SendLimits {
        max_sge,
        max_inline: match r.u8() % 2 {
            0 => u32::from(r.u16()),
            _ => r.u32(),
        },
        max_msg_size,
        opcodes,
        ud: r.bool(),
    };
    let rl = RecvLimits {
        max_sge,
        max_msg_size,
    };
    (s, rl)
}

/// The harness.
pub fn run(data: &[u8]) {
    let mut r = Reader::new(data);
    let (sl, rl) = limits(&mut r);
    let sizes = (r.u32(), r.u32());
    let range = (r.u32(), r.u32());
    let entry = r.rest();

    if let Ok(v) = decode_send(entry, &sl) {
        let w = v.wqe;
        assert!(sl.opcodes.contains(w.opcode));
        assert_eq!(w.flags & !SEND_FLAGS_ALL, 0);
        assert!(v.length <= sl.max_msg_size.min(MAX_MSG_SIZE));
        // (A local operation's field there is something else: BIND_MW's lkey.)
        assert!(!sl.ud || w.opcode.is_local() || w.remote_qpn <= 0x00FF_FFFF);
        let mut out = vec![0u8; entry.len().max(SEND_HDR_BYTES)];
        if w.flags & SEND_INLINE != 0 {
            let d = v.inline_data().expect("inline WQE without inline data");
            assert_eq!(d.len(), w.inline_len as usize);
            assert!(w.inline_len <= sl.max_inline && w.num_sge == 0);
            assert_eq!(v.sges().count(), 0);
            let n = write_send_wqe(&mut out, &w, SendPayload::Inline(d)).expect("re-encode");
            let v2 = decode_send(&out[..n], &sl).expect("re-encoded WQE must decode");
            assert_eq!(
                (v2.wqe, v2.length, v2.inline_data()),
                (w, v.length, Some(d))
            );
        } else {
            assert!(v.inline_data().is_none());
            let sges: Vec<Sge> = v.sges().collect();
            assert_eq!(sges.len(), usize::from(w.num_sge));
            assert!(w.num_sge <= sl.max_sge);
            for (i, s) in sges.iter().enumerate() {
                assert_eq!(v.sge(i), Some(*s));
            }
            assert_eq!(v.sge(sges.len()), None);
            let sum: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
            // (ATOMIC WRITE's 8 bytes are in the header, with no SGE.)
            let want = if w.opcode == SendOpcode::AtomicWrite {
                assert!(sges.is_empty());
                8
            } else {
                sum
            };
            assert_eq!(want, u64::from(v.length));
            if w.opcode.is_atomic() {
                assert!(sges.len() == 1 && v.length == 8);
            }
            check_chunks(&sges, range.0, range.1);
            let n = write_send_wqe(&mut out, &w, SendPayload::Sges(&sges)).expect("re-encode");
            let v2 = decode_send(&out[..n], &sl).expect("re-encoded WQE must decode");
            assert_eq!((v2.wqe, v2.length), (w, v.length));
            assert!(v2.sges().eq(sges.iter().copied()));
        }
    }

    if let Ok(v) = decode_recv(entry, &rl) {
        assert!(v.wqe.num_sge <= rl.max_sge);
        assert!(v.length <= rl.max_msg_size.min(MAX_MSG_SIZE));
        let sges: Vec<Sge> = v.sges().collect();
        assert_eq!(sges.len(), usize::from(v.wqe.num_sge));
        let sum: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
        assert_eq!(sum, u64::from(v.length));
        check_chunks(&sges, range.0, range.1);
        let mut out = vec![0u8; entry.len().max(RECV_HDR_BYTES)];
        let n = write_recv_wqe(&mut out, v.wqe.wr_id, &sges).expect("re-encode");
        let v2 = decode_recv(&out[..n], &rl).expect("re-encoded WQE must decode");
        assert_eq!((v2.wqe, v2.length), (v.wqe, v.length));
    }

    if let Some(b) = entry.first_chunk::<CQE_BYTES>() {
        if let Ok(c) = Cqe::decode(b) {
            assert_eq!(Cqe::decode(&c.to_bytes()), Ok(c));
        }
    }
    abi_roundtrips(entry);

    // Entry sizes: an entry sized for (sge, inline) holds at least that.
    let (max_sge, max_inline) = (sizes.0 % 4096, sizes.1 % (1 << 20));
    if let Some(sz) = send_entry_size(max_sge, max_inline) {
        assert_eq!(sz % 64, 0);
        let (s, i) = send_caps(sz);
        assert!(u32::from(s) >= max_sge.min(u32::from(u16::MAX)) && i >= max_inline);
    }
    if let Some(sz) = recv_entry_size(max_sge) {
        assert!(u32::from(recv_max_sge(sz)) >= max_sge.min(u32::from(u16::MAX)));
    }
    let _ = send_caps(sizes.0);
    let _ = recv_max_sge(sizes.1);
    let _ = send_entry_size(sizes.0, sizes.1);
    let _ = recv_entry_size(sizes.1);
}

/// `net::chunks` (the SGE walk of the data path): pieces are contiguous,
/// non-empty, in SGE order, each inside one SGE, and cover `len` bytes from
/// `offset` as far as the SGEs reach.
fn check_chunks(sges: &[Sge], offset: u32, len: u32) {
    let total: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
    let want = total.saturating_sub(u64::from(offset)).min(u64::from(len));
    let mut at = 0u64;
    let mut si = 0usize;
    for c in chunks(sges.iter().copied(), offset, len) {
        assert!(c.len > 0);
        assert_eq!(u64::from(c.at), at);
        let inside = |s: &Sge| {
            let off = c.addr.wrapping_sub(s.addr);
            s.lkey == c.lkey
                && off < u64::from(s.length)
                && off + u64::from(c.len) <= u64::from(s.length)
        };
        while si < sges.len() && !inside(&sges[si]) {
            si += 1;
        }
        assert!(si < sges.len(), "chunk {c:?} outside every SGE");
        si += 1;
        at += u64::from(c.len);
    }
    assert_eq!(at, want);
}

macro_rules! roundtrip {
    ($entry:expr, $($t:ty),*) => {$(
        if let Some(b) = $entry.first_chunk::<{ <$t>::SIZE }>() {
            let v = <$t>::from_bytes(b);
            assert_eq!(<$t>::from_bytes(&v.to_bytes()), v);
        }
    )*};
}

fn abi_roundtrips(entry: &[u8]) {
    roundtrip!(
        entry,
        abi::CreateQueueCmd,
        abi::CreateCqResp,
        abi::ResizeCqResp,
        abi::CreateQpResp,
        abi::CreateSrqResp,
        abi::CreateAhResp
    );
    if let Some(b) = entry.first_chunk::<{ abi::CreateQueueCmd::SIZE }>() {
        let _ = abi::CreateQueueCmd::from_bytes(b).is_valid();
    }
}
