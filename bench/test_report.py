#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Host-side self test of bench/report.py on made-up logs (no VM needed):

    python3 bench/test_report.py        (or python3 -m pytest bench/test_report.py)

A rate of 0.00 is a failure, listed, and not in the median; SEND's bytes come
from perftest's counts (#iterations x #bytes), not MB/s x -D; a missing log
is a failure; CPU is the system+softirq+irq field of the .cpu files, and a
record whose fields do not add up to its wall time is a failure.
"""
import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402

BW_HDR = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
LAT_HDR = (" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
           "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n")
META = {"date": "2099-01-01", "mode": "full", "setups": ["pair", "loopback"], "repeats": 3,
        "perftest_duration_s": 5, "perftest_margin_s": 1, "vcpus": {"loopback": 2, "pair": 1},
        "seconds": {"total": 1}, "git": "test", "other_qemu_max": 0, "other_qemu_mean": 0,
        "other_cpu_pct_max": 3.0, "other_cpu_pct_mean": 1.0,
        "host_start": {"other_qemu": [], "other_cpu_pct": 2.0, "busy": []},
        "host_end": {"other_qemu": [], "other_cpu_pct": 1.0, "busy": []}}


def bw_log(cmd, size, iters, mbps, mpps):
    return (f"# bench: {cmd}\n" + "-" * 87 + "\n                    RDMA_Write BW Test\n"
            " local address: LID 0000 QPN 0x0011 PSN 0x8e2a5c RKey 0x000201 VAddr 0x007f1b2c4d5000\n"
            + BW_HDR + f" {size:<7}    {iters:<10}       0.00               {mbps:<7.2f}\t\t   {mpps:<7.6f}\n"
            + "-" * 87 + "\n")


def lat_log(cmd, typ, p99):
    return (f"# bench: {cmd}\n" + LAT_HDR +
            f" 8       300          800.10        9000.00      {typ}  \t       900.00     \t50.00"
            f"\t\t{p99} \t\t9000.00\n")


def write(d, name, text):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "w") as f:
        f.write(text)


def cpu(kern, user, wall=6.0, side="client"):
    return f"{kern:.3f} {user:.3f} {wall:.3f} 1 {side}\n"


def fixture(top):
    """pair/ and loopback/ logs of 3 rounds, with the failures the tests look for"""
    pair = os.path.join(top, "pair")
    wcmd = "ib_write_bw -d rroce0 -x 3 -p 19001 -F -s 65536 -D 5 --margin 1 10.79.0.1"
    for drv in report.DRIVERS:
        for rnd in (1, 2, 3):
            # write_bw_64K: rroce round 2 reports 0.00 MB/s (a failure)
            mbps = {"rroce": [10.0, 0.0, 30.0], "rxe": [5.0, 6.0, 7.0]}[drv][rnd - 1]
            write(pair, f"{drv}.write_bw_64K.{rnd}.log", bw_log(wcmd, 65536, int(mbps * 16 * 3), mbps, mbps / 16))
            write(pair, f"{drv}.write_bw_64K.{rnd}.cpu", cpu(1.0, 5.0))
            write(pair, f"{drv}.write_bw_64K.{rnd}.srv.cpu", cpu(0.5, 0.1, side="server"))
            # send_bw_64K: 192 x 64 KiB = 12 MiB whatever the rate says
            scmd = "ib_send_bw -d rroce0 -x 3 -p 19002 -F -s 65536 -n 192 10.79.0.1"
            write(pair, f"{drv}.send_bw_64K.{rnd}.log", bw_log(scmd, 65536, 192, 4.0, 0.000064))
            write(pair, f"{drv}.send_bw_64K.{rnd}.srv.log", bw_log(scmd, 65536, 192, 0.0, 0.0))
            write(pair, f"{drv}.send_bw_64K.{rnd}.cpu", cpu(1.5, 3.0))
            write(pair, f"{drv}.send_bw_64K.{rnd}.srv.cpu", cpu(0.5, 3.0, side="server"))
            # write_bw_2B: 0.00 MB/s printed, but 0.0016 Mpps: a rate, not a failure
            cmd2 = "ib_write_bw -d rroce0 -x 3 -p 19003 -F -s 2 -D 5 --margin 1 10.79.0.1"
            write(pair, f"{drv}.write_bw_2B.{rnd}.log", bw_log(cmd2, 2, 4800, 0.0, 0.0016))
            write(pair, f"{drv}.write_bw_2B.{rnd}.cpu", cpu(0.2, 5.0))
            write(pair, f"{drv}.write_bw_2B.{rnd}.srv.cpu", cpu(0.1, 0.1, side="server"))
            # write_lat_8B: rxe round 3 has an infinite median; round 1 of rroce is missing
            if (drv, rnd) != ("rroce", 1):
                typ = "inf" if (drv, rnd) == ("rxe", 3) else f"{100.0 * rnd:.2f}"
                write(pair, f"{drv}.write_lat_8B.{rnd}.log",
                      lat_log("ib_write_lat -d rroce0 -s 8 -n 300 10.79.0.1", typ, "5000.00"))
                write(pair, f"{drv}.write_lat_8B.{rnd}.cpu", cpu(0.3, 2.0))
    for rnd in (1, 2, 3):
        j = {"start": {"test_start": {"duration": 3, "omit": 1}},
             "end": {"sum_received": {"bytes": 30 << 20, "seconds": 3.0, "bits_per_second": (10 << 20) * 8}}}
        write(pair, f"tcp.tcp_bw_64K.{rnd}.log", "# bench: iperf3 -c 10.79.0.1 -l 65536 -J\n" + json.dumps(j))
        write(pair, f"tcp.tcp_bw_64K.{rnd}.cpu", cpu(2.0, 0.5))
        write(pair, f"tcp.tcp_bw_64K.{rnd}.srv.cpu", cpu(2.0, 0.5, side="server"))
    loop = os.path.join(top, "loopback")
    for drv in report.DRIVERS:
        for rnd in (1, 2, 3):
            write(loop, f"{drv}.read_bw_64K.{rnd}.log",
                  bw_log("ib_read_bw -s 65536 -D 5 --margin 1", 65536, 900, 20.0 + rnd, 0.0003))
            write(loop, f"{drv}.read_bw_64K.{rnd}.cpu", cpu(2.0, 9.0, side="both"))
    write(top, "meta.json", json.dumps(META))


def scratch():
    """A temporary directory, removed when the tests end."""
    d = tempfile.mkdtemp(prefix="rroce-report-test-")
    atexit.register(shutil.rmtree, d, True)
    return d


def build():
    top = scratch()
    fixture(top)
    setups_rows, failures, wall = report.report(top, json.load(open(os.path.join(top, "meta.json"))))
    rows = {r["metric"]: r for _, rs in setups_rows for r in rs}
    return top, rows, failures


def test_zero_is_a_failure_not_a_sample():
    _, rows, failures = build()
    r = rows["pair:write_bw_64K_MBps"]
    assert r["values"]["rroce"] == [10.0, 30.0], r["values"]
    assert r["rroce"] == 20.0 and r["n"]["rroce"] == 2
    assert r["min"]["rroce"] == 10.0 and r["max"]["rroce"] == 30.0
    assert r["failed"]["rroce"] == [2]
    assert r["rxe"] == 6.0 and r["n"]["rxe"] == 3 and "rxe" not in r["failed"]
    assert [f for f in failures if (f["driver"], f["test"], f["round"]) == ("rroce", "write_bw_64K", 2)]
    # nor in the CPU figures of that run
    assert rows["pair:write_bw_64K_cpu_s_per_GiB"]["n"]["rroce"] == 2


def test_send_bytes_from_counts():
    _, rows, _ = build()
    gib = 192 * 65536 / float(1 << 30)  # not 4 MB/s x 5 s
    r = rows["pair:send_bw_64K_cpu_s_per_GiB"]
    assert abs(r["rroce"] - (1.5 + 0.5) / gib) < 1e-6, r["rroce"]
    assert abs(rows["pair:send_bw_64K_cpu_client_s_per_GiB"]["rxe"] - 1.5 / gib) < 1e-6
    assert abs(rows["pair:send_bw_64K_cpu_server_s_per_GiB"]["rxe"] - 0.5 / gib) < 1e-6
    # the rate is the sender's (the client's; the receiver's 0.00 is not used)
    assert rows["pair:send_bw_64K_MBps"]["rroce"] == 4.0


def test_duration_bytes_and_kernel_cpu():
    _, rows, _ = build()
    # -D 5: rate x 5 s; CPU is the first field (system+softirq+irq), not user time
    gib = 30.0 * 5 / 1024
    assert abs(rows["pair:write_bw_64K_cpu_s_per_GiB"]["values"]["rroce"][1] - 1.5 / gib) < 1e-6
    assert abs(rows["read_bw_64K_cpu_s_per_GiB"]["rroce"] - 2.0 / (22.0 * 5 / 1024)) < 1e-6


def test_link_bytes_over_the_cpu_interval():
    """with link counts in the .cpu records (two VMs), each side's CPU time
    is set against the bytes its link NIC moved over the same interval, not
    perftest's rate x -D: a driver that transmits the messages still posted
    when perftest's clock stops is charged for those bytes and credited
    with them; a record whose link moved nothing is a failure"""
    with tempfile.TemporaryDirectory() as d:
        pair = os.path.join(d, "pair")
        wcmd = "ib_write_bw -d rroce0 -x 3 -p 19001 -F -s 1048576 -D 5 --margin 1 10.79.0.1"
        for drv, (cli_link, srv_link) in {"rroce": ((300 << 20, 3 << 20), (2 << 20, 299 << 20)),
                                          "rxe": ((0, 0), (1 << 20, 100 << 20))}.items():
            write(pair, f"{drv}.write_bw_1M.1.log", bw_log(wcmd, 1048576, 120, 40.0, 0.00004))
            write(pair, f"{drv}.write_bw_1M.1.cpu", "6.000 1.000 10.000 1 client 3.000 %d %d\n" % cli_link)
            write(pair, f"{drv}.write_bw_1M.1.srv.cpu", "4.000 0.500 10.000 1 server 5.500 %d %d\n" % srv_link)
        meta = dict(META, setups=["pair"], repeats=1)
        setups_rows, failures, _ = report.report(d, meta)
        rows = {r["metric"]: r for _, rs in setups_rows for r in rs}
        cli, srv = 6.0 / (303 / 1024), 4.0 / (301 / 1024)  # not 40 MB/s x 5 s = 200 MiB
        assert abs(rows["pair:write_bw_1M_cpu_client_s_per_GiB"]["rroce"] - cli) < 1e-9, rows
        assert abs(rows["pair:write_bw_1M_cpu_server_s_per_GiB"]["rroce"] - srv) < 1e-9
        assert abs(rows["pair:write_bw_1M_cpu_s_per_GiB"]["rroce"] - (cli + srv)) < 1e-9
        assert rows["pair:write_bw_1M_MBps"]["rroce"] == 40.0
        # rxe's client link counted nothing: its CPU figure failed, its rate stands
        assert rows["pair:write_bw_1M_cpu_s_per_GiB"]["rxe"] is None
        assert rows["pair:write_bw_1M_MBps"]["rxe"] == 40.0
        assert [f for f in failures if f["driver"] == "rxe" and f["why"] == "no byte count"], failures


def test_events_table():
    """*_events runs (perftest -e, a fixed count) get rows of their own,
    beside the polling run's ratio, and stay out of the plain tables"""
    with tempfile.TemporaryDirectory() as d:
        pair = os.path.join(d, "pair")
        for drv, (ev, poll) in {"rroce": (60.0, 60.0), "rxe": (40.0, 20.0)}.items():
            cmd = "ib_read_bw -d rroce0 -x 3 -p 19001 -F -s 65536 -n 3000 -e 10.79.0.1"
            write(pair, f"{drv}.read_bw_64K_events.1.log", bw_log(cmd, 65536, 3000, ev, ev / 64))
            write(pair, f"{drv}.read_bw_64K_events.1.cpu", "2.000 0.500 4.000 1 client 1.500 1000 200000000\n")
            write(pair, f"{drv}.read_bw_64K_events.1.srv.cpu", "2.000 0.100 4.000 1 server 1.900 200000000 1000\n")
            cmd = "ib_read_bw -d rroce0 -x 3 -p 19002 -F -s 65536 -D 5 --margin 1 10.79.0.1"
            write(pair, f"{drv}.read_bw_64K.1.log", bw_log(cmd, 65536, 3000, poll, poll / 64))
            write(pair, f"{drv}.read_bw_64K.1.cpu", "2.000 2.000 5.000 1 client 1.000 1000 200000000\n")
            write(pair, f"{drv}.read_bw_64K.1.srv.cpu", "2.000 0.100 5.000 1 server 2.900 200000000 1000\n")
        meta = dict(META, setups=["pair"], repeats=1)
        setups_rows, failures, _ = report.report(d, meta)
        assert not failures, failures
        rows = {r["metric"]: r for _, rs in setups_rows for r in rs}
        assert rows["pair:read_bw_64K_events_MBps"]["ratio"] == 1.5
        tabs = report.tables("pair", setups_rows[0][1], meta)
        ev = [t for t in tabs if t[0].startswith("perftest waiting on completion events")]
        assert len(ev) == 1 and ev[0][2][0][0] == "ib_read_bw 64K -e", tabs
        assert ev[0][2][0][3].strip() == "1.50x" and ev[0][2][0][4].strip() == "3.00x", ev
        bw = [t for t in tabs if t[0].startswith("bandwidth")][0]
        assert [r[0] for r in bw[2]] == ["ib_read_bw 64K"], bw


