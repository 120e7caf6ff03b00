// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Loads the freshly built provider through the host's real libibverbs
//! (rdma-core 44) and checks that it links, registers and claims exactly the
//! devices it should.
//!
//! The host has no RDMA hardware, so the device tests fake one: in a private
//! mount namespace (`unshare -m`, needs root) a tmpfs over `/dev` provides
//! `/dev/infiniband/uverbsN` (uverbs0 is a character device with /dev/null's
//! numbers), and `SYSFS_PATH` points libibverbs at a fake sysfs tree.
//! libibverbs only falls back to sysfs when RDMA netlink is unavailable, so
//! those tests skip themselves on hosts with a loaded RDMA stack (use the VM
//! there) or without mount namespaces.  `opens_device_through_mock_kernel`
//! additionally preloads `tests/c/mock_uverbs.c`, which answers the uverbs
//! write() commands on that device like a tiny rroce kernel driver would.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Owns a scratch directory and removes it on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("rroce-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `target/<profile>/librroce.so`, next to the `deps/` holding this test.
///
/// Cargo does not build a cdylib for integration tests, so (re)build it here
/// with the same profile and target directory; this also keeps the tested
/// library in sync with the sources.
fn built_provider() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap();
    let target_dir = profile_dir.parent().unwrap();
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()).unwrap() {
        "debug" => "dev",
        other => other,
    };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "-p",
            "rroce-provider",
            "--profile",
            profile,
        ])
        .env("CARGO_TARGET_DIR", target_dir)
        .status()
        .unwrap();
    assert!(status.success(), "building the provider failed");
    let so = profile_dir.join("librroce.so");
    assert!(so.exists(), "{} not built", so.display());
    so
}

/// Copies the provider to `<dir>/lib/librroce-rdmav34.so`; returns the stem
/// `<dir>/lib/librroce` that RDMAV_DRIVERS and .driver files take.
fn install(dir: &Path) -> PathBuf {
    let lib = dir.join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::copy(built_provider(), lib.join("librroce-rdmav34.so")).unwrap();
    lib.join("librroce")
}

fn have_command(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd} >/dev/null")])
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn dlopen_resolves_symbols_and_runs_constructor() {
    if !have_command("ibv_devices") {
        eprintln!("SKIP: ibv_devices (ibverbs-utils) not installed");
        return;
    }
    let scratch = Scratch::new("dlopen");
    let stem = install(&scratch.0);
    let so = format!("{}-rdmav34.so", stem.display());
    let out = Command::new("ibv_devices")
        .env("LD_PRELOAD", &so)
        .env("LD_BIND_NOW", "1")
        .env("LD_DEBUG", "files,bindings")
        .output()
        .unwrap();
    let err = text(&out.stderr);
    for bad in [
        "symbol lookup error",
        "undefined symbol",
        "cannot open shared object",
    ] {
        assert!(!err.contains(bad), "loader error ({bad}):\n{err}");
    }
    assert!(
        err.contains(&format!("calling init: {so}")),
        "constructor of {so} did not run:\n{err}"
    );
    assert!(
        err.lines().any(|l| l.contains(&so)
            && l.contains("libibverbs.so.1")
            && l.contains("`verbs_register_driver_34' [IBVERBS_PRIVATE_34]")),
        "verbs_register_driver_34@IBVERBS_PRIVATE_34 not bound:\n{err}"
    );
}

