// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Target `ring`: the shared SPSC rings against a hostile peer.
//!
//! Input: a geometry for `RingLayout::new`, then a sequence of operations
//! of both sides (write/publish/read/release/refresh/transfer/attach) mixed
//! with scribbles of a malicious peer on the shared indices and entries.
//! Checked on every step: the ring code never touches the region outside
//! its layout; an offset it hands out is a whole slot inside the layout;
//! errors are sticky; the private counts stay within `entries`.  While no
//! index was scribbled: no error at all, and every entry read is the one
//! written at that index (FIFO, also across a resize by `transfer`).

use crate::Reader;
use rroce_proto::ring::{
    AtomicRegion, CellRegion, Consumer, Producer, RingError, RingLayout, SharedRegion, CONS_OFFSET,
    HEADER_BYTES, PROD_OFFSET,
};
use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::AtomicU32;

/// Backing memory: bytes or words (to cover both region types).
enum Mem {
    Cells(Vec<Cell<u8>>),
    Words(Vec<AtomicU32>),
}

impl Mem {
    fn new(len: usize, words: bool) -> Mem {
        if words {
            Mem::Words((0..len / 4).map(|_| AtomicU32::new(0)).collect())
        } else {
            Mem::Cells((0..len).map(|_| Cell::new(0)).collect())
        }
    }
}

/// A region that asserts every access lies inside `limit` bytes (the
/// layout's size) before passing it on.
struct Guard<'a> {
    inner: Inner<'a>,
    limit: usize,
}

enum Inner<'a> {
    Cells(CellRegion<'a>),
    Words(AtomicRegion<'a>),
}

impl<'a> Guard<'a> {
    fn new(m: &'a Mem, layout: &RingLayout) -> Self {
        let inner = match m {
            Mem::Cells(c) => Inner::Cells(CellRegion::new(c)),
            Mem::Words(w) => Inner::Words(AtomicRegion::new(w)),
        };
        Guard {
            inner,
            limit: layout.bytes_total(),
        }
    }

    fn r(&self) -> &dyn SharedRegion {
        match &self.inner {
            Inner::Cells(c) => c,
            Inner::Words(w) => w,
        }
    }

    fn ok(&self, off: usize, len: usize) {
        let end = off.checked_add(len).expect("offset overflow");
        assert!(
            end <= self.limit,
            "ring access {off}+{len} outside {}",
            self.limit
        );
    }
}

impl SharedRegion for Guard<'_> {
    fn len(&self) -> usize {
        self.r().len()
    }
    fn load_u32_acquire(&self, off: usize) -> Option<u32> {
        self.ok(off, 4);
        self.r().load_u32_acquire(off)
    }
    fn store_u32_release(&self, off: usize, v: u32) -> bool {
        self.ok(off, 4);
        self.r().store_u32_release(off, v)
    }
    fn read(&self, off: usize, dst: &mut [u8]) -> bool {
        self.ok(off, dst.len());
        self.r().read(off, dst)
    }
    fn write(&self, off: usize, src: &[u8]) -> bool {
        self.ok(off, src.len());
        self.r().write(off, src)
    }
}

fn layout_from(r: &mut Reader<'_>) -> Option<RingLayout> {
    let l = match r.u8() % 4 {
        0 => RingLayout::new(u32::from(r.u8()), u32::from(r.u8()) * 16, 256),
        1 => RingLayout::new(r.u32(), r.u32(), r.u32()),
        2 => RingLayout::from_raw(r.u32(), r.u32()),
        _ => RingLayout::from_resp(r.u32(), r.u32(), r.u32()),
    }
    .ok()?;
    assert!(l.entries().is_power_of_two());
    assert!(l.entry_size() > 0 && l.entry_size() % 16 == 0);
    assert_eq!(l.bytes_total() % 4096, 0);
    let need = u64::from(l.entries()) * u64::from(l.entry_size()) + u64::from(HEADER_BYTES);
    assert!(need <= l.bytes_total() as u64);
    for i in [0, 1, l.entries() - 1, l.entries(), u32::MAX] {
        let off = l.slot_offset(i);
        assert!(off >= HEADER_BYTES as usize);
        assert!(off + l.entry_size() as usize <= l.bytes_total());
    }
    // Keep the fuzzer fast: at most 256 KiB.
    (l.bytes_total() <= 1 << 18).then_some(l)
}

