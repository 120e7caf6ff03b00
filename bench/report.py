#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Summarise the logs of bench/pair.sh (two VMs) and bench/in-vm.sh (loopback):
per setup, driver and metric the median and min-max over the rounds, the
rroce/rxe ratio, the failed runs apart; terminal tables, a JSON file and (with
--png) a plot.

    report.py LOGDIR OUT.json [--png OUT.png] [--markdown OUT.md]

LOGDIR holds pair/ and loopback/ (each DRV.NAME.ROUND.log and .cpu files, pair/
also .srv.cpu) and meta.json, or, as before, loopback logs directly.

A run without a result, with a rate of 0 or an infinite latency, or whose log
is missing (from the rounds of meta.json) is a failure: it is listed with its
test and round and left out of every median.

CPU is system+softirq+irq time of the guest(s) (not user time: perftest
busy-polls), per GiB moved over the same interval.  Bytes moved, two VMs: what
the link NIC of that guest sent and received while its CPU time was counted
(frames' bytes, each side on its own count), so work a driver does before or
after perftest's measured window is set against the bytes it moved then (a
perftest -D run leaves up to its TX depth of messages posted when its clock
stops: 128 MiB at 1 MiB per message, which a driver may transmit or flush).
Without link counts (loopback, older logs): perftest's own counts, #iterations
x #bytes for a fixed count (-n: SEND, and 4 MiB and more), its rate x -D for a
duration run (always the client's report) (iperf3: its byte count, scaled from
the measured seconds to the whole run with -O).