/// Writes a fake sysfs with three uverbs devices:
/// `rroce0` (ABI 1, must be ours), `rroce1` (ABI 2, must be refused) and
/// `xrroce0` (ABI 1, name must not match).
fn fake_sysfs(root: &Path) -> PathBuf {
    let sys = root.join("sys");
    let verbs = sys.join("class/infiniband_verbs");
    std::fs::create_dir_all(&verbs).unwrap();
    std::fs::write(verbs.join("abi_version"), "6\n").unwrap();
    for (i, (name, abi)) in [("rroce0", 1), ("rroce1", 2), ("xrroce0", 1)]
        .into_iter()
        .enumerate()
    {
        let uv = verbs.join(format!("uverbs{i}"));
        std::fs::create_dir_all(&uv).unwrap();
        std::fs::write(uv.join("ibdev"), format!("{name}\n")).unwrap();
        // uverbs0 is /dev/null's character device (1:3), see NS_SETUP.
        let dev = if i == 0 {
            "1:3".to_string()
        } else {
            format!("231:{}", 192 + i)
        };
        std::fs::write(uv.join("dev"), format!("{dev}\n")).unwrap();
        std::fs::write(uv.join("abi_version"), format!("{abi}\n")).unwrap();
        let ib = sys.join("class/infiniband").join(name);
        std::fs::create_dir_all(&ib).unwrap();
        std::fs::write(ib.join("node_type"), "1: CA\n").unwrap();
        std::fs::write(ib.join("node_guid"), format!("0002:c903:0000:123{i}\n")).unwrap();
    }
    sys
}

/// Shell run inside `unshare -m`: device placeholders on a private /dev,
/// optionally a private /etc/libibverbs.d, then the command.
const NS_SETUP: &str = r#"set -e
mount -t tmpfs rroce-test /dev
mkdir /dev/infiniband
mknod /dev/infiniband/uverbs0 c 1 3
: > /dev/infiniband/uverbs1
: > /dev/infiniband/uverbs2
if [ -n "$RROCE_TEST_CONF_DIR" ]; then
    mount --bind "$RROCE_TEST_CONF_DIR" /etc/libibverbs.d
fi
exec "$@"
"#;

/// Whether the fake-sysfs tests can run here; prints why not.
fn namespace_usable() -> bool {
    if !have_command("ibv_devices") || !have_command("unshare") {
        eprintln!("SKIP: ibv_devices or unshare missing");
        return false;
    }
    if Path::new("/sys/class/infiniband").exists() || Path::new("/sys/module/ib_core").exists() {
        eprintln!("SKIP: host has an RDMA stack; libibverbs would not read the fake sysfs");
        return false;
    }
    let ok = Command::new("unshare")
        .args([
            "-m",
            "sh",
            "-c",
            "mount -t tmpfs rroce-probe /dev && mknod /dev/rroce-probe c 1 3",
        ])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("SKIP: cannot create a mount namespace (needs root)");
    }
    ok
}

/// Runs `ibv_devices` against the fake sysfs with `envs` added.
fn ibv_devices_in_ns(sys: &Path, envs: &[(&str, &str)]) -> Output {
    run_in_ns(sys, envs, "ibv_devices")
}

