// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| rroce_proto_fuzz::packet::run(data));