OUT.json is a list of rows, one per metric ("metric", "rroce", "rxe", "n",
"rroce_advantage", "setup", "name", "unit", "better" ("higher" or "lower"),
"ratio" (rroce/rxe of the medians), "min", "max", "values" (the good rounds),
"failed" (rounds left out), "tcp" (iperf3 on the same link, bandwidth rows);
with a base (bench/run.sh --base REV: rroce of an older commit as driver
"base" in the same run) also "base" (its median) and "ratio_base"
(rroce/base of the medians)).
Loopback metric names are as before (write_bw_64K_MBps); the two-VM ones start
with "pair:".  The last row has metric "meta": how, when and where it was
measured, "failures" and "machine_idle".
"""
import argparse
import json
import math
import os
import statistics
from collections import defaultdict

DRIVERS = ("rroce", "rxe")
LINK = ("tcp", "udp")  # the same link without RDMA: iperf3 TCP, bench/udp_baseline.c
BASE = "base"  # rroce of an older commit (bench/run.sh --base), when present
BW_OPS = ("write", "read", "send")
LAT_OPS = ("write", "send", "read")
BW_SIZES = ("64B", "4K", "64K", "1M")
MTU9000_BW = (("write", "64K"), ("write", "1M"), ("read", "64K"), ("send", "64K"))  # the *_mtu9000 runs
LAT_SIZES = ("8B", "4K")
SETUPS = ("pair", "loopback")  # the headline first
SETUP_TITLE = {
    "pair": "two VMs joined by virtio-net (QEMU stream netdev), the same path for both",
    "loopback": "loopback, one VM, server and client on one device; UNEQUAL: rroce same-device "
                "shortcut (no ICRC, no IP stack) vs rxe with ICRC through the IP stack",
}
SHORT_TITLE = {"pair": "two VMs (headline)", "loopback": "loopback (unequal: rroce same-device shortcut)"}
CPU_TITLE = "sys+softirq+irq CPU s per GiB"
CPU_SIDES = {"pair": "client+server", "loopback": "both ends in one guest"}
GIB = float(1 << 30)
KEYS = ("MBps", "Mpps", "us_typ", "us_p99", "cpu_s_per_GiB", "cpu_client_s_per_GiB", "cpu_server_s_per_GiB")


def size_bytes(label):
    """'64B' -> 64, '4K' -> 4096, '8M' -> 8 MiB, else None"""
    mult = {"B": 1, "K": 1 << 10, "M": 1 << 20}.get(label[-1:])
    return int(label[:-1]) * mult if mult and label[:-1].isdigit() else None


def numbers(line):
    t = line.split()
    if not t or not t[0].isdigit():
        return None
    try:
        return [float(x) for x in t]
    except ValueError:
        return None


def header(path):
    """the command of a run ("# bench: CMD", its first line), as a list"""
    try:
        with open(path, errors="replace") as f:
            first = f.readline()
    except OSError:
        return None
    return first.split()[2:] if first.startswith("# bench:") else None


def exit_status(path):
    """STATUS of the "# exit: STATUS" line a log ends with (124: timeout)"""
    try:
        last = [l for l in open(path, errors="replace") if l.startswith("# exit:")]
        return int(last[-1].split()[2]) if last else None
    except (OSError, ValueError, IndexError):
        return None


def clock_failed(path):
    """perftest's CPU clock calibration failed: it converts cycles to seconds
    with a frequency it samples against gettimeofday() when it reports, and
    when the samples do not correlate (r^2 < 0.9: the vCPU was descheduled
    while it sampled) the frequency is 0 and so is every rate it prints.
    A failure of the instrument, whatever the driver."""
    try:
        return any(l.startswith("Correlation coefficient r^2") for l in open(path, errors="replace"))
    except OSError:
        return False


def parse_perftest(path):
    """{'size','iters','MBps','Mpps'} of a bw log, {'us_typ','us_p99'} of a lat one"""
    for line in open(path, errors="replace"):
        nums = numbers(line)
        if nums is None:
            continue
        if len(nums) in (5, 6):  # bw (6 with --cpu_util)
            size, iters, mbps, mpps = nums[0], nums[1], nums[3], nums[4]
            # MB/s has 2 decimals, Mpps 6: below 10 KiB messages the rate
            # from Mpps is the more precise (perftest computes both from the
            # same count: MB/s = Mpps * 1e6 * size / 2^20)
            if size >= 10240:  # Mpps of big messages is 0.00000x: no rate
                return {"size": size, "iters": iters, "MBps": mbps}
            if mpps > 0:
                mbps = mpps * 1e6 * size / (1 << 20)
            return {"size": size, "iters": iters, "MBps": mbps, "Mpps": mpps}
        if len(nums) == 9:  # t_typical is the median (p50)
            return {"us_typ": nums[4], "us_p99": nums[7]}
    return {}


def parse_iperf3(path):
    """{'MBps', 'bytes'}: bytes moved in the whole run (-O seconds too)"""
    try:
        text = "".join(l for l in open(path, errors="replace") if not l.startswith("# "))
        j = json.loads(text)
        s = j["end"]["sum_received"]
        t = j["start"]["test_start"]
        bps, secs, omit = s["bits_per_second"], s["seconds"], t.get("omit", 0)
        moved = s["bytes"] * (secs + omit) / secs if secs else 0
    except (ValueError, KeyError, TypeError):
        return {}
    return {"MBps": bps / 8 / (1 << 20), "bytes": moved}


def parse_udp(path):
    """{'MBps', 'bytes'} of udp_baseline's flood report: what the sink
    received, over the time from its first to its last data datagram;
    {'us_typ', 'us_p99'} of its ping-pong report: half the round trip's p50
    and p99, as ib_write_lat reports"""
    try:
        for line in open(path, errors="replace"):
            t = line.split()
            if len(t) == 13 and t[0] == "udp_baseline:" and t[1] == "len":
                kv = dict(zip(t[1::2], t[2::2]))
                return {"MBps": float(kv["MiBps"]), "bytes": float(kv["bytes"])}
            if len(t) in (10, 12) and t[0] == "udp_baseline:" and t[1] == "pingpong":
                kv = dict(zip(t[2::2], t[3::2]))
                return {"us_typ": float(kv["rtt_p50_us"]) / 2, "us_p99": float(kv["rtt_p99_us"]) / 2}
    except (OSError, ValueError, KeyError):
        pass
    return {}


def cpu_record(path):
    """{"kern", "user", "wall", "ncpu"[, "idle"[, "link"]]} of a .cpu file
    ("kern_s user_s wall_s ncpu side [idle_s [tx_bytes rx_bytes]]": seconds,
    and "link" the bytes the link NIC sent plus received), None if
    unreadable"""
    try:
        t = open(path).read().split()
        if len(t) not in (5, 6, 8):
            return None
        r = {"kern": float(t[0]), "user": float(t[1]), "wall": float(t[2]), "ncpu": int(t[3])}
        if len(t) >= 6:
            r["idle"] = float(t[5])
        if len(t) == 8:
            r["link"] = float(t[6]) + float(t[7])
        return r
    except (OSError, ValueError):
        return None


def parse_wall(path):
    r = cpu_record(path)
    return r and r["wall"]


# A CPU record is only a measurement if the guest's CPU time adds up: with
# tick-sampled accounting, interrupt and softirq work on an idle CPU whose
# tick is stopped is neither idle nor system time (bench/lib.sh).  With
# interrupt time accounting (CONFIG_IRQ_TIME_ACCOUNTING, and a TSC the
# guest kept as stable), what is still missing is time the host did not run
# a busy vCPU (TCG has no steal clock): no guest work went uncounted then,
# so it is reported, not failed.
UNACCOUNTED_MAX = 0.05


def unaccounted(path):
    """share of a .cpu file's CPU time (wall x ncpu) that is neither
    kernel, user nor idle; None for a record without idle time"""
    r = cpu_record(path)
    if not r or "idle" not in r or r["wall"] * r["ncpu"] <= 0:
        return None
    total = r["wall"] * r["ncpu"]
    return (total - r["kern"] - r["user"] - r["idle"]) / total


def arg(cmd, opt):
    return cmd[cmd.index(opt) + 1] if cmd and opt in cmd[:-1] else None


def moved_bytes(r, cmd, name, duration):
    """bytes a perftest bw run moved, from perftest's counts"""
    fixed = arg(cmd, "-n") is not None if cmd else name.startswith("send_bw_")
    if fixed:
        return r["iters"] * r["size"]
    d = float(arg(cmd, "-D") or duration)
    return r["MBps"] * (1 << 20) * d  # the rate of the -D window, for all of -D


def bad(v):
    return v is None or not math.isfinite(v) or v <= 0