def test_unaccounted_cpu_time_is_a_failure():
    """a .cpu record with idle time whose fields do not add up to the wall
    time (softirq work lost by tick sampling) gives no CPU figure, and says
    why; one that adds up counts.  With IRQ time accounting in the kernel
    (meta) the rest is host steal: the figure counts and the summary says
    how much was missing; a guest that marked its TSC unstable (which turns
    the accounting off) makes it a failure again."""
    with tempfile.TemporaryDirectory() as top:
        d = os.path.join(top, "pair")
        cmd = "ib_write_bw -d rroce0 -x 3 -p 19001 -F -s 4096 -D 5 --margin 1 10.79.0.1"
        for drv in report.DRIVERS:
            write(d, f"{drv}.write_bw_4K.1.log", bw_log(cmd, 4096, 9000, 10.0, 0.00256))
            # client: 1 + 4 + 0.9 of 6 s; server: rroce 0.2 + 0.1 + 3.0 of 6 s
            write(d, f"{drv}.write_bw_4K.1.cpu", "1.000 4.000 6.000 1 client 0.900\n")
            idle = 3.0 if drv == "rroce" else 5.7
            write(d, f"{drv}.write_bw_4K.1.srv.cpu", f"0.200 0.100 6.000 1 server {idle:.3f}\n")
        runs, failures, _ = report.load("pair", d, 5, rounds=1)
        assert "cpu_s_per_GiB" not in runs[("rroce", "write_bw_4K")][1], runs
        assert runs[("rroce", "write_bw_4K")][1]["MBps"] == 10.0
        assert abs(runs[("rxe", "write_bw_4K")][1]["cpu_s_per_GiB"] - 1.2 / (50.0 / 1024)) < 1e-9, runs
        assert [(f["driver"], f["why"]) for f in failures] == [
            ("rroce", "CPU time unaccounted (neither idle, user nor system+irq+softirq): server 45%")], failures
        lost = []
        runs, failures, _ = report.load("pair", d, 5, 1, lost)
        assert failures == [] and lost == [0.45], (failures, lost)
        assert abs(runs[("rroce", "write_bw_4K")][1]["cpu_server_s_per_GiB"] - 0.2 / (50.0 / 1024)) < 1e-9
        meta = {"setups": ["pair"], "repeats": 1, "perftest_duration_s": 5, "irq_time_accounting": True}
        _, failures, _ = report.report(top, meta)
        assert failures == [] and meta["cpu_unaccounted"] == {"runs_over": 1, "max": 0.45, "median": 0.45}, meta
        assert any("unaccounted: 1 (median 45%" in line for line in report.summary_lines(meta, failures))
        write(d, "tsc-unstable", "b\n")
        meta = {"setups": ["pair"], "repeats": 1, "perftest_duration_s": 5, "irq_time_accounting": True}
        _, failures, _ = report.report(top, meta)
        whys = sorted(f["why"] for f in failures)
        assert len(whys) == 2 and whys[0].startswith("CPU time unaccounted") and "TSC unstable" in whys[1], whys


