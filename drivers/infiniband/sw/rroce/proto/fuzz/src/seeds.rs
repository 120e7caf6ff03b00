// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Seed inputs, made with the protocol core's own builders.
//!
//! `cargo test --no-default-features -- --ignored write_seeds` writes them
//! to `seeds/<target>/`; `tests/replay.rs` also runs them directly.  Packet
//! seeds are real RoCEv2 packets: every opcode the core knows, as UDP
//! payloads and inside IPv4/IPv6 datagrams with a correct ICRC; the
//! responder and requester seeds carry the packets a real `Requester`
//! produces for a mix of SEND/WRITE/READ/atomic WQEs.

use crate::Writer;
use rroce_proto::hdr::{
    Aeth, AtomicAckEth, AtomicEth, Bth, Deth, Ext, Ieth, ImmDt, Reth, DEFAULT_PKEY,
};
use rroce_proto::icrc::{write_icrc_ip, SoftCrc32};
use rroce_proto::net::{IpAddr, IpUdp};
use rroce_proto::opcode::{lookup, ExtHdrs};
use rroce_proto::psn::{PathMtu, Psn};
use rroce_proto::rc::{ReqConfig, Requester, Slot};
use rroce_proto::wqe::{
    write_recv_wqe, write_send_wqe, Cqe, SendOpcode, SendPayload, SendWqe, Sge, WcOpcode, WcStatus,
    SEND_SIGNALED,
};