/// The harness.
pub fn run(data: &[u8]) {
    let mut r = Reader::new(data);
    let Some(layout) = layout_from(&mut r) else {
        return;
    };
    let start = match r.u8() % 3 {
        0 => 0,
        1 => 0u32.wrapping_sub(u32::from(r.u8())),
        _ => r.u32(),
    };
    let words = r.bool();
    let mut mem = Mem::new(layout.bytes_total(), words);
    let mut layout = layout;
    let esz = layout.entry_size() as usize;
    {
        let g = Guard::new(&mem, &layout);
        layout.init_header(&g, start).expect("init_header");
    }
    let mut prod = Producer::new(layout, start);
    let mut cons = Consumer::new(layout, start);
    // Model: contents of entries from `base` (the released consumer index)
    // up to the producer index, as written.
    let mut base = start;
    let mut model: VecDeque<Vec<u8>> = VecDeque::new();
    let mut honest = true; // no index scribbled
    let mut seq = 0u32;
    let mut pfault = None;
    let mut cfault = None;

    let mut steps = 0;
    while !r.is_empty() && steps < 2000 {
        steps += 1;
        let g = Guard::new(&mem, &layout);
        let op = r.u8() % 16;
        match op {
            0 | 1 => {
                let len = match r.u8() {
                    0..=239 => (usize::from(r.u8()) * 4).min(esz).max(4),
                    _ => usize::from(r.u16()),
                };
                seq = seq.wrapping_add(1);
                let bytes: Vec<u8> = (0..len).map(|i| (i as u32 ^ seq) as u8).collect();
                let res = if op == 0 {
                    prod.write_next(&g, &bytes)
                } else {
                    prod.push(&g, &bytes)
                };
                match res {
                    Ok(()) => {
                        assert!(len <= esz);
                        model.push_back(bytes);
                    }
                    Err(RingError::BadLength) => assert!(len > esz),
                    Err(RingError::Full) => {}
                    Err(e) => assert!(!honest, "write: {e:?}"),
                }
            }
            2 => {
                if let Err(e) = prod.publish(&g) {
                    assert!(!honest, "publish: {e:?}");
                }
            }
            3 | 4 => {
                let len = match r.u8() {
                    0..=239 => esz,
                    _ => usize::from(r.u16()),
                };
                let mut dst = vec![0u8; len];
                let idx = cons.index();
                let res = if op == 3 {
                    cons.read_next(&g, &mut dst)
                } else {
                    cons.pop(&g, &mut dst)
                };
                match res {
                    Ok(true) => {
                        assert!(len <= esz);
                        if honest {
                            let k = idx.wrapping_sub(base) as usize;
                            let want = model.get(k).expect("read past the written entries");
                            let n = want.len().min(len);
                            assert_eq!(&dst[..n], &want[..n], "entry {idx}");
                        }
                    }
                    Ok(false) => {}
                    Err(RingError::BadLength) => assert!(len > esz),
                    Err(e) => assert!(!honest, "read: {e:?}"),
                }
            }
            5 => {
                let n = u32::from(r.u8() % 8);
                match cons.release(&g, n) {
                    Ok(()) | Err(RingError::BadLength) => {}
                    Err(e) => assert!(!honest, "release: {e:?}"),
                }
            }
            6 => {
                if let Err(e) = cons.release_all(&g) {
                    assert!(!honest, "release_all: {e:?}");
                }
            }
            7 => {
                let a = prod.refresh(&g);
                let b = cons.refresh(&g);
                if honest {
                    assert!(a.is_ok() && b.is_ok(), "{a:?} {b:?}");
                }
                if let Ok(free) = a {
                    assert!(free <= layout.entries());
                }
                if let Ok(avail) = b {
                    assert!(avail <= layout.entries());
                }
            }
            8 => {
                if let Ok(Some(off)) = cons.peek(&g) {
                    assert!(off >= HEADER_BYTES as usize && off + esz <= layout.bytes_total());
                }
                if let Ok(Some(off)) = prod.next_slot(&g) {
                    assert!(off >= HEADER_BYTES as usize && off + esz <= layout.bytes_total());
                }
                let _ = prod.is_full(&g);
                let _ = prod.free_slots(&g);
            }
            9 => {
                let _ = cons.consume();
                let _ = prod.advance();
                // Advancing without writing leaves slot contents unknown.
                honest = false;
            }
            10 | 11 => {
                // The peer scribbles an index.
                let off = if op == 10 { PROD_OFFSET } else { CONS_OFFSET };
                let cur = g.load_u32_acquire(off).unwrap_or(0);
                let v = match r.u8() % 3 {
                    0 => cur.wrapping_add(u32::from(r.u8())),
                    1 => cur.wrapping_sub(u32::from(r.u8())),
                    _ => r.u32(),
                };
                g.store_u32_release(off, v);
                honest = false;
            }
            12 => {
                // The peer scribbles entry bytes (indices untouched).
                let off = usize::from(r.u16()) % layout.bytes_total();
                let off = off.max(HEADER_BYTES as usize);
                let n = usize::from(r.u8() % 64);
                let b = r.bytes(n).to_vec();
                let end = (off + b.len()).min(layout.bytes_total());
                g.write(off, &b[..end - off]);
                honest = false;
            }
            13 => {
                // Resize (a CQ): move to a fresh ring.
                let Some(nl) = layout_from(&mut r) else {
                    continue;
                };
                let nmem = Mem::new(nl.bytes_total(), r.bool());
                let res = {
                    let ng = Guard::new(&nmem, &nl);
                    prod.transfer(&g, nl, &ng)
                };
                match res {
                    Ok(t) => {
                        assert!(t.count <= nl.entries());
                        assert_eq!(nl.entry_size(), layout.entry_size());
                        mem = nmem;
                        layout = nl;
                        let ng = Guard::new(&mem, &layout);
                        prod = t.producer;
                        cons = Consumer::attach(layout, &ng).expect("attach after transfer");
                        assert_eq!(cons.index(), t.cons);
                        if honest {
                            // Entries below the released index are gone.
                            let drop_n = t.cons.wrapping_sub(base) as usize;
                            assert!(drop_n <= model.len());
                            model.drain(..drop_n);
                            base = t.cons;
                        }
                        pfault = None;
                        cfault = None;
                    }
                    Err(RingError::BadEntrySize) => {
                        assert_ne!(nl.entry_size(), layout.entry_size())
                    }
                    Err(RingError::Full) => {}
                    Err(e) => assert!(!honest, "transfer: {e:?}"),
                }
                continue;
            }
            14 => {
                // A fresh attach sees a consistent ring while honest.
                let p = Producer::attach(layout, &g);
                let c = Consumer::attach(layout, &g);
                if honest {
                    let p = p.expect("producer attach");
                    let c = c.expect("consumer attach");
                    assert_eq!(c.index(), cons.released());
                    assert!(p.index().wrapping_sub(c.index()) <= layout.entries());
                }
            }
            _ => {
                // Atomic region: unaligned and partial-word accesses.
                let off = usize::from(r.u16()) % layout.bytes_total();
                let mut b = vec![0u8; usize::from(r.u8() % 16)];
                let end = (off + b.len()).min(layout.bytes_total());
                let len = end - off;
                let _ = g.read(off, &mut b[..len]);
                let _ = g.load_u32_acquire(off & !3);
            }
        }
        // Released entries leave the model.
        if honest {
            let rel = cons.released().wrapping_sub(base) as usize;
            assert!(rel <= model.len(), "released unwritten entries");
            model.drain(..rel);
            base = cons.released();
        }
        // Private counts stay within the ring; faults are sticky.
        assert!(prod.pending() <= layout.entries());
        assert!(cons.unreleased() <= layout.entries());
        if let Some(f) = pfault {
            assert_eq!(prod.fault(), Some(f));
        }
        if let Some(f) = cfault {
            assert_eq!(cons.fault(), Some(f));
        }
        pfault = prod.fault();
        cfault = cons.fault();
        if honest {
            assert!(pfault.is_none() && cfault.is_none());
        }
    }
}
