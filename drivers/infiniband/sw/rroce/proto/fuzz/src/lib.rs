// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Fuzz harnesses for `rroce-proto`.
//!
//! Each public function takes arbitrary bytes, drives one part of the
//! protocol core with them the way the kernel glue does, and checks with
//! `assert!` what the glue relies on (a panic is a finding).  The
//! `fuzz_targets/*.rs` binaries are one-line wrappers for `cargo fuzz`;
//! `tests/replay.rs` runs the committed seeds and regression inputs through
//! the same functions with plain `cargo test` (stable, no libFuzzer).
//!
//! Structured inputs are read with [`Reader`], a tiny little-endian byte
//! reader that yields zeros once the input is exhausted, so that every
//! byte string is a valid input and [`seeds`] can write inputs in the same
//! format.

pub mod packet;
pub mod requester;
pub mod responder;
pub mod ring;
pub mod seeds;
pub mod ud;
pub mod wqe;

/// Reads fixed-size little-endian values from fuzz input; zeros past the end.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self { data }
    }

    /// Whether all input has been read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Up to `n` bytes (fewer at the end of the input).
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.data.len());
        let (a, b) = self.data.split_at(n);
        self.data = b;
        a
    }

    /// The rest of the input.
    pub fn rest(&mut self) -> &'a [u8] {
        let r = self.data;
        self.data = &[];
        r
    }

    fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut a = [0u8; N];
        let b = self.bytes(N);
        a[..b.len()].copy_from_slice(b);
        a
    }

    /// One byte.
    pub fn u8(&mut self) -> u8 {
        self.array::<1>()[0]
    }

    /// A boolean (low bit of one byte).
    pub fn bool(&mut self) -> bool {
        self.u8() & 1 != 0
    }

    /// A little-endian `u16`.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.array())
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.array())
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.array())
    }

    /// Bytes prefixed by a little-endian `u16` length (capped at `max`).
    pub fn chunk(&mut self, max: usize) -> &'a [u8] {
        let n = usize::from(self.u16()).min(max);
        self.bytes(n)
    }
}

/// Writes values in the format [`Reader`] reads (for seeds).
#[derive(Clone, Debug, Default)]
pub struct Writer {
    /// The bytes written so far.
    pub buf: Vec<u8>,
}

impl Writer {
    /// One byte.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }

    /// A boolean.
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.u8(u8::from(v))
    }

    /// A `u16`.
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// A `u32`.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// A `u64`.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Raw bytes.
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(b);
        self
    }

    /// A `u16`-length-prefixed chunk.
    pub fn chunk(&mut self, b: &[u8]) -> &mut Self {
        let n = u16::try_from(b.len()).expect("chunk too long");
        self.u16(n).bytes(b)
    }
}

/// A path MTU from one byte.
pub fn pmtu_from(b: u8) -> rroce_proto::psn::PathMtu {
    use rroce_proto::psn::PathMtu;
    PathMtu::ALL[usize::from(b) % PathMtu::ALL.len()]
}

/// A PSN near `base` (most bytes) or anywhere: one selector byte, then the
/// delta or value.
pub fn psn_near(r: &mut Reader<'_>, base: rroce_proto::psn::Psn) -> rroce_proto::psn::Psn {
    use rroce_proto::psn::Psn;
    match r.u8() {
        0..=199 => {
            let d = r.u8() as i8;
            Psn::new(base.get().wrapping_add(d as i32 as u32))
        }
        200..=239 => {
            let d = r.u16() as i16;
            Psn::new(base.get().wrapping_add(d as i32 as u32))
        }
        _ => Psn::new(r.u32()),
    }
}

/// Build a whole RoCEv2 UDP payload: headers, `payload_len` bytes of
/// pattern, pad, and a dummy ICRC.  `None` if the headers do not build.
pub fn build_packet(
    bth: &rroce_proto::hdr::Bth,
    ext: &rroce_proto::hdr::Ext,
    payload_len: usize,
) -> Option<Vec<u8>> {
    use rroce_proto::hdr::{build_headers, pad_count};
    let pad = usize::from(pad_count(payload_len));
    let mut bth = *bth;
    bth.pad = pad as u8;
    let mut buf = vec![0u8; 128 + payload_len + pad + 4];
    let n = build_headers(&mut buf, &bth, ext).ok()?;
    for (i, b) in buf[n..n + payload_len].iter_mut().enumerate() {
        *b = i as u8;
    }
    buf.truncate(n + payload_len + pad + 4);
    Some(buf)
}