def test_host_state_counts_a_process_started_in_the_window():
    """bench/host_state.py: a process of ours that started between the two
    samples (a VM booting) is ours, all of its CPU time; before, it counted
    as 0, so the whole host's busy time minus ours called it other load."""
    import host_state
    hz = host_state.HZ
    win = host_state.WINDOW
    p0 = {100: (1, 0, "run.sh"), 200: (1, 50, "other")}
    p1 = {100: (1, 0, "run.sh"), 101: (100, int(1.5 * hz), "qemu-system-x86"),
          200: (1, 50 + int(0.5 * hz), "other"), 300: (1, int(0.2 * hz), "new-other")}
    mine, other = host_state.shares(p0, p1, 100, 999)
    assert abs(mine - 100.0 * 1.5 / win) < 1e-6, mine
    assert set(other) == {200, 300} and abs(other[300][1] - 100.0 * 0.2 / win) < 1e-6, other


def test_small_message_rate_from_mpps():
    _, rows, failures = build()
    r = rows["pair:write_bw_2B_MBps"]
    assert r["n"] == {"rroce": 3, "rxe": 3}
    assert abs(r["rroce"] - 0.0016 * 1e6 * 2 / (1 << 20)) < 1e-9
    assert not [f for f in failures if f["test"] == "write_bw_2B"]