/// Runs `program` in the namespace against the fake sysfs with `envs` added.
fn run_in_ns(sys: &Path, envs: &[(&str, &str)], program: &str) -> Output {
    let mut cmd = Command::new("unshare");
    cmd.args(["-m", "sh", "-c", NS_SETUP, "sh", program])
        .env("SYSFS_PATH", sys)
        .env("IBV_SHOW_WARNINGS", "1")
        .env_remove("RDMAV_DRIVERS")
        .env_remove("IBV_DRIVERS")
        .env_remove("RROCE_TEST_CONF_DIR");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn assert_claims_only_rroce0(how: &str, out: &Output) {
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    let ctx = format!("[{how}]\nstdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(out.status.success(), "ibv_devices failed {ctx}");
    assert!(
        !stderr.contains("couldn't load driver"),
        "load failure {ctx}"
    );
    let devices: Vec<&str> = stdout
        .lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(devices, ["rroce0"], "claimed devices {ctx}");
    assert!(stdout.contains("0002c90300001230"), "node GUID {ctx}");
    assert!(
        stderr.contains("Driver rroce does not support the kernel ABI of 2 (supports 1 to 1)"),
        "ABI range check {ctx}"
    );
    assert!(
        stderr.contains("no userspace device-specific driver found for xrroce0"),
        "xrroce0 must stay unclaimed {ctx}"
    );
}

#[test]
fn claims_rroce_devices_by_name_and_abi() {
    if !namespace_usable() {
        return;
    }
    let scratch = Scratch::new("match");
    let stem = install(&scratch.0);
    let sys = fake_sysfs(&scratch.0);
    let stem_str = stem.to_str().unwrap();

    // 1. RDMAV_DRIVERS with an absolute stem (libibverbs appends
    //    "-rdmav34.so").
    let out = ibv_devices_in_ns(&sys, &[("RDMAV_DRIVERS", stem_str)]);
    assert_claims_only_rroce0("RDMAV_DRIVERS=<abs stem>", &out);

    // 2. RDMAV_DRIVERS with a bare name, found through LD_LIBRARY_PATH.
    let lib_dir = stem.parent().unwrap().to_str().unwrap();
    let out = ibv_devices_in_ns(
        &sys,
        &[("RDMAV_DRIVERS", "rroce"), ("LD_LIBRARY_PATH", lib_dir)],
    );
    assert_claims_only_rroce0("RDMAV_DRIVERS=rroce + LD_LIBRARY_PATH", &out);

    // 3. A .driver file with an absolute stem in the (compiled-in) config
    //    directory, which is bind-mounted privately here.
    if Path::new("/etc/libibverbs.d").is_dir() {
        let conf = scratch.0.join("conf");
        std::fs::create_dir_all(&conf).unwrap();
        std::fs::write(conf.join("rroce.driver"), format!("driver {stem_str}\n")).unwrap();
        let out = ibv_devices_in_ns(&sys, &[("RROCE_TEST_CONF_DIR", conf.to_str().unwrap())]);
        assert_claims_only_rroce0("/etc/libibverbs.d/rroce.driver", &out);
    }
}

/// Compiles `tests/c/<name>` with the system C compiler.
fn compile_c(name: &str, out: &Path, extra: &[&str]) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(cc)
        .args(["-std=gnu11", "-Wall", "-Werror", "-o"])
        .arg(out)
        .arg(&src)
        .args(extra)
        .status()
        .unwrap();
    assert!(status.success(), "compiling {} failed", src.display());
}

#[test]
fn opens_device_through_mock_kernel() {
    if !namespace_usable() || !have_command("cc") {
        eprintln!("SKIP: mock-kernel test needs a mount namespace and cc");
        return;
    }
    let scratch = Scratch::new("mock");
    let stem = install(&scratch.0);
    let sys = fake_sysfs(&scratch.0);
    let mock = scratch.0.join("mock_uverbs.so");
    let client = scratch.0.join("open_device");
    compile_c("mock_uverbs.c", &mock, &["-shared", "-fPIC", "-ldl"]);
    compile_c("open_device.c", &client, &["-libverbs"]);
    let envs = [
        ("RDMAV_DRIVERS", stem.to_str().unwrap()),
        ("LD_PRELOAD", mock.to_str().unwrap()),
    ];
    let client = client.to_str().unwrap();

    let out = run_in_ns(&sys, &envs, client);
    let stdout = text(&out.stdout);
    let ctx = format!("stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    assert!(out.status.success(), "client failed {ctx}");
    let expected = [
        "open=ok",
        "query_device=0 fw_ver=1.2.3 max_qp=64 phys_port_cnt=1",
        "query_device_ex=0 fw_ver=1.2.3",
        "query_port=0 state=4 link_layer=2",
        "alloc_pd=ok handle=42 same_ctx=1",
        "create_srq=ok max_wr=1 max_sge=3",
        "destroy_srq=0",
        "alloc_dm=null errno=95",
        "dealloc_pd=0",
        "close=0",
    ];
    assert_eq!(stdout.lines().collect::<Vec<_>>(), expected, "{ctx}");

    // A kernel driver with another private ABI must be refused with EPROTO.
    let mut envs = envs.to_vec();
    envs.push(("MOCK_RROCE_ABI", "7"));
    let out = run_in_ns(&sys, &envs, client);
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    let ctx = format!("stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(out.status.success(), "client failed {ctx}");
    assert_eq!(stdout.trim(), "open_errno=71", "{ctx}");
    assert!(
        stderr.contains(
            "librroce: Warning: device rroce0: kernel driver reports rroce ABI version 7, \
             this provider supports only 1"
        ),
        "{ctx}"
    );
}

#[test]
fn data_path_through_mock_kernel() {
    if !namespace_usable() || !have_command("cc") {
        eprintln!("SKIP: mock-kernel test needs a mount namespace and cc");
        return;
    }
    let scratch = Scratch::new("datapath");
    let stem = install(&scratch.0);
    let sys = fake_sysfs(&scratch.0);
    let mock = scratch.0.join("mock_uverbs.so");
    let client = scratch.0.join("datapath");
    compile_c("mock_uverbs.c", &mock, &["-shared", "-fPIC", "-ldl"]);
    compile_c("datapath.c", &client, &["-libverbs", "-ldl"]);
    let envs = [
        ("RDMAV_DRIVERS", stem.to_str().unwrap()),
        ("LD_PRELOAD", mock.to_str().unwrap()),
    ];
    let out = run_in_ns(&sys, &envs, client.to_str().unwrap());
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    let ctx = format!("stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(out.status.success(), "client failed {ctx}");
    assert_eq!(stdout.trim(), "datapath=ok", "{ctx}");
    // Broken kernel data is reported, not just refused.
    for warning in [
        "librroce: Warning: CQ 10", // corrupt CQE / impossible index
        "corrupt CQE (UnknownStatus)",
        "ring error InvalidIndex",
        "create_cq: invalid CQ ring geometry",
        "create_qp: SQ capacities do not fit the SQ entries",
        "create_ah: kernel returned AH number 0",
        "resize_cq: resized CQ ring does not continue the old one",
        "resize_cq: mapping the CQ ring failed",
        "create_srq: SRQ numbers of core and driver response differ",
    ] {
        assert!(stderr.contains(warning), "missing {warning:?} {ctx}");
    }
}

#[test]
fn parent_domains_through_mock_kernel() {
    if !namespace_usable() || !have_command("cc") {
        eprintln!("SKIP: mock-kernel test needs a mount namespace and cc");
        return;
    }
    let scratch = Scratch::new("parent");
    let stem = install(&scratch.0);
    let sys = fake_sysfs(&scratch.0);
    let mock = scratch.0.join("mock_uverbs.so");
    let client = scratch.0.join("parent_domain");
    compile_c("mock_uverbs.c", &mock, &["-shared", "-fPIC", "-ldl"]);
    compile_c("parent_domain.c", &client, &["-libverbs", "-ldl"]);
    let envs = [
        ("RDMAV_DRIVERS", stem.to_str().unwrap()),
        ("LD_PRELOAD", mock.to_str().unwrap()),
    ];
    let out = run_in_ns(&sys, &envs, client.to_str().unwrap());
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    let ctx = format!("stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(out.status.success(), "client failed {ctx}");
    assert_eq!(stdout.trim(), "parent_domain=ok", "{ctx}");
    // The failed creations say why.
    assert!(
        stderr.contains("create_qp: allocating the queue buffers failed"),
        "{ctx}"
    );
}

/// The `ibv_wr_*` and `ibv_start_poll` sessions are critical sections
/// against other threads (`c/sessions.c`).
#[test]
fn sessions_through_mock_kernel() {
    if !namespace_usable() || !have_command("cc") {
        eprintln!("SKIP: needs root (unshare -m) and cc");
        return;
    }
    let scratch = Scratch::new("sessions");
    let stem = install(&scratch.0);
    let sys = fake_sysfs(&scratch.0);
    let mock = scratch.0.join("mock_uverbs.so");
    let client = scratch.0.join("sessions");
    compile_c("mock_uverbs.c", &mock, &["-shared", "-fPIC", "-ldl"]);
    compile_c("sessions.c", &client, &["-libverbs", "-ldl", "-lpthread"]);
    let envs = [
        ("RDMAV_DRIVERS", stem.to_str().unwrap()),
        ("LD_PRELOAD", mock.to_str().unwrap()),
    ];
    let out = run_in_ns(&sys, &envs, client.to_str().unwrap());
    let stdout = text(&out.stdout);
    let ctx = format!("stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    assert!(out.status.success(), "client failed {ctx}");
    assert!(stdout.contains("sessions=ok"), "{ctx}");
}