def load(setup, setup_dir, duration, rounds=None, cpu_lost=None):
    """runs[(drv, name)][round] = {metric: value}, failures, wall[drv.name] = [s]

    A failure is {"setup", "driver", "test", "round", "why", "metrics"}.
    rounds: how many rounds there should be (else as many as seen).
    cpu_lost: None if CPU time a guest did not account means lost work (a
    failure of the CPU figure), else a list that gets each unaccounted share
    above UNACCOUNTED_MAX (host steal)."""
    runs, failures, wall = defaultdict(dict), [], defaultdict(list)
    if not os.path.isdir(setup_dir):
        return runs, failures, wall
    seen = set()
    for f in sorted(os.listdir(setup_dir)):
        p = f.split(".")
        if len(p) != 4 or p[3] != "log" or not p[2].isdigit():
            continue
        drv, name, rnd = p[0], p[1], int(p[2])
        seen.add((drv, name, rnd))
        path = os.path.join(setup_dir, f)
        base = os.path.join(setup_dir, f"{drv}.{name}.{rnd}")
        cmd = header(path)
        if drv == "tcp":
            r = parse_iperf3(path)
        elif drv == "udp":
            r = parse_udp(path)
        else:
            # the client's report, SEND too: with a fixed count the sender's
            # (first post to last completion) is sound, the receiver's rate
            # is 0.00 now and then (perftest 4.5) though all arrived
            r = parse_perftest(path)
        w = parse_wall(base + ".cpu")
        if w is not None:
            wall[f"{drv}.{name}"].append(w)

        def fail(why, metrics):
            failures.append({"setup": setup, "driver": drv, "test": name, "round": rnd,
                             "why": why, "metrics": metrics})
        if not r:
            rc = exit_status(path)
            fail("no result" + ("" if rc is None else f" (exit {rc})"), [])
            continue
        good = {k: v for k, v in r.items() if k not in ("size", "iters", "bytes") and not bad(v)}
        if not good:
            if "MBps" in r:  # perftest counted messages but its clock gave no rate
                why = "rate 0" + (f" though {r['iters']:.0f} iterations were counted" if r["iters"] else "")
                if clock_failed(path):
                    why += " (perftest's clock calibration failed: r^2 < 0.9)"
                fail(why, [])
            else:
                fail("latency not finite", [])
            continue
        worse = sorted(k for k in r if k not in good and k not in ("size", "iters", "bytes"))
        if worse:
            fail(", ".join(f"{k} = {r[k]}" for k in worse), worse)
        if "MBps" in good and ("bytes" in r or "iters" in r):
            moved = r["bytes"] if drv in LINK else moved_bytes(r, cmd, name, duration)
            crec, srec = cpu_record(base + ".cpu"), cpu_record(base + ".srv.cpu")
            cli, srv = crec and crec["kern"], srec and srec["kern"]
            # each side's CPU time against the bytes its link NIC moved
            # meanwhile, when both sides counted them
            on_link = crec is not None and "link" in crec and (srec is None or "link" in srec)
            moved_cli = crec["link"] if on_link else moved
            moved_srv = srec["link"] if on_link and srec else moved
            lost = [(side, u) for side, u in (("client", unaccounted(base + ".cpu")),
                                              ("server", unaccounted(base + ".srv.cpu")))
                    if u is not None and u > UNACCOUNTED_MAX]
            if cli is None or (setup == "pair" and srv is None):
                fail("no CPU record", ["cpu_s_per_GiB"])
            elif bad(moved_cli) or bad(moved_srv):
                fail("no byte count", ["cpu_s_per_GiB"])
            elif lost and cpu_lost is None:
                fail("CPU time unaccounted (neither idle, user nor system+irq+softirq): "
                     + ", ".join(f"{side} {u:.0%}" for side, u in lost), ["cpu_s_per_GiB"])
            else:
                if cpu_lost is not None:
                    cpu_lost += [u for _, u in lost]
                per_cli = cli / (moved_cli / GIB)
                per_srv = srv / (moved_srv / GIB) if srv is not None else 0.0
                good["cpu_s_per_GiB"] = per_cli + per_srv
                if srv is not None:
                    good["cpu_client_s_per_GiB"] = per_cli
                    good["cpu_server_s_per_GiB"] = per_srv
        runs[(drv, name)][rnd] = good
    # runs that should be there: every test seen for one RDMA driver for both,
    # the iperf3 and udp_baseline ones for tcp and udp, in every round
    n = rounds or max([r for _, _, r in seen], default=0)
    names = {"rdma": sorted({nm for d, nm, _ in seen if d not in LINK})}
    names.update({k: sorted({nm for d, nm, _ in seen if d == k}) for k in LINK})
    with_base = (BASE,) if any(d == BASE for d, _, _ in seen) else ()
    for drv in DRIVERS + with_base + LINK:
        for name in names[drv if drv in LINK else "rdma"]:
            for rnd in range(1, n + 1):
                if (drv, name, rnd) not in seen:
                    failures.append({"setup": setup, "driver": drv, "test": name, "round": rnd,
                                     "why": "missing (no log)", "metrics": []})
    failures.sort(key=lambda x: (x["driver"], x["test"], x["round"]))
    return runs, failures, wall


def unit_of(metric):
    for suf, unit, better in (("_MBps", "MiB/s", "higher"), ("_Mpps", "Mpps", "higher"),
                              ("_us_typ", "us", "lower"), ("_us_p99", "us", "lower"),
                              ("_s_per_GiB", "CPU s/GiB", "lower")):
        if metric.endswith(suf):
            return unit, better
    return "", "higher"


