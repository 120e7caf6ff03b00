// SPDX-License-Identifier: GPL-2.0
//! The ICRC's CRC-32: the kernel's table (`crc32_le`) or the crypto API's
//! `crc32` (`crc32-pclmul` on x86 CPUs with PCLMULQDQ), chosen once at
//! module load.
//!
//! The `icrc` module parameter decides: `table`, `crypto`, or `auto` (the
//! default), which times both over a packet's worth of bytes and takes the
//! crypto API's only if it is at least 10 % faster (it costs an indirect
//! call, and `crc32-generic` is the table behind one).  On a real CPU or under KVM that is `crc32-pclmul`, several
//! times faster than the table; under QEMU's TCG, which emulates PCLMULQDQ
//! bit by bit, the table (`Documentation/benchmarks.md`, 2026-12-05).  The
//! choice, what was measured and why, goes to the kernel log.  Before
//! either is timed, both must give the same CRC-32s; a `crc32` that does
//! not is never used.

#![forbid(unsafe_code)]

use kernel::c_str;
use kernel::prelude::*;

use crate::net::crc::{crc32_le, icrc_param, CryptoCrc32};
use crate::sync::timer::ktime_ns;

/// Which CRC-32 new devices use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Choice {
    /// `crc32_le`.
    Table,
    /// The crypto API's `crc32`.
    Crypto,
}

/// Pieces shorter than this go to the table even with [`Choice::Crypto`]:
/// the masked headers (at most 68 bytes) and small payloads, where the
/// indirect call and the FPU section cost more than they save
/// (`crc32-pclmul` itself hands anything below 79 bytes to the table).
const CRYPTO_MIN: usize = 256;

/// A device's CRC-32 for the ICRC.
pub(crate) enum Icrc {
    /// `crc32_le`.
    Table,
    /// The crypto API's `crc32`, with a transform of the device's own.
    Crypto(CryptoCrc32),
}

impl Icrc {
    /// The CRC-32 of a new device (may sleep): with [`Choice::Crypto`] a
    /// transform of its own, or the table if none can be had.
    pub(crate) fn new(choice: Choice) -> Self {
        match choice {
            Choice::Crypto => CryptoCrc32::new().map_or(Icrc::Table, Icrc::Crypto),
            Choice::Table => Icrc::Table,
        }
    }

    /// Advances the raw CRC register `crc` over `data` (`crc32_le`'s
    /// convention), in any context.
    pub(crate) fn update(&self, crc: u32, data: &[u8]) -> u32 {
        match self {
            Icrc::Crypto(t) if data.len() >= CRYPTO_MIN => t.update(crc, data),
            _ => crc32_le(crc, data),
        }
    }
}

/// Bytes timed per computation: a full packet's payload at the usual path
/// MTU of 1024.
const TIMED_LEN: usize = 1024;
/// Computations per round, and rounds (the fastest round counts).
const TIMED_ITERS: u32 = 32;
const TIMED_ROUNDS: u32 = 5;

/// The fastest round's time per computation of `f` over `buf`, in ns.
fn time_ns(f: impl Fn(u32, &[u8]) -> u32, buf: &[u8]) -> u64 {
    let mut best = u64::MAX;
    let mut crc = 0;
    for _ in 0..TIMED_ROUNDS {
        let t0 = ktime_ns();
        for _ in 0..TIMED_ITERS {
            crc = f(crc, buf);
        }
        best = best.min(ktime_ns().saturating_sub(t0) / u64::from(TIMED_ITERS));
    }
    core::hint::black_box(crc);
    best
}

/// Whether `t` computes what the table computes: the CRC-32 check value,
/// and `buf` whole and split (a seed carried between pieces).
fn agrees(t: &CryptoCrc32, buf: &[u8]) -> bool {
    let check = !t.update(!0, b"123456789") == 0xCBF4_3926;
    let (a, b) = buf.split_at(buf.len() / 3);
    let whole = t.update(!0, buf) == crc32_le(!0, buf);
    let split = t.update(t.update(0x1234_5678, a), b) == crc32_le(0x1234_5678, buf);
    check && whole && split
}

/// Picks the CRC-32 of the devices as the `icrc` parameter says (module
/// load, may sleep).  `EINVAL` for an unknown value; with `icrc=crypto`,
/// `ENOENT` if the crypto API has no usable `crc32` and `EIO` if it
/// disagrees with the table.
pub(crate) fn pick() -> Result<Choice> {
    let param = icrc_param();
    let want = match param.as_bytes() {
        b"auto" => None,
        b"table" => Some(Choice::Table),
        b"crypto" => Some(Choice::Crypto),
        _ => {
            pr_err!("icrc={}: want auto, table or crypto\n", param);
            return Err(EINVAL);
        }
    };
    let Some(tfm) = CryptoCrc32::new() else {
        if want == Some(Choice::Crypto) {
            pr_err!("icrc=crypto: the crypto API has no usable crc32\n");
            return Err(ENOENT);
        }
        pr_info!("ICRC CRC-32: crc32_le (the crypto API has no usable crc32)\n");
        return Ok(Choice::Table);
    };
    let mut buf = KVec::with_capacity(TIMED_LEN, GFP_KERNEL)?;
    for i in 0..TIMED_LEN {
        buf.push((i as u8).wrapping_mul(167).wrapping_add(13), GFP_KERNEL)?;
    }
    if !agrees(&tfm, &buf) {
        pr_err!("ICRC CRC-32: {} disagrees with crc32_le; not used\n", tfm.driver());
        return if want == Some(Choice::Crypto) { Err(EIO) } else { Ok(Choice::Table) };
    }
    let table_ns = time_ns(crc32_le, &buf);
    let crypto_ns = time_ns(|c, d| tfm.update(c, d), &buf);
    let faster = crypto_ns.saturating_mul(10) < table_ns.saturating_mul(9);
    let choice = want.unwrap_or(if faster { Choice::Crypto } else { Choice::Table });
    let name = match choice {
        Choice::Table => c_str!("crc32_le"),
        Choice::Crypto => tfm.driver(),
    };
    pr_info!(
        "ICRC CRC-32 over {} bytes: crc32_le {} ns, {} {} ns; using {} (icrc={})\n",
        TIMED_LEN,
        table_ns,
        tfm.driver(),
        crypto_ns,
        name,
        param
    );
    Ok(choice)
}
