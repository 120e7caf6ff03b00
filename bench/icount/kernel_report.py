#!/usr/bin/env python3
"""Report of bench/icount/kernel.sh: guest instructions per message.

    kernel_report.py DIR [HEAD_DESC] [BASE_DESC]

DIR holds DRV.NAME.ROUND.log (perftest client output).  Under
`-icount shift=0` one guest nanosecond is one guest instruction, so
perftest's BW average (MiB per guest second) gives instructions per
message = size * 1e9 / (BW * 2**20), and its message rate (Mpps)
1e3 / rate: whichever was printed with more significant digits.  A run without a result line, or
with a rate of 0, is a failure: listed, never averaged.  Prints a table
(median and spread of the rounds) and, with a base, new/old.
"""
import os
import re
import statistics
import sys

RESULT = re.compile(r"^\s*(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s*$")


def quantum(text):
    """Half the last printed digit of a number, relative to it (inf for 0)."""
    v = float(text)
    decimals = len(text.split(".")[1]) if "." in text else 0
    return 0.5 * 10**-decimals / v if v > 0 else float("inf")


def parse(path):
    """(size, instructions per message) of one client log, or None.  From
    the BW average or the message rate, whichever perftest printed with
    more significant digits: a 64 B run's ~3 MiB/s has two decimals
    (0.3 %), its ~0.05 Mpps six (0.002 %); a 64 KiB run the other way."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = RESULT.match(line)
            if m:
                size, bw, rate = int(m.group(1)), float(m.group(4)), float(m.group(5))
                if bw <= 0 or rate <= 0:
                    return None
                if quantum(m.group(5)) < quantum(m.group(4)):
                    return size, 1e3 / rate
                return size, size * 1e9 / (bw * 2**20)
    return None


def load(d):
    runs, failed = {}, []
    for fn in sorted(os.listdir(d)):
        m = re.match(r"^(\w+)\.(\w+)\.(\d+)\.log$", fn)
        if not m:
            continue
        drv, name, _ = m.groups()
        r = parse(os.path.join(d, fn))
        if r is None:
            failed.append(fn)
            continue
        runs.setdefault((drv, name), []).append(r[1])
    return runs, failed


def spread(v):
    """Largest deviation from the median, as a fraction of it."""
    med = statistics.median(v)
    return max(abs(x - med) for x in v) / med if med else 0.0


def main(argv):
    d = argv[1]
    head = argv[2] if len(argv) > 2 else "working tree"
    base = argv[3] if len(argv) > 3 else ""
    runs, failed = load(d)
    names = sorted({n for _, n in runs}, key=lambda n: (n.split("_")[0], n))
    print(f"Guest instructions per message (-icount shift=0; rroce0 -> rroce1 over veth, 1 vCPU); rroce = {head}"
          + (f", base = {base}" if base else ""))
    cols = ["test", "rroce", "spread"] + (["base", "spread", "rroce/base"] if base else [])
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for n in names:
        row = [n]
        new = runs.get(("rroce", n))
        row += [f"{statistics.median(new):,.0f}", f"±{spread(new) * 100:.2f} %"] if new else ["failed", ""]
        if base:
            old = runs.get(("base", n))
            row += [f"{statistics.median(old):,.0f}", f"±{spread(old) * 100:.2f} %"] if old else ["failed", ""]
            row.append(f"{statistics.median(new) / statistics.median(old):.3f}×" if new and old else "")
        print("| " + " | ".join(row) + " |")
    if failed:
        print("failed runs (no result or rate 0): " + ", ".join(failed))
    return 1 if failed or not runs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