def rows_of(setup, runs, failures=()):
    vals = defaultdict(lambda: defaultdict(list))  # metric -> drv -> [values]
    for (drv, name), rounds in runs.items():
        for rnd in sorted(rounds):
            for k, v in rounds[rnd].items():
                if drv in LINK:
                    vals[name.replace(drv + "_", "", 1) + "_" + k][drv].append(v)
                else:
                    vals[name + "_" + k][drv].append(v)
    failed = defaultdict(lambda: defaultdict(list))  # metric -> drv -> [rounds]
    for f in failures:
        if f["driver"] not in DRIVERS + (BASE,) + LINK:
            continue
        name = f["test"].replace(f["driver"] + "_", "", 1) if f["driver"] in LINK else f["test"]
        ms = [name + "_" + k for k in KEYS if name + "_" + k in vals]
        if not ms:  # failed in every round: a row for its main metric
            ms = [name + ("_us_typ" if "lat_" in name else "_MBps")]
            vals[ms[0]][f["driver"]]
        for m in ms:
            k = m[len(name) + 1:]
            if not f["metrics"] or k in f["metrics"] or (k.startswith("cpu_") and "cpu_s_per_GiB" in f["metrics"]):
                failed[m][f["driver"]].append(f["round"])
    rows = []
    for metric in sorted(vals):
        d = vals[metric]
        med = {k: statistics.median(v) for k, v in d.items() if v}
        r, x = med.get("rroce"), med.get("rxe")
        unit, better = unit_of(metric)
        ratio = r / x if r is not None and x else None
        adv = None
        if ratio:
            adv = ratio if better == "higher" else (x / r if r else None)
        row = {"metric": metric if setup == "loopback" else f"{setup}:{metric}",
               "rroce": r, "rxe": x, "n": {k: len(v) for k, v in d.items()},
               "rroce_advantage": adv, "setup": setup, "name": metric,
               "unit": unit, "better": better, "ratio": ratio,
               "min": {k: min(v) for k, v in d.items() if v},
               "max": {k: max(v) for k, v in d.items() if v},
               "values": {k: v for k, v in d.items()},
               "failed": {k: sorted(v) for k, v in failed[metric].items()}}
        for k in LINK:
            if k in med:
                row[k] = med[k]
        if med.get(BASE) is not None:
            row[BASE] = med[BASE]
            row["ratio_base"] = r / med[BASE] if r is not None and med[BASE] else None
        rows.append(row)
    # iperf3 rows "bw_64K_MBps" -> also as "tcp" of the perftest rows
    by = {row["name"]: row for row in rows}
    for row in rows:
        if row["name"].startswith("bw_"):
            for op in BW_OPS:
                o = by.get(op + "_" + row["name"])
                if o is not None and row.get("tcp") is not None:
                    o["tcp"] = row["tcp"]
    return rows


def link_rows(by):
    """[(mtu, kind, size label, metric name without the unit)] of the runs
    without RDMA (iperf3 TCP, the UDP baseline) in BY, MTU 1500 first"""
    out = []
    for n, row in by.items():
        if not n.startswith("bw_") or not n.endswith("_MBps"):
            continue
        name = n[:-5]
        base, _, mtu = name.partition("_mtu")
        for kind in LINK:
            if row["values"].get(kind) or row["failed"].get(kind):
                out.append((int(mtu or 1500), kind, base[3:], name))
    return sorted(out, key=lambda x: (x[0], x[1], size_bytes(x[2]) or 0))


def fmt(v, width=9):
    if v is None:
        return f"{'-':>{width}}"
    a = abs(v)
    if a >= 1000:
        s = f"{v:.0f}"
    elif a >= 100:
        s = f"{v:.1f}"
    elif a >= 1:
        s = f"{v:.2f}"
    elif a >= 0.01:
        s = f"{v:.3f}"
    else:
        s = f"{v:.4f}"
    return f"{s:>{width}}"


def ratio_s(row, width=9):
    r = row.get("ratio") if row else None
    return fmt(r, width) if r is None else f"{r:>{width - 1}.2f}x"


def short(v):
    """3 significant digits (whole numbers from 1000)"""
    return f"{v:.3g}" if 0.001 <= abs(v) < 1000 else fmt(v, 0).strip()


def cell(row, drv):
    """'median (min-max)' of DRV in ROW, 'failed' if no round was good"""
    if not row:
        return "-"
    v = row["values"].get(drv)
    if not v:
        return "failed" if row["failed"].get(drv) else "-"
    med = short(statistics.median(v))
    if len(v) == 1:
        return f"{med} (n=1)"
    return f"{med} ({short(min(v))}-{short(max(v))})"


def spread(row, a, b):
    """how the rounds of A and B in ROW compare: 'overlap' when their
    min-max ranges overlap, else which is better (by the row's direction)"""
    va, vb = row["values"].get(a), row["values"].get(b)
    if not va or not vb:
        return "-"
    if min(va) <= max(vb) and min(vb) <= max(va):
        return "overlap"
    a_higher = min(va) > max(vb)
    return f"{a} better" if a_higher == (row["better"] == "higher") else f"{a} WORSE"


def base_table(rows, meta):
    """the before/after table: rroce (working tree) against base (an older
    commit's rroce) in the same run, every metric both have"""
    t = []
    for row in rows:
        if not row["values"].get(BASE) and not row["failed"].get(BASE):
            continue
        r = row.get("ratio_base")
        t.append([row["name"], cell(row, "rroce"), cell(row, BASE),
                  fmt(r) if r is None else f"{r:>8.2f}x", row["better"], spread(row, "rroce", BASE)])
    if not t:
        return []
    return [(f"before/after, same run: rroce (working tree, git {meta.get('git', '?')}) vs base "
             f"(rroce.ko and provider of {meta.get('base') or '?'})",
             ["metric", "rroce", "base", "rroce/base", "better", "min-max ranges"], t, None)]


