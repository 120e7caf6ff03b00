// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Panic-free fixed-offset integer access in byte buffers.
//!
//! Wire headers are big-endian (`be*`); the user ABI shared through memory
//! is native-endian (`ne*`).  An out-of-range read gives 0 and an
//! out-of-range write does nothing: callers check lengths first, these only
//! make sure a mistake can never panic.

/// `N` bytes at `off`, if they are all inside `b`.
#[inline]
pub(crate) fn get<const N: usize>(b: &[u8], off: usize) -> Option<[u8; N]> {
    b.get(off..).and_then(|s| s.first_chunk::<N>()).copied()
}

/// Writes `v` at `off` if it fits entirely inside `b`.
#[inline]
pub(crate) fn put<const N: usize>(b: &mut [u8], off: usize, v: [u8; N]) {
    if let Some(d) = b.get_mut(off..).and_then(|s| s.first_chunk_mut::<N>()) {
        *d = v;
    }
}

/// The byte at `off`.
#[inline]
pub(crate) fn u8_at(b: &[u8], off: usize) -> u8 {
    b.get(off).copied().unwrap_or(0)
}

/// Big-endian `u16` at `off`.
#[inline]
pub(crate) fn be16(b: &[u8], off: usize) -> u16 {
    get(b, off).map_or(0, u16::from_be_bytes)
}

/// Big-endian 24-bit value at `off`.
#[inline]
pub(crate) fn be24(b: &[u8], off: usize) -> u32 {
    get::<3>(b, off).map_or(0, |[x, y, z]| u32::from_be_bytes([0, x, y, z]))
}

/// Big-endian `u32` at `off`.
#[inline]
pub(crate) fn be32(b: &[u8], off: usize) -> u32 {
    get(b, off).map_or(0, u32::from_be_bytes)
}

/// Big-endian `u64` at `off`.
#[inline]
pub(crate) fn be64(b: &[u8], off: usize) -> u64 {
    get(b, off).map_or(0, u64::from_be_bytes)
}

/// Writes the low 24 bits of `v` big-endian at `off`.
#[inline]
pub(crate) fn put_be24(b: &mut [u8], off: usize, v: u32) {
    let [_, x, y, z] = v.to_be_bytes();
    put(b, off, [x, y, z]);
}

/// Native-endian `u16` at `off`.
#[inline]
pub(crate) fn ne16(b: &[u8], off: usize) -> u16 {
    get(b, off).map_or(0, u16::from_ne_bytes)
}

/// Native-endian `u32` at `off`.
#[inline]
pub(crate) fn ne32(b: &[u8], off: usize) -> u32 {
    get(b, off).map_or(0, u32::from_ne_bytes)
}

/// Native-endian `u64` at `off`.
#[inline]
pub(crate) fn ne64(b: &[u8], off: usize) -> u64 {
    get(b, off).map_or(0, u64::from_ne_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_and_out_of_range() {
        let mut b = [0u8; 8];
        put(&mut b, 0, 0x0102_0304u32.to_be_bytes());
        put_be24(&mut b, 4, 0xAABB_CCDD);
        assert_eq!(be32(&b, 0), 0x0102_0304);
        assert_eq!(be24(&b, 4), 0xBB_CCDD);
        assert_eq!(be16(&b, 1), 0x0203);
        assert_eq!(u8_at(&b, 3), 4);
        assert_eq!(ne32(&b, 0), u32::from_ne_bytes([1, 2, 3, 4]));
        // Out of range: zero / no-op, never a panic.
        assert_eq!(be64(&b, 1), 0);
        assert_eq!(ne64(&b, usize::MAX), 0);
        assert_eq!(u8_at(&b, 8), 0);
        put(&mut b, 6, [9u8; 4]);
        put_be24(&mut b, usize::MAX, 1);
        assert_eq!(b[6..], [0xDD, 0]);
        assert_eq!(ne16(&b, 7), 0);
    }
}
