#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Summarise the logs of bench/in-vm.sh (loopback) and bench/pair.sh (two VMs):
medians per setup, driver and metric, the rroce/rxe ratio, terminal tables, a
JSON file and (with --png) a plot.

    report.py LOGDIR OUT.json [--png OUT.png] [--markdown OUT.md]

LOGDIR holds loopback/ and pair/ (each DRV.NAME.ROUND.log and .cpu files,
pair/ also .srv.cpu) and meta.json, or, as before, loopback logs directly.

OUT.json is a list of rows, one per metric, as before ("metric", "rroce",
"rxe", "n", "rroce_advantage"), with more fields: "setup", "unit",
"better" ("higher" or "lower"), "ratio" (rroce/rxe, plain), "tcp" (iperf3
on the same link, bandwidth rows), "values" (all rounds).  Loopback metric
names are unchanged (write_bw_64K_MBps); the two-VM ones start with "pair:".
The last row has metric "meta": how, when and where it was measured.
"""
import argparse
import json
import os
import statistics
from collections import defaultdict

DRIVERS = ("rroce", "rxe")
BW_OPS = ("write", "read", "send")
LAT_OPS = ("write", "send", "read")
BW_SIZES = ("64B", "4K", "64K", "1M")
LAT_SIZES = ("8B", "4K")
SIZE_BYTES = {"8B": 8, "64B": 64, "4K": 4096, "64K": 65536, "1M": 1 << 20}
SETUP_TITLE = {
    "loopback": "loopback: one VM, server and client on one device",
    "pair": "two VMs joined by virtio-net (QEMU socket netdev)",
}


def numbers(line):
    t = line.split()
    if not t or not t[0].isdigit():
        return None
    try:
        return [float(x) for x in t]
    except ValueError:
        return None


def parse_perftest(path):
    """{'MBps','Mpps'} of a bw client log or {'us_typ','us_p99'} of a lat one."""
    for line in open(path, errors="replace"):
        nums = numbers(line)
        if nums is None:
            continue
        if len(nums) in (5, 6):  # bw (6 with --cpu_util)
            return {"MBps": nums[3], "Mpps": nums[4]}
        if len(nums) == 9:
            return {"us_typ": nums[4], "us_p99": nums[7]}
    return {}


def parse_iperf3(path):
    try:
        j = json.load(open(path, errors="replace"))
        bps = j["end"]["sum_received"]["bits_per_second"]
    except (ValueError, KeyError, TypeError):
        return {}
    return {"MBps": bps / 8 / (1 << 20)}


def parse_cpu(path):
    try:
        t = open(path).read().split()
        return float(t[0])
    except (OSError, ValueError, IndexError):
        return None


def load(setup_dir, duration):
    """runs[(drv, name)][round] = {metric: value}"""
    runs = defaultdict(dict)
    if not os.path.isdir(setup_dir):
        return runs
    files = sorted(os.listdir(setup_dir))
    for f in files:
        p = f.split(".")
        if len(p) != 4 or p[3] != "log":
            continue
        drv, name, rnd = p[0], p[1], p[2]
        path = os.path.join(setup_dir, f)
        r = parse_iperf3(path) if drv == "tcp" else parse_perftest(path)
        base = os.path.join(setup_dir, f"{drv}.{name}.{rnd}")
        if name.startswith("send_bw_") and os.path.exists(base + ".srv.log"):
            # SEND: what the receiver (the server) got; the sender's -D
            # report of rdma_rxe is often 0 (its sample window never closes)
            r = parse_perftest(base + ".srv.log") or r
        if not r:
            continue
        cli, srv = parse_cpu(base + ".cpu"), parse_cpu(base + ".srv.cpu")
        if "MBps" in r and r["MBps"] > 0:
            # data moved during the whole run (the margins too): rate x -D
            gib = r["MBps"] * duration / 1024
            if cli is not None:
                both = cli + (srv or 0.0)
                r["cpu_s_per_GiB"] = both / gib
                if srv is not None:
                    r["cpu_client_s_per_GiB"] = cli / gib
                    r["cpu_server_s_per_GiB"] = srv / gib
        runs[(drv, name)][rnd] = r
    return runs


def unit_of(metric):
    for suf, unit, better in (("_MBps", "MiB/s", "higher"), ("_Mpps", "Mpps", "higher"),
                              ("_us_typ", "us", "lower"), ("_us_p99", "us", "lower"),
                              ("_s_per_GiB", "CPU s/GiB", "lower")):
        if metric.endswith(suf):
            return unit, better
    return "", "higher"


def rows_of(setup, runs):
    vals = defaultdict(lambda: defaultdict(list))  # metric -> drv -> [values]
    for (drv, name), rounds in runs.items():
        for rnd in sorted(rounds, key=lambda x: int(x) if x.isdigit() else 0):
            for k, v in rounds[rnd].items():
                if drv == "tcp":
                    vals[name.replace("tcp_", "", 1) + "_" + k]["tcp"].append(v)
                else:
                    vals[name + "_" + k][drv].append(v)
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
               "values": {k: v for k, v in d.items()}}
        if "tcp" in med:
            row["tcp"] = med["tcp"]
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


def tables(setup, rows, meta):
    """[(title, header, [cells...])] of one setup"""
    by = {row["name"]: row for row in rows}
    g = lambda n: by.get(n)
    out = []
    cpu_hdr = "CPU s/GiB " + ("client+server" if setup == "pair" else "both ends")
    t = []
    for op in BW_OPS:
        for s in BW_SIZES:
            bw, cpu = g(f"{op}_bw_{s}_MBps"), g(f"{op}_bw_{s}_cpu_s_per_GiB")
            if not bw:
                continue
            t.append([f"ib_{op}_bw {s}", fmt(bw["rroce"]), fmt(bw["rxe"]), ratio_s(bw),
                      fmt(bw.get("tcp")), fmt(cpu and cpu["rroce"]), fmt(cpu and cpu["rxe"]),
                      ratio_s(cpu)])
    if t:
        out.append(("bandwidth, MiB/s (higher is better); CPU time per GiB moved (lower is better)",
                    ["metric", "rroce", "rxe", "rroce/rxe", "TCP", "CPU rroce", "CPU rxe",
                     "rroce/rxe"], t, cpu_hdr))
    t = []
    for s in BW_SIZES:
        bw, cpu = g(f"bw_{s}_MBps"), g(f"bw_{s}_cpu_s_per_GiB")
        if bw and bw.get("tcp") is not None:
            t.append([f"iperf3 -l {s}", fmt(bw["tcp"]), fmt(cpu and cpu.get("tcp"))])
    if t:
        out.append(("TCP on the same link (iperf3, one stream)", ["metric", "MiB/s", "CPU s/GiB"], t,
                    cpu_hdr))
    t = []
    for op in BW_OPS:
        m = g(f"{op}_bw_64B_Mpps")
        if m:
            t.append([f"ib_{op}_bw 64B", fmt(m["rroce"]), fmt(m["rxe"]), ratio_s(m)])
    if t:
        out.append(("message rate at 64 B, Mpps (higher is better)",
                    ["metric", "rroce", "rxe", "rroce/rxe"], t, None))
    t = []
    for op in LAT_OPS:
        for s in LAT_SIZES:
            a, b = g(f"{op}_lat_{s}_us_typ"), g(f"{op}_lat_{s}_us_p99")
            if not a:
                continue
            t.append([f"ib_{op}_lat {s}", fmt(a["rroce"]), fmt(a["rxe"]), ratio_s(a),
                      fmt(b and b["rroce"]), fmt(b and b["rxe"]), ratio_s(b)])
    if t:
        out.append(("latency, us (lower is better): typical (median) and 99th percentile",
                    ["metric", "typ rroce", "typ rxe", "rroce/rxe", "p99 rroce", "p99 rxe",
                     "rroce/rxe"], t, None))
    return out


def setup_line(setup, meta):
    # "rounds" (per setup) when a run was cut short, else "repeats"
    rep = meta.get("rounds", {}).get(setup, meta.get("repeats", "?"))
    cpus = meta.get("vcpus", {}).get(setup, "?")
    if setup == "pair":
        return f"{SETUP_TITLE[setup]}, {cpus} vCPU each, medians of {rep} rounds"
    return f"{SETUP_TITLE.get(setup, setup)}, {cpus} vCPUs, medians of {rep} rounds"


def print_terminal(all_tables, meta):
    for setup, tabs in all_tables:
        print(f"\n== {setup_line(setup, meta)} ==")
        for title, hdr, t, note in tabs:
            print(f"-- {title}" + (f"; CPU = {note}" if note else ""))
            w0 = max(len(hdr[0]), max(len(r[0]) for r in t))
            print(f"{hdr[0]:<{w0}} " + " ".join(f"{h:>10}" for h in hdr[1:]))
            for r in t:
                print(f"{r[0]:<{w0}} " + " ".join(f"{c.strip():>10}" for c in r[1:]))


def markdown(all_tables, meta):
    lines = []
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
        for drv in DRIVERS:
            for op in BW_OPS:
                pts = [(SIZE_BYTES[s], by[f"{op}_bw_{s}_MBps"][drv]) for s in BW_SIZES
                       if by.get(f"{op}_bw_{s}_MBps") and by[f"{op}_bw_{s}_MBps"][drv]]
                if pts:
                    ax.plot(*zip(*pts), style[op], marker=marker[op], color=color[drv],
                            label=f"{drv} {op}", linewidth=2 if drv == "rroce" else 1.3,
                            markersize=7)
        pts = [(SIZE_BYTES[s], by[f"bw_{s}_MBps"]["values"]) for s in BW_SIZES if by.get(f"bw_{s}_MBps")]
        pts = [(x, statistics.median(v["tcp"])) for x, v in pts if v.get("tcp")]
        if pts:
            ax.plot(*zip(*pts), "-.", marker="x", color=color["tcp"], label="TCP (iperf3 -l size)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks([SIZE_BYTES[s] for s in BW_SIZES], BW_SIZES)
        ax.set_xlabel("message size")
        ax.set_ylabel("MiB/s (median)")
        ax.set_title(f"bandwidth — {SETUP_TITLE.get(setup, setup)}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
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
                ax.bar(xs, typ, w, color=color[drv], alpha=0.8, label=f"{drv} typical")
                ax.errorbar(xs, typ, yerr=[[0] * len(up), up], fmt="none", ecolor="black",
                            capsize=4, linewidth=1)
                for x, t in zip(xs, typ):
                    ax.annotate(fmt(t, 0).strip(), (x, t), textcoords="offset points",
                                xytext=(0, -12), ha="center", fontsize=7, color="white")
        ax.set_xticks(range(len(cats)), [f"{op} {s}" for op, s in cats])
        ax.set_yscale("log")
        ax.set_ylabel("µs (bar: typical, whisker: p99)")
        ax.set_title(f"latency — {SETUP_TITLE.get(setup, setup)}", fontsize=10)
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"rroce vs rdma_rxe (perftest), {meta.get('date', '')}, {meta.get('mode', '')} mode\n"
                 "2-core TCG emulator (no KVM): absolute numbers are low, compare the ratios",
                 fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(png, dpi=110)


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
    duration = meta.get("perftest_duration_s", 3)
    if os.path.isdir(os.path.join(a.logdir, "loopback")) or os.path.isdir(os.path.join(a.logdir, "pair")):
        dirs = [(s, os.path.join(a.logdir, s)) for s in ("loopback", "pair")]
    else:
        dirs = [("loopback", a.logdir)]
    setups_rows = [(s, rows_of(s, load(d, duration))) for s, d in dirs]
    all_tables = [(s, tables(s, rows, meta)) for s, rows in setups_rows if rows]
    print_terminal(all_tables, meta)
    rows = [r for _, rs in setups_rows for r in rs]
    rows.append({"metric": "meta", "rroce": None, "rxe": None, "n": {}, "rroce_advantage": None,
                 "meta": meta})
    json.dump(rows, open(a.out_json, "w"), indent=1)
    print(f"\nwrote {a.out_json}")
    if a.markdown:
        open(a.markdown, "w").write(markdown(all_tables, meta))
        print(f"wrote {a.markdown}")
    if a.png:
        plot(a.png, setups_rows, meta)
        print(f"wrote {a.png}")


if __name__ == "__main__":
    main()
