// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! What the device and context entry points decide: which device names
//! are ours, how the firmware version reads, errno conventions, warnings.

use core::ffi::{c_char, c_int};
use std::io::Write as _;

use rroce_proto::abi::DEVICE_NAME_PREFIX;

use crate::ffi::{DEVICE_ATTR_FW_VER_LEN, EIO};
#[cfg(test)]
use crate::ffi::{EINVAL, IBV_SYSFS_NAME_MAX};

/// fnmatch(3) text libibverbs matches a device name against ("rdma_device:N"
/// followed by the name).
pub(crate) const NAME_MODALIAS_PREFIX: &str = "rdma_device:N";
/// Length of [`NAME_MATCH_PATTERN`] including its `*` and NUL.
pub(crate) const NAME_MATCH_LEN: usize = NAME_MODALIAS_PREFIX.len() + DEVICE_NAME_PREFIX.len() + 2;

/// Builds `rdma_device:N<DEVICE_NAME_PREFIX>*\0`: matches exactly the device
/// names that start with the prefix (e.g. `rroce0`), unlike rdma-core's
/// `VERBS_NAME_MATCH` whose leading `*` would also accept names that merely
/// contain it.
pub(crate) const fn name_match_pattern() -> [u8; NAME_MATCH_LEN] {
    let mut out = [0u8; NAME_MATCH_LEN];
    let head = NAME_MODALIAS_PREFIX.as_bytes();
    let name = DEVICE_NAME_PREFIX.as_bytes();
    let mut i = 0;
    while i < head.len() {
        out[i] = head[i];
        i += 1;
    }
    let mut j = 0;
    while j < name.len() {
        let c = name[j];
        // Compile-time check: the prefix must not contain fnmatch syntax.
        assert!(c != b'*' && c != b'?' && c != b'[' && c != b'\\' && c != 0);
        out[i] = c;
        i += 1;
        j += 1;
    }
    out[i] = b'*';
    out
}

/// NUL-terminated pattern for the match table.
pub(crate) static NAME_MATCH_PATTERN: [u8; NAME_MATCH_LEN] = name_match_pattern();

/// An errno value for a failed `ibv_cmd_*` return code.
pub(crate) fn errno_of(ret: c_int) -> c_int {
    match ret.checked_abs() {
        Some(e) if e != 0 => e,
        _ => EIO,
    }
}

/// Prints a warning the way libibverbs does (stderr, one line).
pub(crate) fn warn(args: core::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr().lock(), "librroce: Warning: {args}");
}

/// The NUL-terminated C string in `chars`, lossily decoded.
pub(crate) fn c_chars_to_string(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Formats a firmware version word as rroce/rxe do: three 16-bit fields,
/// "major.minor.sub_minor" from bits 47..32, 31..16, 15..0.  The result is
/// NUL-terminated and zero-padded.
pub(crate) fn format_fw_ver(raw: u64) -> [u8; DEVICE_ATTR_FW_VER_LEN] {
    struct Buf {
        bytes: [u8; DEVICE_ATTR_FW_VER_LEN],
        len: usize,
    }
    impl core::fmt::Write for Buf {
        fn write_str(&mut self, s: &str) -> core::fmt::Result {
            for &b in s.as_bytes() {
                // Keep the last byte for the terminating NUL.
                if self.len >= DEVICE_ATTR_FW_VER_LEN - 1 {
                    return Err(core::fmt::Error);
                }
                if let Some(slot) = self.bytes.get_mut(self.len) {
                    *slot = b;
                }
                self.len += 1;
            }
            Ok(())
        }
    }
    let mut buf = Buf {
        bytes: [0; DEVICE_ATTR_FW_VER_LEN],
        len: 0,
    };
    let _ = core::fmt::write(
        &mut buf,
        format_args!(
            "{}.{}.{}",
            (raw >> 32) & 0xffff,
            (raw >> 16) & 0xffff,
            raw & 0xffff
        ),
    );
    buf.bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_text() {
        assert_eq!(&NAME_MATCH_PATTERN[..], b"rdma_device:Nrroce*\0");
    }

    #[test]
    fn fw_ver_format() {
        let s = format_fw_ver((1 << 32) | (2 << 16) | 3);
        assert_eq!(&s[..6], b"1.2.3\0");
        let s = format_fw_ver(0xffff_ffff_ffff);
        assert_eq!(&s[..18], b"65535.65535.65535\0");
        assert_eq!(s[63], 0);
    }

    #[test]
    fn errno_mapping() {
        assert_eq!(errno_of(EINVAL), EINVAL);
        assert_eq!(errno_of(-EINVAL), EINVAL);
        assert_eq!(errno_of(0), EIO);
        assert_eq!(errno_of(c_int::MIN), EIO);
    }

    #[test]
    fn c_string_decoding() {
        let mut name = [0 as c_char; IBV_SYSFS_NAME_MAX];
        for (d, s) in name.iter_mut().zip(b"rroce0") {
            *d = *s as c_char;
        }
        assert_eq!(c_chars_to_string(&name), "rroce0");
        assert_eq!(c_chars_to_string(&[b'a' as c_char; 4]), "aaaa");
    }
}