def test_missing_and_infinite_are_failures():
    _, rows, failures = build()
    why = {(f["driver"], f["test"], f["round"]): f["why"] for f in failures}
    assert why[("rroce", "write_lat_8B", 1)].startswith("missing")
    assert ("rxe", "write_lat_8B", 3) in why
    r = rows["pair:write_lat_8B_us_typ"]
    assert r["values"]["rroce"] == [200.0, 300.0] and r["values"]["rxe"] == [100.0, 200.0]
    assert r["failed"] == {"rroce": [1], "rxe": [3]}
    assert len(failures) == 3, failures


def test_tcp_bytes_and_machine_flag():
    _, rows, _ = build()
    # iperf3: 30 MiB in 3 s measured, -O 1: 40 MiB in the whole run
    r = rows["pair:bw_64K_cpu_s_per_GiB"]
    assert abs(r["tcp"] - 4.0 / (40 / 1024)) < 1e-6
    assert rows["pair:write_bw_64K_MBps"]["tcp"] == 10.0
    assert report.machine_notes(META) == []
    busy = dict(META, other_qemu_max=2, host_start={"other_qemu": ["123 qemu-system-x86_64 -m 2G"]})
    notes = report.machine_notes(busy)
    assert len(notes) == 2 and "other QEMU" in notes[0], notes


