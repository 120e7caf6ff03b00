// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Replays the seeds and the committed inputs (`seeds/`, `regressions/`)
//! through every harness with plain `cargo test` (stable, no libFuzzer):
//!
//!     cargo test --manifest-path drivers/infiniband/sw/rroce/proto/fuzz/Cargo.toml \
//!         --no-default-features --release
//!
//! `-- --ignored write_seeds` (re)writes the generated files of
//! `seeds/<target>/` from `rroce_proto_fuzz::seeds`.

use rroce_proto_fuzz::seeds::{self, TARGETS};
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn replay_dir(target: &str, dir: &Path) -> usize {
    let Ok(rd) = fs::read_dir(dir) else { return 0 };
    let mut files: Vec<PathBuf> = rd
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    for f in &files {
        let data = fs::read(f).unwrap();
        eprintln!("replay {target} {}", f.display());
        seeds::run(target, &data);
    }
    files.len()
}

#[test]
fn generated_seeds() {
    for (t, _, data) in seeds::all() {
        seeds::run(t, &data);
    }
}

#[test]
fn committed_inputs() {
    let mut n = 0;
    for t in TARGETS {
        n += replay_dir(t, &root().join("seeds").join(t));
        n += replay_dir(t, &root().join("regressions").join(t));
    }
    assert!(n > 0, "no committed inputs found");
}

#[test]
fn empty_and_tiny_inputs() {
    for t in TARGETS {
        seeds::run(t, &[]);
        for b in 0..=255u8 {
            seeds::run(t, &[b]);
            seeds::run(t, &[b; 64]);
        }
    }
}

#[test]
#[ignore = "writes seeds/"]
fn write_seeds() {
    // Files of other names (minimized fuzzer finds, named by their SHA-1)
    // are kept.
    for t in TARGETS {
        fs::create_dir_all(root().join("seeds").join(t)).unwrap();
    }
    for (t, name, data) in seeds::all() {
        fs::write(root().join("seeds").join(t).join(name), data).unwrap();
    }
}