def tables(setup, rows, meta):
    """[(title, header, [cells...], note)] of one setup"""
    by = {row["name"]: row for row in rows}
    g = lambda n: by.get(n)
    out = base_table(rows, meta)
    t = []
    for op in BW_OPS:
        for s in BW_SIZES:
            bw = g(f"{op}_bw_{s}_MBps")
            if bw:
                tcp = short(bw["tcp"]) if bw.get("tcp") else "-"
                t.append([f"ib_{op}_bw {s}", cell(bw, "rroce"), cell(bw, "rxe"), ratio_s(bw), tcp])
    bw = g("write_bw_64K_bidir_MBps")
    if bw:
        t.append(["ib_write_bw -b 64K (sum of both ways)", cell(bw, "rroce"), cell(bw, "rxe"), ratio_s(bw),
                  "-"])
    if t:
        out.append(("bandwidth, MiB/s (higher is better)", ["metric", "rroce", "rxe", "rroce/rxe", "TCP"], t,
                    None))
    # the write sweep: every write_bw_SIZE
    sweep = sorted((size_bytes(n[9:-5]), n[9:-5]) for n in by
                   if n.startswith("write_bw_") and n.endswith("_MBps") and size_bytes(n[9:-5]))
    if any(s not in BW_SIZES for _, s in sweep):
        t = []
        for _, s in sweep:
            bw, cpu = g(f"write_bw_{s}_MBps"), g(f"write_bw_{s}_cpu_s_per_GiB")
            t.append([f"ib_write_bw {s}", cell(bw, "rroce"), cell(bw, "rxe"), ratio_s(bw),
                      fmt(cpu and cpu["rroce"]), fmt(cpu and cpu["rxe"]), ratio_s(cpu)])
        out.append(("ib_write_bw vs message size, MiB/s (higher is better), and its CPU cost (medians)",
                    ["metric", "rroce", "rxe", "rroce/rxe", "CPU rroce", "CPU rxe", "rroce/rxe"], t,
                    f"{CPU_TITLE}, {CPU_SIDES.get(setup)}"))
    t = []
    for label, n in [("ib_write_bw 64B", "write_bw_64B"), ("ib_write_bw 64B -l 16", "write_bw_64B_l16"),
                     ("ib_write_bw 64B -q 4", "write_bw_64B_q4"), ("ib_read_bw 64B", "read_bw_64B"),
                     ("ib_send_bw 64B", "send_bw_64B")]:
        m = g(f"{n}_Mpps")
        if m:
            t.append([label, cell(m, "rroce"), cell(m, "rxe"), ratio_s(m)])
    if t:
        out.append(("message rate at 64 B, Mpps (higher is better)", ["metric", "rroce", "rxe", "rroce/rxe"], t,
                    None))
    t = []
    for op in BW_OPS:
        for s in BW_SIZES:
            c = g(f"{op}_bw_{s}_cpu_s_per_GiB")
            if not c:
                continue
            r = [f"ib_{op}_bw {s}", cell(c, "rroce"), cell(c, "rxe"), ratio_s(c)]
            if setup == "pair":
                for drv in DRIVERS:
                    a, b = g(f"{op}_bw_{s}_cpu_client_s_per_GiB"), g(f"{op}_bw_{s}_cpu_server_s_per_GiB")
                    r.append(" / ".join(short(x[drv]) if x and x.get(drv) is not None else "-" for x in (a, b)))
            t.append(r)
    if t:
        hdr = ["metric", "rroce", "rxe", "rroce/rxe"]
        if setup == "pair":
            hdr += ["rroce cli / srv", "rxe cli / srv"]
        out.append((f"{CPU_TITLE} moved (lower is better)", hdr, t, CPU_SIDES.get(setup)))
    t = []
    for op in ("read", "send"):
        ev, poll = g(f"{op}_bw_64K_events_MBps"), g(f"{op}_bw_64K_MBps")
        cpu = g(f"{op}_bw_64K_events_cpu_s_per_GiB")
        if ev:
            t.append([f"ib_{op}_bw 64K -e", cell(ev, "rroce"), cell(ev, "rxe"), ratio_s(ev), ratio_s(poll),
                      ratio_s(cpu)])
    if t:
        # (with one vCPU a busy-polling perftest shares the CPU with a
        # driver's kworkers, not with its softirq work)
        out.append(("perftest waiting on completion events (-e), not busy-polling its CQ: "
                    "bandwidth, MiB/s (higher is better)",
                    ["metric", "rroce", "rxe", "rroce/rxe", "rroce/rxe polling", "CPU rroce/rxe"], t, None))
    t = []
    for op, s in MTU9000_BW:
        bw, cpu, at1500 = g(f"{op}_bw_{s}_mtu9000_MBps"), g(f"{op}_bw_{s}_mtu9000_cpu_s_per_GiB"), \
            g(f"{op}_bw_{s}_MBps")
        if bw:
            tcp = short(bw["tcp"]) if bw.get("tcp") else "-"
            t.append([f"ib_{op}_bw {s}", cell(bw, "rroce"), cell(bw, "rxe"), ratio_s(bw), tcp,
                      ratio_s(at1500), ratio_s(cpu)])
    if t:
        out.append(("MTU 9000 (RoCE MTU 4096): bandwidth, MiB/s (higher is better)",
                    ["metric", "rroce", "rxe", "rroce/rxe", "TCP", "rroce/rxe at 1500", "CPU rroce/rxe"], t,
                    f"{CPU_TITLE}, {CPU_SIDES.get(setup)}"))
    t = []
    for mtu, kind, size, name in link_rows(by):
        bw, cpu = g(f"{name}_MBps"), g(f"{name}_cpu_s_per_GiB")
        what = f"iperf3 TCP -l {size}" if kind == "tcp" else f"UDP, {size_bytes(size)}-byte datagrams"
        t.append([f"{what}, MTU {mtu}", cell(bw, kind), cell(cpu, kind)])
    if t:
        out.append(("the same link without RDMA: TCP (iperf3, one stream) and the UDP baseline "
                    "(udp_baseline: a RoCE packet's size, sendmmsg/recvmmsg, what the receiver took)",
                    ["metric", "MiB/s", CPU_TITLE], t, CPU_SIDES.get(setup)))
    t = []
    udp = g("lat_40B_us_typ")
    for op in LAT_OPS:
        for s in LAT_SIZES:
            a, b = g(f"{op}_lat_{s}_us_typ"), g(f"{op}_lat_{s}_us_p99")
            if not a:
                continue
            r = [f"ib_{op}_lat {s}", cell(a, "rroce"), cell(a, "rxe"), ratio_s(a),
                 cell(b, "rroce"), cell(b, "rxe"), ratio_s(b)]
            if udp:
                r.append(udp_latency(udp, op))
            t.append(r)
    if t:
        hdr = ["metric", "p50 rroce", "p50 rxe", "rroce/rxe", "p99 rroce", "p99 rxe", "rroce/rxe"]
        if udp:
            hdr.append("UDP p50")
        out.append(("latency, us (lower is better): p50 (perftest's t_typical) and p99"
                    + ("; UDP: udp_baseline's 40 B ping-pong on the same link, half its round trip for "
                       "write and send (as ib_write_lat reports), the whole round trip for read" if udp else ""),
                    hdr, t, None))
    return out