def udp_log(length, sent, received, secs):
    return (f"# bench: udp_baseline flood 10.79.0.1 19060 {length} 3\n"
            f"udp_baseline: len {length} sent {sent} received {received} bytes {received * length} "
            f"seconds {secs:.3f} MiBps {received * length / secs / (1 << 20):.2f}\n# exit: 0\n")


def test_udp_baseline_and_mtu9000():
    """the UDP baseline's rows (bytes the sink received, CPU per GiB of
    them), a flood without a report is a failure, and the *_mtu9000 runs get
    their own table beside TCP at 9000 and the ratio at 1500"""
    top = scratch()
    d = os.path.join(top, "pair")
    for rnd in (1, 2):
        for drv, r15, r90 in (("rroce", 60.0, 80.0), ("rxe", 30.0, 20.0)):
            for name, mbps in (("write_bw_64K", r15), ("write_bw_64K_mtu9000", r90)):
                cmd = "ib_write_bw -s 65536 -D 5 --margin 1"
                write(d, f"{drv}.{name}.{rnd}.log", bw_log(cmd, 65536, 1000, mbps, 0.0))
                write(d, f"{drv}.{name}.{rnd}.cpu", cpu(1.0, 1.0))
                write(d, f"{drv}.{name}.{rnd}.srv.cpu", cpu(1.0, 1.0, side="server"))
        j = {"start": {"test_start": {"duration": 3, "omit": 1}},
             "end": {"sum_received": {"bytes": 30 << 20, "seconds": 3.0, "bits_per_second": (10 << 20) * 8}}}
        write(d, f"tcp.tcp_bw_64K_mtu9000.{rnd}.log", "# bench: iperf3 -J\n" + json.dumps(j))
        write(d, f"tcp.tcp_bw_64K_mtu9000.{rnd}.cpu", cpu(2.0, 0.5))
        write(d, f"tcp.tcp_bw_64K_mtu9000.{rnd}.srv.cpu", cpu(2.0, 0.5, side="server"))
        for name, length in (("udp_bw_1040B", 1040), ("udp_bw_4112B_mtu9000", 4112)):
            text = udp_log(length, 40000, 20000, 2.0)
            if (name, rnd) == ("udp_bw_1040B", 2):
                text = "# bench: udp_baseline flood\nudp_baseline flood: no report from the sink\n# exit: 1\n"
            write(d, f"udp.{name}.{rnd}.log", text)
            write(d, f"udp.{name}.{rnd}.cpu", cpu(1.5, 1.0))
            write(d, f"udp.{name}.{rnd}.srv.cpu", cpu(0.5, 1.0, side="server"))
    meta = dict(META, setups=["pair"], repeats=2)
    write(top, "meta.json", json.dumps(meta))
    setups_rows, failures, _ = report.report(top, meta)
    rows = {r["name"]: r for _, rs in setups_rows for r in rs}
    u = rows["bw_1040B_MBps"]
    assert len(u["values"]["udp"]) == 1 and abs(u["values"]["udp"][0] - 20000 * 1040 / 2.0 / (1 << 20)) < 0.01, u
    assert u["failed"] == {"udp": [2]}, u
    assert [(f["driver"], f["test"], f["round"]) for f in failures] == [("udp", "udp_bw_1040B", 2)], failures
    c = rows["bw_4112B_mtu9000_cpu_s_per_GiB"]["values"]["udp"]
    assert len(c) == 2 and abs(c[0] - 2.0 / (20000 * 4112 / float(1 << 30))) < 1e-6, c
    w = rows["write_bw_64K_mtu9000_MBps"]
    assert w["ratio"] == 4.0 and w["tcp"] == 10.0, w
    assert rows["write_bw_64K_MBps"]["ratio"] == 2.0 and "tcp" not in rows["write_bw_64K_MBps"]
    tabs = {title: t for title, _, t, _ in report.tables("pair", list(rows.values()), meta)}
    j9 = [t for title, t in tabs.items() if title.startswith("MTU 9000")][0]
    assert j9 == [["ib_write_bw 64K", "80 (80-80)", "20 (20-20)", "    4.00x", "10", "    2.00x",
                   "    0.25x"]], j9
    link = [t for title, t in tabs.items() if title.startswith("the same link")][0]
    assert [r[0] for r in link] == ["UDP, 1040-byte datagrams, MTU 1500", "iperf3 TCP -l 64K, MTU 9000",
                                    "UDP, 4112-byte datagrams, MTU 9000"], link
    # the write sweep and the plot's size axis leave the MTU 9000 runs out
    assert report.size_bytes("64K_mtu9000") is None


