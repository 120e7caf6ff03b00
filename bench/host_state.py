#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""What else runs on the host, for the record of a benchmark run (bench/run.sh
calls it at the start, every half minute and at the end).  Looks at /proc
twice, 2 s apart; processes under PID (bench/run.sh and its VMs) are ours,
all others are "other".

    host_state.py PID          JSON: loadavg, busy_pct (the whole host, % of
                               all CPUs), other_cpu_pct (% of one CPU used by
                               all but ours), other_qemu ("pid cmdline"),
                               busy (other processes over 10 % of a CPU)
    host_state.py --line PID   one line: "TIME N_OTHER_QEMU OTHER_CPU_PCT LOAD1"
"""
import json
import os
import sys
import time

WINDOW = 2.0
HZ = os.sysconf("SC_CLK_TCK")


def procs():
    """{pid: (ppid, CPU jiffies of it and its reaped children, comm)}"""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            st = open(f"/proc/{d}/stat").read()
        except OSError:
            continue
        r = st.rindex(")")
        f = st[r + 2:].split()  # f[0] is field 3 (state) of proc(5)
        out[int(d)] = (int(f[1]), sum(int(x) for x in f[11:15]), st[st.index("(") + 1:r])
    return out


def host_busy():
    t = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(t) - t[3] - t[4], sum(t)  # not idle, not iowait


def ours(pid, ps, root):
    seen = 0
    while pid > 1 and seen < 64:
        if pid == root:
            return True
        pid = ps.get(pid, (1,))[0]
        seen += 1
    return False


def cmdline(pid):
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def shares(p0, p1, root, me):
    """(% of one CPU used by ours, {pid: (comm, %)} of the others) between
    two procs() samples.  A process that started between them used all of
    its CPU time in the window (counting it as 0 made a VM that boots in
    the window look like another process's load)."""
    mine, other = 0.0, {}
    for pid, (ppid, t, comm) in p1.items():
        c = 100.0 * (t - (p0[pid][1] if pid in p0 else 0)) / HZ / WINDOW
        if pid == me or ours(pid, p1, root):
            mine += c
        else:
            other[pid] = (comm, c)
    return mine, other


def state(root):
    p0, b0 = procs(), host_busy()
    time.sleep(WINDOW)
    p1, b1 = procs(), host_busy()
    ncpu = os.cpu_count() or 1
    host = 100.0 * ncpu * (b1[0] - b0[0]) / max(1, b1[1] - b0[1])  # % of one CPU
    mine, other = shares(p0, p1, root, os.getpid())
    # the others' share: all that is not ours (short-lived processes such
    # as compilers are seen only this way)
    return {
        "time": int(time.time()),
        "loadavg": [float(x) for x in open("/proc/loadavg").read().split()[:3]],
        "busy_pct": round(host / ncpu, 1),
        "other_cpu_pct": round(max(0.0, host - mine), 1),
        "other_qemu": [f"{pid} {cmdline(pid)[:160]}" for pid, (comm, _) in sorted(other.items())
                       if comm.startswith("qemu")],
        "busy": [f"{pid} {comm} {c:.0f}%" for pid, (comm, c) in sorted(other.items(), key=lambda x: -x[1][1])
                 if c >= 10],
    }


def main():
    a = sys.argv[1:]
    line = a[:1] == ["--line"]
    if line:
        a = a[1:]
    s = state(int(a[0]) if a else os.getppid())
    if line:
        print(s["time"], len(s["other_qemu"]), s["other_cpu_pct"], s["loadavg"][0])
    else:
        print(json.dumps(s, indent=1))


if __name__ == "__main__":
    main()