def udp_latency(row, op):
    """the UDP ping-pong's p50 comparable to ib_OP_lat: ib_read_lat reports
    a round trip, ib_write_lat and ib_send_lat half of one"""
    v = row["values"].get("udp")
    if not v:
        return "failed" if row["failed"].get("udp") else "-"
    return short(statistics.median(v) * (2 if op == "read" else 1))


def setup_line(setup, meta):
    # "rounds" (per setup) when a run was cut short, else "repeats"
    rep = meta.get("rounds", {}).get(setup, meta.get("repeats", "?"))
    cpus = meta.get("vcpus", {}).get(setup, "?")
    each = " each" if setup == "pair" else "s"
    return f"{SETUP_TITLE.get(setup, setup)}; {cpus} vCPU{each}; median (min-max) of {rep} rounds"


def machine_notes(meta):
    """[] if the host looked idle (no other QEMU, little other CPU load), else what was seen"""
    notes = []
    for when in ("start", "end"):
        h = meta.get(f"host_{when}") or {}
        if h.get("other_qemu"):
            notes.append(f"{len(h['other_qemu'])} other QEMU process(es) at the {when}")
        if h.get("other_cpu_pct", 0) >= 25:
            busy = ", ".join(h.get("busy", [])[:3])
            notes.append(f"other processes used {h['other_cpu_pct']:.0f}% of a CPU at the {when}"
                         + (f" ({busy})" if busy else ""))
    if meta.get("other_qemu_max", 0) > 0:
        notes.append(f"up to {meta['other_qemu_max']} other QEMU process(es) during the run"
                     f" (mean {meta.get('other_qemu_mean', '?')})")
    if meta.get("other_cpu_pct_max", 0) >= 50 or meta.get("other_cpu_pct_mean", 0) >= 10:
        notes.append(f"other processes used up to {meta['other_cpu_pct_max']:.0f}% of a CPU during the run"
                     f" (mean {meta.get('other_cpu_pct_mean', 0):.0f}%)")
    return notes


def failure_line(f):
    what = f" ({', '.join(f['metrics'])})" if f["metrics"] and "=" not in f["why"] else ""
    return f"{f['setup']}: {f['driver']} {f['test']} round {f['round']}: {f['why']}{what}"


def summary_lines(meta, failures):
    lines = []
    m = meta.get("mode")
    if m:
        lines.append(f"rroce vs rdma_rxe, {meta.get('date', '')}, {m} mode, git {meta.get('git', '?')}, "
                     f"{meta.get('seconds', {}).get('total', '?')} s"
                     + (f", only the tests matching {meta['only']}" if meta.get("only") else ""))
    notes = machine_notes(meta)
    lines.append("machine NOT IDLE: " + "; ".join(notes) if notes else
                 "machine idle (no other QEMU, no other load seen)")
    u = meta.get("cpu_unaccounted")
    if u:
        lines.append(f"CPU samples with more than {UNACCOUNTED_MAX:.0%} of a guest's time unaccounted: "
                     f"{u['runs_over']} (median {u['median']:.0%}, max {u['max']:.0%}); with IRQ time "
                     "accounting that is time the host did not run a busy vCPU (TCG has no steal clock), "
                     "not guest work, so the CPU figures stand")
    lines.append(f"failures: {len(failures)} (left out of the medians)")
    lines += ["  " + failure_line(f) for f in failures]
    return lines


# hw_counters that say a run was not clean: loss and its repair, drops,
# copies on receive (rroce's names, then rdma_rxe's)
HEALTH = ("retransmits", "ack_timeouts", "seq_naks_rcvd", "rnr_naks_rcvd", "out_of_sequence",
          "duplicate_requests", "rx_dropped", "rx_icrc_errors", "tx_errors", "window_cuts", "rx_linearized",
          "rcvd_seq_err", "out_of_seq_request", "duplicate_request", "rcvd_rnr_err", "send_rnr_err",
          "retry_exceeded_err", "retry_rnr_exceeded_err", "completer_retry_err", "send_err")