def test_udp_pingpong_latency():
    """the UDP ping-pong's half round trip sits beside ib_write_lat and
    ib_send_lat, its whole round trip beside ib_read_lat; a ping-pong
    without a report is a failure of the udp row"""
    top = scratch()
    d = os.path.join(top, "pair")
    for rnd in (1, 2):
        for drv, typ in (("rroce", "100.00"), ("rxe", "200.00")):
            for op in ("write", "read"):
                write(d, f"{drv}.{op}_lat_8B.{rnd}.log", lat_log(f"ib_{op}_lat -s 8 -n 300", typ, "400.00"))
        text = ("# bench: udp_baseline pingpong 10.79.0.1 19070 40 300\n"
                f"udp_baseline: pingpong len 40 iters 300 rtt_p50_us {60 + 20 * rnd:.2f} rtt_p99_us 300.00"
                + (" lost 1" if rnd == 2 else "") + "\n# exit: 0\n")
        write(d, f"udp.udp_lat_40B.{rnd}.log", text)
    write(d, "udp.udp_lat_40B.3.log", "# bench: udp_baseline pingpong\nudp_baseline pingpong: no answer\n# exit: 1\n")
    meta = dict(META, setups=["pair"], repeats=2)
    write(top, "meta.json", json.dumps(meta))
    setups_rows, failures, _ = report.report(top, meta)
    rows = {r["name"]: r for _, rs in setups_rows for r in rs}
    u = rows["lat_40B_us_typ"]
    assert u["values"]["udp"] == [40.0, 50.0] and u["failed"] == {"udp": [3]}, u
    assert rows["lat_40B_us_p99"]["values"]["udp"] == [150.0, 150.0]
    assert [(f["driver"], f["test"], f["round"]) for f in failures] == [("udp", "udp_lat_40B", 3)], failures
    tabs = {title: (hdr, t) for title, hdr, t, _ in report.tables("pair", list(rows.values()), meta)}
    hdr, t = [v for title, v in tabs.items() if title.startswith("latency")][0]
    assert hdr[-1] == "UDP p50" and {r[0]: r[-1] for r in t} == {"ib_write_lat 8B": "45", "ib_read_lat 8B": "90"}, t