/// A seed: target name, file name, bytes.
pub type Seed = (&'static str, String, Vec<u8>);

fn ext_for(h: ExtHdrs, i: u32) -> Ext {
    let mut e = Ext::default();
    if h.contains(ExtHdrs::DETH) {
        e.deth = Some(Deth {
            qkey: 0x1111_2222,
            src_qpn: 0x11 + i,
        });
    }
    if h.contains(ExtHdrs::FETH) {
        // global placement; every other seed the whole region
        e.feth = Some(rroce_proto::hdr::Feth::new(1, (i % 2) as u8));
    }
    if h.contains(ExtHdrs::RETH) {
        e.reth = Some(Reth {
            va: 0x1_0000 + u64::from(i) * 64,
            rkey: 0x100,
            len: 256 * i,
        });
    }
    if h.contains(ExtHdrs::ATOMIC_ETH) {
        e.atomic_eth = Some(AtomicEth {
            va: 0x1_0000,
            rkey: 0x100,
            swap_add: 5,
            compare: 0,
        });
    }
    if h.contains(ExtHdrs::AETH) {
        e.aeth = Some(Aeth {
            syndrome: 0x1F,
            msn: i,
        });
    }
    if h.contains(ExtHdrs::ATOMIC_ACK_ETH) {
        e.atomic_ack_eth = Some(AtomicAckEth { orig: 42 });
    }
    if h.contains(ExtHdrs::IMMDT) {
        e.immdt = Some(ImmDt { imm: 0x0102_0304 });
    }
    if h.contains(ExtHdrs::IETH) {
        e.ieth = Some(Ieth { rkey: 0x200 });
    }
    e
}

/// A UDP payload for `opcode` with `len` payload bytes.
fn roce(opcode: u8, len: usize, psn: u32) -> Option<Vec<u8>> {
    let info = lookup(opcode)?;
    let len = if info.payload { len } else { 0 };
    let bth = Bth {
        opcode,
        pkey: DEFAULT_PKEY,
        dest_qpn: 0x12,
        psn,
        ack_req: info.position.is_end(),
        ..Bth::default()
    };
    crate::build_packet(&bth, &ext_for(info.hdrs, 1), len)
}

/// `roce` inside an IP datagram with a correct ICRC.
fn datagram(roce: &[u8], v6: bool) -> Vec<u8> {
    let (src, dst) = if v6 {
        let mut a = [0u8; 16];
        a[0] = 0xfd;
        a[1] = 0x77;
        let mut b = a;
        a[15] = 1;
        b[15] = 2;
        (IpAddr::V6(a), IpAddr::V6(b))
    } else {
        (IpAddr::V4([10, 77, 0, 1]), IpAddr::V4([10, 77, 0, 2]))
    };
    let h = IpUdp {
        src,
        dst,
        tclass: 0,
        hop_limit: 64,
        flow_label: 0,
        sport: 0xC123,
    };
    let mut buf = vec![0u8; h.hdr_len() + roce.len()];
    let n = h.write(&mut buf, roce.len()).expect("IP/UDP header");
    buf[n..].copy_from_slice(roce);
    write_icrc_ip(SoftCrc32, &mut buf).expect("ICRC");
    buf
}

fn packet_seeds(out: &mut Vec<Seed>) {
    for opcode in 0..=255u8 {
        if lookup(opcode).is_none() {
            continue;
        }
        for (k, len) in [0usize, 3, 256].into_iter().enumerate() {
            let Some(p) = roce(opcode, len, 0xFF_FFF0 + k as u32) else {
                continue;
            };
            if k == 0 {
                out.push(("packet", format!("op{opcode:02x}-v4"), datagram(&p, false)));
                out.push(("packet", format!("op{opcode:02x}-v6"), datagram(&p, true)));
            }
            out.push(("packet", format!("op{opcode:02x}-len{len}"), p));
            if !lookup(opcode).is_some_and(|i| i.payload) {
                break;
            }
        }
    }
}

fn wqe_seeds(out: &mut Vec<Seed>) {
    // Limits: RC, 16 SGEs, 1024 inline, 2^31, not UD; sizes.
    let lim = |w: &mut Writer, set: u8, ud: bool| {
        w.u8(set).u8(0).u8(16).u8(0).u8(0).u16(1024).bool(ud);
        w.u32(4).u32(256);
        w.u32(50).u32(58);
    };
    let sges = [
        Sge {
            addr: 0x1000,
            length: 100,
            lkey: 7,
        },
        Sge {
            addr: 0x2000,
            length: 8,
            lkey: 7,
        },
    ];
    for (name, op, set, ud, inline) in [
        ("send-sge", SendOpcode::Send, 0u8, false, false),
        ("write-inline", SendOpcode::RdmaWriteWithImm, 0, false, true),
        ("read", SendOpcode::RdmaRead, 0, false, false),
        ("atomic", SendOpcode::AtomicCmpAndSwp, 0, false, false),
        ("ud-send", SendOpcode::SendWithImm, 2, true, true),
        ("local-inv", SendOpcode::LocalInv, 1, false, false),
    ] {
        let mut w = Writer::default();
        lim(&mut w, set, ud);
        let mut h = SendWqe::new(77, op);
        h.flags = SEND_SIGNALED;
        h.remote_addr = 0x1_0000;
        h.rkey = 0x100;
        h.remote_qpn = 0x12;
        let mut entry = vec![0u8; 256];
        let payload = if inline {
            SendPayload::Inline(b"hello, rroce")
        } else if op.is_atomic() {
            SendPayload::Sges(&sges[1..])
        } else if op.is_local() {
            SendPayload::Sges(&[])
        } else {
            SendPayload::Sges(&sges)
        };
        let n = write_send_wqe(&mut entry, &h, payload).expect("send WQE");
        entry.truncate(n.next_multiple_of(64));
        w.bytes(&entry);
        out.push(("wqe", name.into(), w.buf));
    }
    let mut w = Writer::default();
    lim(&mut w, 0, false);
    let mut entry = vec![0u8; 64];
    write_recv_wqe(&mut entry, 5, &sges).expect("recv WQE");
    w.bytes(&entry);
    out.push(("wqe", "recv".into(), w.buf));
    let mut w = Writer::default();
    lim(&mut w, 0, false);
    let c = Cqe::new(9, WcStatus::Success, WcOpcode::RecvRdmaWithImm, 0x12);
    w.bytes(&c.to_bytes());
    out.push(("wqe", "cqe".into(), w.buf));
}

fn ud_seeds(out: &mut Vec<Seed>) {
    for (name, op, len) in [
        ("send", 2u8, 100u32),
        ("send-imm", 3, 0),
        ("too-long", 2, 5000),
    ] {
        let mut w = Writer::default();
        w.u8(op)
            .u8(2)
            .u32(len)
            .u32(0x11)
            .u32(0x1111_2222)
            .u32(0xFF_FFFF);
        w.u8(0).u8(2); // mtu 1024
        w.u64(1).u8(4).u32(0x0403_0201).u32(0x12).u32(0x8000_0000);
        w.u32(0x1111_2222);
        let p = roce(rroce_proto::opcode::UD_SEND_ONLY_WITH_IMMEDIATE, 8, 7).unwrap();
        w.chunk(&p);
        w.bytes(&datagram(&p, false)[..20]);
        out.push(("ud", name.into(), w.buf));
    }
}

fn ring_seeds(out: &mut Vec<Seed>) {
    // 8 entries of 64 bytes, start near the wrap, cells; then pushes,
    // reads, releases, a transfer to 16 entries, more traffic.
    let mut w = Writer::default();
    w.u8(0).u8(8).u8(4).u8(1).u8(3).bool(false);
    for _ in 0..10 {
        w.u8(1).u8(0).u8(16); // push 64 bytes
        w.u8(3).u8(0); // read
        w.u8(6); // release all
    }
    for _ in 0..5 {
        w.u8(1).u8(0).u8(8);
    }
    w.u8(13).u8(0).u8(16).u8(4).bool(true); // transfer to 16 x 64, words
    for _ in 0..6 {
        w.u8(4).u8(0).u8(7).u8(8).u8(14);
    }
    out.push(("ring", "traffic".into(), w.buf.clone()));
    w.u8(10).u8(2).u32(0xFFFF_0000).u8(7).u8(8);
    out.push(("ring", "scribble".into(), w.buf));
}

/// Request packets a real requester sends for a mix of WQEs.
fn request_packets(pmtu: PathMtu) -> Vec<Vec<u8>> {
    let mut cfg = ReqConfig {
        unreliable: false,
        sq_psn: Psn::new(0xFF_FFF8),
        pmtu,
        max_rd_atomic: 4,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        max_unacked: 128,
        ack_every: 4,
    };
    cfg.max_unacked = 128;
    let mut req: Requester<[Slot; 8]> = Requester::new(cfg);
    let wqes: [(SendOpcode, u32); 6] = [
        (SendOpcode::Send, 3000),
        (SendOpcode::RdmaWrite, 600),
        (SendOpcode::RdmaRead, 2100),
        (SendOpcode::AtomicFetchAndAdd, 8),
        (SendOpcode::SendWithImm, 0),
        (SendOpcode::RdmaWriteWithImm, 1024),
    ];
    for (i, (op, len)) in wqes.into_iter().enumerate() {
        let mut w = SendWqe::new(i as u64, op);
        w.rkey = 0x100;
        w.remote_addr = 0x1000;
        w.imm_or_inv = 0x0a0b_0c0d;
        req.post(w, len).expect("post");
    }
    let mut pkts = Vec::new();
    while let Some(d) = req.next_packet(0) {
        let p = crate::build_packet(
            &d.bth(0x12, DEFAULT_PKEY),
            &d.ext(),
            d.payload_len() as usize,
        )
        .expect("request packet");
        pkts.push(p);
    }
    pkts
}

fn responder_seeds(out: &mut Vec<Seed>) {
    for (k, pmtu) in [PathMtu::Mtu256, PathMtu::Mtu1024].into_iter().enumerate() {
        let mut w = Writer::default();
        // pmtu, rq_psn = 0xFF_FFF8 (mode 2), max_dest_rd_atomic, rnr timer
        w.u8(pmtu as u8 - 1).u8(2).u32(0xFF_FFF8).u8(4).u8(12);
        // Three regions: 16 KiB at 0x1000 with all access, and two more.
        for acc in [0x0Eu8, 0x04, 0x02] {
            w.u16(0x3FF8).u8(0).u8(acc);
        }
        // Receive WQEs.
        for _ in 0..4 {
            w.u8(5).u8(1).u16(8192);
        }
        for p in request_packets(pmtu) {
            w.u8(0).chunk(&p);
        }
        out.push(("responder", format!("requester-stream-{k}"), w.buf));
    }
}

fn requester_seeds(out: &mut Vec<Seed>) {
    for (k, pmtu) in [PathMtu::Mtu256, PathMtu::Mtu1024, PathMtu::Mtu1024]
        .into_iter()
        .enumerate()
    {
        // The third: the network stack refuses packets now and then.
        let refusing = k == 2;
        let mut w = Writer::default();
        // pmtu, sq_psn mode 1 (MAX-8), max_rd_atomic, timeout, retry,
        // rnr_retry, max_unacked default, ack_every default, echo config,
        // start time.
        w.u8(pmtu as u8 - 1)
            .u8(1)
            .u8(8)
            .u8(4)
            .u8(14)
            .u8(7)
            .u8(7)
            .u8(0)
            .u8(0);
        w.u8(4).u8(3).u64(1 << 20);
        // Receive WQEs at the echo responder.
        w.u8(12).u8(3).bool(true).bool(true).bool(true);
        // Posts: SEND 600, WRITE 300, READ 700, FETCH_ADD, SEND_WITH_IMM 0.
        for (op, lenmode, len) in [
            (2u8, 2u8, 600u16),
            (0, 2, 300),
            (4, 2, 700),
            (6, 3, 0),
            (3, 4, 0),
        ] {
            w.u8(0).u8(op).u8(lenmode);
            if lenmode == 2 {
                w.u16(len);
            }
            w.u8(SEND_SIGNALED)
                .u32(0x0a0b_0c0d)
                .u8(0)
                .u8(0)
                .u16(0)
                .u64(0)
                .u64(1);
        }
        if refusing {
            // A refused packet, its pause's end, a few sent, again.
            for _ in 0..8 {
                w.u8(15).u8(3).u8(10).u8(0).u8(2).u8(3);
            }
        }
        w.u8(2).u8(63); // send everything
        for i in 0..40u8 {
            // deliver requests (mostly in order, one loss), then responses
            w.u8(3).u8(if i == 7 { 0 } else { 7 });
        }
        for _ in 0..40 {
            w.u8(5).u8(7);
        }
        w.u8(11); // poll
        w.u8(10).u8(0); // timer at the deadline
        w.u8(2).u8(63);
        for _ in 0..20 {
            w.u8(3).u8(7);
        }
        for _ in 0..20 {
            w.u8(5).u8(7);
        }
        w.u8(11);
        let name = if refusing {
            "echo-refused".into()
        } else {
            format!("echo-{k}")
        };
        out.push(("requester", name, w.buf));
    }
}

/// Every seed.
pub fn all() -> Vec<Seed> {
    let mut v = Vec::new();
    packet_seeds(&mut v);
    wqe_seeds(&mut v);
    ud_seeds(&mut v);
    ring_seeds(&mut v);
    responder_seeds(&mut v);
    requester_seeds(&mut v);
    v
}

/// Run `data` through the harness of `target`.
pub fn run(target: &str, data: &[u8]) {
    match target {
        "packet" => crate::packet::run(data),
        "responder" => crate::responder::run(data),
        "requester" => crate::requester::run(data),
        "wqe" => crate::wqe::run(data),
        "ring" => crate::ring::run(data),
        "ud" => crate::ud::run(data),
        t => panic!("unknown target {t}"),
    }
}

/// The targets.
pub const TARGETS: [&str; 6] = ["packet", "responder", "requester", "wqe", "ring", "ud"];