def health(setup_dir):
    """{driver: {counter: total}} over the DRV.NAME.ROUND.SIDE.hwc files of
    setup_dir (each run's hw_counters deltas on one side, bench/pair.sh),
    the packets received and the HEALTH counters, zeros included."""
    out = {}
    if not os.path.isdir(setup_dir):
        return out
    for f in sorted(os.listdir(setup_dir)):
        p = f.split(".")
        if len(p) != 5 or p[4] != "hwc":
            continue
        tot = out.setdefault(p[0], {"packets": 0, **{k: 0 for k in HEALTH}})
        for line in open(os.path.join(setup_dir, f)):
            w = line.split()
            if len(w) != 2 or not w[1].lstrip("-").isdigit():
                continue
            if w[0] in ("rx_packets", "rcvd_pkts"):
                tot["packets"] += int(w[1])
            elif w[0] in HEALTH:
                tot[w[0]] += int(w[1])
    return out


def health_lines(h):
    """One line per driver: packets received, then the counters that moved
    (of those the driver has), or "clean"."""
    lines = []
    for drv, tot in sorted(h.items()):
        moved = [f"{k} {v:,}" for k, v in tot.items() if k != "packets" and v]
        lines.append(f"  {drv}: {tot['packets']:,} packets received; " + (", ".join(moved) if moved else
                     "no retransmission or drop counted"))
    return lines


def print_terminal(all_tables, meta, failures, healths=()):
    print("\n".join(summary_lines(meta, failures)))
    for setup, h in healths:
        if h:
            print(f"hw_counters over all runs ({setup}, both sides):")
            print("\n".join(health_lines(h)))
    for setup, tabs in all_tables:
        print(f"\n== {setup_line(setup, meta)} ==")
        for title, hdr, t, note in tabs:
            print(f"-- {title}" + (f"; CPU = {note}" if note else ""))
            w = [max(len(str(r[i])) for r in [hdr] + t) for i in range(len(hdr))]
            print(f"{hdr[0]:<{w[0]}}  " + "  ".join(f"{h:>{w[i + 1]}}" for i, h in enumerate(hdr[1:])))
            for r in t:
                print(f"{r[0]:<{w[0]}}  " + "  ".join(f"{c.strip():>{w[i + 1]}}" for i, c in enumerate(r[1:])))


def markdown(all_tables, meta, failures):
    lines = [l if not l.startswith("  ") else "- " + l.strip() for l in summary_lines(meta, failures)]
    lines.append("")
    for setup, tabs in all_tables:
        lines.append(f"**{setup_line(setup, meta)}**\n")
        for title, hdr, t, note in tabs:
            lines.append(f"*{title}" + (f"; CPU = {note}" if note else "") + "*\n")
            lines.append("| " + " | ".join(hdr) + " |")
            lines.append("|" + "---|" * len(hdr))
            for r in t:
                lines.append("| " + " | ".join([f"`{r[0]}`"] + [c.strip() for c in r[1:]]) + " |")
            lines.append("")
    return "\n".join(lines)