def test_clock_calibration_failure_named():
    """perftest prints rate 0 when its CPU clock calibration fails (under
    TCG now and then, with rxe as with rroce): a failure that says so"""
    top = scratch()
    d = os.path.join(top, "pair")
    cmd = "ib_write_bw -s 65536 -D 5 --margin 1"
    write(d, "rroce.write_bw_64K.1.log", bw_log(cmd, 65536, 1205, 0.0, 0.0).replace(
        "\n", "\nCorrelation coefficient r^2: 0.864437 < 0.9\n", 1))
    write(d, "rxe.write_bw_64K.1.log", bw_log(cmd, 65536, 600, 30.0, 0.0))
    write(d, "rxe.write_bw_64K.1.cpu", cpu(1.0, 1.0))
    write(d, "rxe.write_bw_64K.1.srv.cpu", cpu(1.0, 1.0, side="server"))
    _, failures, _ = report.load("pair", d, 5, 1)
    assert [f["why"] for f in failures] == [
        "rate 0 though 1205 iterations were counted (perftest's clock calibration failed: r^2 < 0.9)"], failures


def test_exit_status_in_failure():
    top = scratch()
    d = os.path.join(top, "pair")
    write(d, "rroce.send_bw_64K.1.log", "# bench: ib_send_bw -s 65536 -n 192\n" + BW_HDR + "# exit: 124\n")
    write(d, "rroce.send_bw_64K.1.cpu", cpu(1.0, 1.0))
    runs, failures, _ = report.load("pair", d, 5, 1)
    why = {(f["driver"], f["round"]): f["why"] for f in failures}
    assert why == {("rroce", 1): "no result (exit 124)", ("rxe", 1): "missing (no log)"}, why
    assert not runs


def test_base_before_after():
    """--base: a third driver "base" (an older rroce) in the same run gets its
    own medians, rroce/base, a missing base log is a failure, and the report
    prints the before/after table with the ranges compared"""
    top = scratch()
    d = os.path.join(top, "loopback")
    cmd = "ib_write_bw -s 64 -D 3 --margin 1"
    rates = {"rroce": [2.0, 2.2, 2.4], "base": [1.0, 1.1, None], "rxe": [1.5, 1.6, 1.7]}
    for drv, v in rates.items():
        for rnd, mbps in enumerate(v, 1):
            if mbps is None:
                continue
            write(d, f"{drv}.write_bw_64B.{rnd}.log", bw_log(cmd, 64, 1000, mbps, mbps / 64))
            write(d, f"{drv}.write_bw_64B.{rnd}.cpu", cpu(1.0, 1.0, side="both"))
    meta = dict(META, setups=["loopback"], base="01e0f79")
    write(top, "meta.json", json.dumps(meta))
    setups_rows, failures, _ = report.report(top, meta)
    rows = {r["metric"]: r for _, rs in setups_rows for r in rs}
    r = rows["write_bw_64B_MBps"]
    # (64 B: the rate is perftest's message rate x 64 B)
    assert r["n"] == {"rroce": 3, "base": 2, "rxe": 3}, r
    assert abs(r["ratio_base"] - 2.2 / 1.05) < 1e-3 and abs(r["base"] / r["rxe"] - 1.05 / 1.6) < 1e-3
    assert report.spread(r, "rroce", "base") == "rroce better"
    assert report.spread(rows["write_bw_64B_cpu_s_per_GiB"], "rroce", "base") == "rroce better"
    assert [(f["driver"], f["round"]) for f in failures] == [("base", 3)], failures
    t = report.base_table(setups_rows[-1][1], meta)
    assert t and "01e0f79" in t[0][0] and ["write_bw_64B_MBps"] == [x[0] for x in t[0][2] if "MBps" in x[0]]
    # without a base: no such table, no base fields
    top2, rows2, _ = build()
    assert all("base" not in x for x in rows2.values())
    assert report.base_table(list(rows2.values()), META) == []


def test_end_to_end():
    top, _, _ = build()
    out = os.path.join(top, "out.json")
    here = os.path.dirname(os.path.abspath(__file__))
    p = subprocess.run([sys.executable, os.path.join(here, "report.py"), top, out,
                        "--markdown", os.path.join(top, "out.md")],
                       capture_output=True, text=True, check=True)
    text = p.stdout
    assert text.index("two VMs") < text.index("UNEQUAL"), text  # the headline first
    assert "machine idle" in text and "failures: 3" in text
    assert "pair: rroce write_bw_64K round 2: rate 0 though 0 iterations" not in text
    assert "pair: rroce write_bw_64K round 2: rate 0" in text, text
    assert "calibration" not in text
    assert report.CPU_TITLE in text
    rows = json.load(open(out))
    assert rows[-1]["metric"] == "meta" and rows[-1]["failure_count"] == 3
    assert rows[-1]["machine_idle"] is True
    med = [r for r in rows if r["metric"] == "pair:write_bw_64K_MBps"][0]
    assert med["rroce"] == statistics.median([10.0, 30.0])


