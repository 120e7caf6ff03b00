// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! A received datagram in two pieces, read where it lies.
//!
//! A network driver may hand over a packet whose first bytes sit in one
//! buffer and the rest in another: a socket buffer's linear area, then one
//! page fragment.  [`Split`] is such a byte sequence, `head` followed by
//! `tail`, so that the receive path can check and place a packet without
//! first copying it into one buffer.  The parsers (`icrc::ip_layout_of`,
//! `icrc::verify_of`, `hdr::parse_of`, `Parsed::payload_of`) take any
//! [`Pieces`]: a [`Split`], or a plain slice, whose instances the receive
//! path picks for a linear packet, so the common case pays nothing for the
//! split one.  They need every header (IP, UDP, BTH, extension headers) in
//! the first piece; the payload, pad and ICRC may be anywhere.

/// The bytes of `head` followed by those of `tail`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Split<'a> {
    /// The first bytes.
    pub head: &'a [u8],
    /// The rest.
    pub tail: &'a [u8],
}

impl<'a> Split<'a> {
    /// Number of bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.head.len().saturating_add(self.tail.len())
    }

    /// Whether there are no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.head.is_empty() && self.tail.is_empty()
    }

    /// Bytes `start..end` as the part in `head` and the part in `tail`
    /// (either may be empty); `None` if the range is not inside.
    #[inline]
    pub fn range(&self, start: usize, end: usize) -> Option<(&'a [u8], &'a [u8])> {
        if self.tail.is_empty() {
            // One piece (the common case): one bounds check.
            return Some((self.head.get(start..end)?, &[]));
        }
        if start > end || end > self.len() {
            return None;
        }
        let h = self.head.len();
        let a = self.head.get(start.min(h)..end.min(h))?;
        let b = self
            .tail
            .get(start.saturating_sub(h)..end.saturating_sub(h))?;
        Some((a, b))
    }

    /// Bytes `start..end` if they lie in one piece (an empty range always
    /// does); `None` if they straddle the split or are not inside.
    #[inline]
    pub fn contiguous(&self, start: usize, end: usize) -> Option<&'a [u8]> {
        if self.tail.is_empty() {
            return self.head.get(start..end);
        }
        match self.range(start, end)? {
            (a, []) => Some(a),
            ([], b) => Some(b),
            _ => None,
        }
    }

    /// `N` bytes at `off`, gathered across the split.
    #[inline]
    pub fn array<const N: usize>(&self, off: usize) -> Option<[u8; N]> {
        let end = off.checked_add(N)?;
        match self.contiguous(off, end) {
            Some(c) => c.first_chunk::<N>().copied(),
            None => self.gather(off, end),
        }
    }

    /// [`Split::array`] of bytes that straddle the split (or are not
    /// inside).
    #[cold]
    fn gather<const N: usize>(&self, off: usize, end: usize) -> Option<[u8; N]> {
        let (a, b) = self.range(off, end)?;
        let mut out = [0u8; N];
        for (o, v) in out.iter_mut().zip(a.iter().chain(b)) {
            *o = *v;
        }
        Some(out)
    }

    /// Bytes `start..end` as a [`Split`] of their own.
    #[inline]
    pub fn sub(&self, start: usize, end: usize) -> Option<Split<'a>> {
        self.range(start, end)
            .map(|(head, tail)| Split { head, tail })
    }
}

/// Bytes in one piece or two, as the receive path's parsers read them.
/// The parsers need every header in [`Pieces::first`].
pub trait Pieces<'a>: Copy {
    /// Number of bytes.
    fn total(self) -> usize;
    /// The first piece.
    fn first(self) -> &'a [u8];
    /// Bytes `start..end` as the part in the first piece and the part in
    /// the second; `None` if not inside.
    fn span(self, start: usize, end: usize) -> Option<(&'a [u8], &'a [u8])>;
    /// Bytes `start..end` if they lie in one piece.
    fn piece(self, start: usize, end: usize) -> Option<&'a [u8]>;
    /// 4 bytes at `off`.
    fn four(self, off: usize) -> Option<[u8; 4]>;
    /// Bytes `start..end`, of the same kind.
    fn part(self, start: usize, end: usize) -> Option<Self>;
}

impl<'a> Pieces<'a> for &'a [u8] {
    #[inline]
    fn total(self) -> usize {
        self.len()
    }
    #[inline]
    fn first(self) -> &'a [u8] {
        self
    }
    #[inline]
    fn span(self, start: usize, end: usize) -> Option<(&'a [u8], &'a [u8])> {
        Some((self.get(start..end)?, &[]))
    }
    #[inline]
    fn piece(self, start: usize, end: usize) -> Option<&'a [u8]> {
        self.get(start..end)
    }
    #[inline]
    fn four(self, off: usize) -> Option<[u8; 4]> {
        self.get(off..)?.first_chunk::<4>().copied()
    }
    #[inline]
    fn part(self, start: usize, end: usize) -> Option<Self> {
        self.get(start..end)
    }
}

impl<'a> Pieces<'a> for Split<'a> {
    #[inline]
    fn total(self) -> usize {
        self.len()
    }
    #[inline]
    fn first(self) -> &'a [u8] {
        self.head
    }
    #[inline]
    fn span(self, start: usize, end: usize) -> Option<(&'a [u8], &'a [u8])> {
        self.range(start, end)
    }
    #[inline]
    fn piece(self, start: usize, end: usize) -> Option<&'a [u8]> {
        self.contiguous(start, end)
    }
    #[inline]
    fn four(self, off: usize) -> Option<[u8; 4]> {
        self.array::<4>(off)
    }
    #[inline]
    fn part(self, start: usize, end: usize) -> Option<Self> {
        self.sub(start, end)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;

    #[test]
    fn every_split_reads_the_same_bytes() {
        let data: [u8; 23] = core::array::from_fn(|i| i as u8 * 7 + 1);
        for at in 0..=data.len() {
            let s = Split {
                head: &data[..at],
                tail: &data[at..],
            };
            assert_eq!(s.len(), data.len());
            for start in 0..=data.len() {
                for end in start..=data.len() {
                    let (a, b) = s.range(start, end).unwrap();
                    let mut joined = a.to_vec();
                    joined.extend_from_slice(b);
                    assert_eq!(joined, &data[start..end]);
                    let c = s.contiguous(start, end);
                    let one_piece = end <= at || start >= at || start == end;
                    assert_eq!(c.is_some(), one_piece, "{at} {start} {end}");
                    if let Some(c) = c {
                        assert_eq!(c, &data[start..end]);
                    }
                    let sub = s.sub(start, end).unwrap();
                    assert_eq!(sub.len(), end - start);
                }
                if let Some(a) = s.array::<4>(start) {
                    assert_eq!(a, data[start..start + 4]);
                } else {
                    assert!(start + 4 > data.len());
                }
            }
            assert!(s.range(0, data.len() + 1).is_none());
            assert!(s.range(5, 4).is_none());
            assert!(s.array::<4>(usize::MAX - 1).is_none());
        }
    }

    #[test]
    fn one_piece() {
        let s = Split {
            head: b"abc",
            tail: &[],
        };
        assert_eq!(s.contiguous(0, 3), Some(&b"abc"[..]));
        assert_eq!(Pieces::four(&b"abcdef"[..], 2), Some(*b"cdef"));
        assert_eq!(Pieces::span(&b"abc"[..], 1, 3), Some((&b"bc"[..], &[][..])));
        assert!(Split::default().is_empty());
        assert!(!s.is_empty());
    }
}