def plot(png, setups_rows, meta):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = [(s, rows) for s, rows in setups_rows if rows]
    if not cols:
        return
    fig, axes = plt.subplots(2, len(cols), figsize=(7.5 * len(cols), 10), squeeze=False)
    color = {"rroce": "tab:red", "rxe": "tab:blue", "tcp": "black"}
    marker = {"write": "o", "read": "s", "send": "^"}
    style = {"write": "-", "read": "--", "send": ":"}
    for c, (setup, rows) in enumerate(cols):
        by = {row["name"]: row for row in rows}
        ax = axes[0][c]
        ticks = set()
        for drv in DRIVERS:
            for op in BW_OPS:
                pts = sorted((size_bytes(n[len(op) + 4:-5]), by[n][drv]) for n in by
                             if n.startswith(f"{op}_bw_") and n.endswith("_MBps")
                             and size_bytes(n[len(op) + 4:-5]) and by[n][drv])
                ticks.update(x for x, _ in pts)
                if pts:
                    ax.plot(*zip(*pts), style[op], marker=marker[op], color=color[drv],
                            label=f"{drv} {op}", linewidth=2 if drv == "rroce" else 1.3,
                            markersize=7)
        pts = [(size_bytes(s), by[f"bw_{s}_MBps"]["values"]) for s in BW_SIZES if by.get(f"bw_{s}_MBps")]
        pts = [(x, statistics.median(v["tcp"])) for x, v in pts if v.get("tcp")]
        if pts:
            ax.plot(*zip(*pts), "-.", marker="x", color=color["tcp"], label="TCP (iperf3 -l size)")
        # the MTU 9000 runs: hollow markers, no lines
        for drv, op in [(d, o) for d in DRIVERS for o in BW_OPS] + [("tcp", "")]:
            pre = f"{op}_bw_" if op else "bw_"
            pts = sorted((size_bytes(s), by[f"{pre}{s}_mtu9000_MBps"].get(drv)) for s in BW_SIZES
                         if by.get(f"{pre}{s}_mtu9000_MBps") and by[f"{pre}{s}_mtu9000_MBps"].get(drv))
            if pts:
                ax.plot(*zip(*pts), linestyle="none", marker="x" if drv == "tcp" else marker[op], markersize=11,
                        fillstyle="none", markeredgewidth=1.6, color=color[drv],
                        label=f"{drv} {op + ' ' if op else ''}at MTU 9000")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ticks = sorted(ticks)
        lab = lambda b: f"{b >> 20}M" if b >= 1 << 20 else f"{b >> 10}K" if b >= 1024 else f"{b}B"
        ax.set_xticks(ticks, [lab(b) for b in ticks], fontsize=7 if len(ticks) > 8 else 9)
        ax.set_xlabel("message size")
        ax.set_ylabel("MiB/s (median)")
        ax.set_title(f"bandwidth — {SHORT_TITLE.get(setup, setup)}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, ncol=2)

        ax = axes[1][c]
        cats = [(op, s) for op in LAT_OPS for s in LAT_SIZES if by.get(f"{op}_lat_{s}_us_typ")]
        w = 0.38
        for i, drv in enumerate(DRIVERS):
            xs, typ, up = [], [], []
            for j, (op, s) in enumerate(cats):
                t = by[f"{op}_lat_{s}_us_typ"][drv]
                p = by.get(f"{op}_lat_{s}_us_p99", {}).get(drv)
                if t is None:
                    continue
                xs.append(j + (i - 0.5) * w)
                typ.append(t)
                up.append(max(0.0, (p or t) - t))
            if xs:
                ax.bar(xs, typ, w, color=color[drv], alpha=0.8, label=f"{drv} p50")
                ax.errorbar(xs, typ, yerr=[[0] * len(up), up], fmt="none", ecolor="black",
                            capsize=4, linewidth=1)
                for x, t in zip(xs, typ):
                    ax.annotate(fmt(t, 0).strip(), (x, t), textcoords="offset points",
                                xytext=(0, -12), ha="center", fontsize=7, color="white")
        ax.set_xticks(range(len(cats)), [f"{op} {s}" for op, s in cats])
        ax.set_yscale("log")
        ax.set_ylabel("µs (bar: p50, whisker: p99)")
        ax.set_title(f"latency — {SHORT_TITLE.get(setup, setup)}", fontsize=10)
        ax.grid(True, axis="y", which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    idle = "" if not machine_notes(meta) else ", machine NOT idle"
    fig.suptitle(f"rroce vs rdma_rxe (perftest), {meta.get('date', '')}, {meta.get('mode', '')} mode{idle}\n"
                 "2-core TCG emulator (no KVM): absolute numbers are low, compare the ratios",
                 fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(png, dpi=110)


def report(logdir, meta):
    """(setups_rows, failures, wall) of LOGDIR"""
    duration = meta.get("perftest_duration_s", 3)
    if any(os.path.isdir(os.path.join(logdir, s)) for s in SETUPS):
        dirs = [(s, os.path.join(logdir, s)) for s in SETUPS]
    else:
        dirs = [("loopback", logdir)]
    setups_rows, failures, wall = [], [], {}
    steal = []
    for s, d in dirs:
        n = meta.get("rounds", {}).get(s, meta.get("repeats"))
        if s in meta.get("setups", []) and not os.path.isdir(d):
            failures.append({"setup": s, "driver": "-", "test": "-", "round": "-",
                             "why": "no results at all", "metrics": []})
        # the guests' softirq time is measured only with IRQ time accounting
        # in the kernel, which an unstable TSC turns off
        unstable = os.path.exists(os.path.join(d, "tsc-unstable"))
        exact = meta.get("irq_time_accounting") is True and not unstable
        if unstable:
            failures.append({"setup": s, "driver": "-", "test": "-", "round": "-",
                             "why": "a guest marked its TSC unstable (IRQ time accounting off)",
                             "metrics": []})
        lost = [] if exact else None
        runs, fails, w = load(s, d, duration, n, lost)
        steal += lost or []
        setups_rows.append((s, rows_of(s, runs, fails)))
        failures += fails
        if w:
            wall[s] = {k: round(statistics.median(v), 1) for k, v in sorted(w.items())}
    if steal:
        meta["cpu_unaccounted"] = {"runs_over": len(steal), "max": round(max(steal), 3),
                                   "median": round(statistics.median(steal), 3)}
    return setups_rows, failures, wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("logdir")
    ap.add_argument("out_json")
    ap.add_argument("--png")
    ap.add_argument("--markdown")
    a = ap.parse_args()
    meta = {}
    mp = os.path.join(a.logdir, "meta.json")
    if os.path.exists(mp):
        meta = json.load(open(mp))
    setups_rows, failures, wall = report(a.logdir, meta)
    all_tables = [(s, tables(s, rows, meta)) for s, rows in setups_rows if rows]
    healths = [(s, health(os.path.join(a.logdir, s))) for s in ("pair", "loopback")]
    print_terminal(all_tables, meta, failures, healths)
    rows = [r for _, rs in setups_rows for r in rs]
    rows.append({"metric": "meta", "rroce": None, "rxe": None, "n": {}, "rroce_advantage": None,
                 "meta": meta, "failures": failures, "failure_count": len(failures),
                 "machine_idle": not machine_notes(meta), "machine_notes": machine_notes(meta),
                 "cpu": CPU_TITLE + " moved: system+softirq+irq time of the guest(s) around each run, "
                        "two VMs: each side's against the bytes its link NIC sent and received meanwhile",
                 "wall_s_median": wall, "hw_counters": {s: h for s, h in healths if h}})
    json.dump(rows, open(a.out_json, "w"), indent=1)
    print(f"\nwrote {a.out_json}")
    if a.markdown:
        open(a.markdown, "w").write(markdown(all_tables, meta, failures))
        print(f"wrote {a.markdown}")
    if a.png:
        plot(a.png, setups_rows, meta)
        print(f"wrote {a.png}")


if __name__ == "__main__":
    main()