def test_hw_counter_health():
    """Each run's hw_counters deltas (bench/pair.sh's .hwc files) add up per
    driver; counters that moved are named, a clean driver says so, and the
    meta row carries the totals."""
    top, _, _ = build()
    pair = os.path.join(top, "pair")
    for name, text in (("rroce.write_bw_64K.1.a.hwc", "rx_packets 1000\ntx_packets 20\n"),
                       ("rroce.write_bw_64K.1.b.hwc", "rx_packets 20\nretransmits 3\nrx_linearized 2\n"),
                       ("rroce.write_bw_64K.2.b.hwc", "retransmits 4\nbogus line here\n"),
                       ("rxe.write_bw_64K.1.a.hwc", "rcvd_pkts 500\nack_deferred 9\n")):
        open(os.path.join(pair, name), "w").write(text)
    h = report.health(pair)
    assert h["rroce"]["packets"] == 1020 and h["rroce"]["retransmits"] == 7
    assert h["rroce"]["rx_linearized"] == 2 and h["rroce"]["ack_timeouts"] == 0
    assert h["rxe"]["packets"] == 500 and "ack_deferred" not in h["rxe"]
    lines = report.health_lines(h)
    assert lines[0] == "  rroce: 1,020 packets received; retransmits 7, rx_linearized 2", lines
    assert lines[1] == "  rxe: 500 packets received; no retransmission or drop counted", lines
    out = os.path.join(top, "out.json")
    here = os.path.dirname(os.path.abspath(__file__))
    p = subprocess.run([sys.executable, os.path.join(here, "report.py"), top, out],
                       capture_output=True, text=True, check=True)
    assert "hw_counters over all runs (pair, both sides):\n  rroce: 1,020" in p.stdout, p.stdout
    meta = json.load(open(out))[-1]
    assert meta["hw_counters"]["pair"]["rroce"]["retransmits"] == 7


def test_icount_kernel_report():
    """bench/icount/kernel_report.py: instructions per message from the BW
    average (MiB per guest second) or the message rate, whichever has more
    digits, new/old, and a rate of 0 or no result line is a failure (exit
    1), never in the median."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "icount"))
    import kernel_report
    with tempfile.TemporaryDirectory() as d:
        def put(name, text):
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        # 65536 B at 62.5 MiB/s: 1,000 messages per guest second = 1e6 instructions each
        put("rroce.write_bw_64K.1.log", bw_log("ib_write_bw -s 65536 -n 300", 65536, 300, 62.5, 0.001))
        put("rroce.write_bw_64K.2.log", bw_log("ib_write_bw -s 65536 -n 300", 65536, 300, 62.5, 0.001))
        put("base.write_bw_64K.1.log", bw_log("ib_write_bw -s 65536 -n 300", 65536, 300, 31.25, 0.0005))
        put("base.write_bw_64K.2.log", bw_log("ib_write_bw -s 65536 -n 300", 65536, 300, 0.0, 0.0))
        put("rroce.read_bw_64B.1.log", "# bench: ib_read_bw -s 64\n# exit: 1\n")
        # 64 B: "3.07" MiB/s is 0.3 % coarse, "0.050282" Mpps finer: the rate
        put("rroce.write_bw_64B.1.log", bw_log("ib_write_bw -s 64 -n 5000", 64, 5000, 3.07, 0.050282))
        runs, failed = kernel_report.load(d)
        assert abs(runs[("rroce", "write_bw_64B")][0] - 1e3 / 0.050282) < 1e-6, runs
        assert runs[("rroce", "write_bw_64K")] == [1e6, 1e6], runs
        assert runs[("base", "write_bw_64K")] == [2e6], runs
        assert failed == ["base.write_bw_64K.2.log", "rroce.read_bw_64B.1.log"], failed
        r = subprocess.run([sys.executable, kernel_report.__file__, d, "new", "old"], capture_output=True, text=True)
        assert r.returncode == 1, r
        assert "| write_bw_64K | 1,000,000 | ±0.00 % | 2,000,000 | ±0.00 % | 0.500× |" in r.stdout, r.stdout
        assert "failed runs" in r.stdout and "rroce.read_bw_64B.1.log" in r.stdout, r.stdout


if __name__ == "__main__":
    for k, f in sorted(globals().items()):
        if k.startswith("test_") and callable(f):
            f()
            print(f"ok {k}")
