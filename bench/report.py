#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Summarise the perftest client logs of bench/in-vm.sh (DIR/DRV.NAME.ROUND.log):
medians per driver and metric, the rroce/rxe ratio, a terminal table and a
JSON file."""
import json
import os
import statistics
import sys
from collections import defaultdict

raw, out_json = sys.argv[1], sys.argv[2]
vals = defaultdict(lambda: defaultdict(list))
for f in sorted(os.listdir(raw)):
    parts = f.split(".")
    if len(parts) != 4 or parts[3] != "log":
        continue
    drv, name = parts[0], parts[1]
    for line in open(os.path.join(raw, f), errors="replace"):
        t = line.split()
        if not t or not t[0].isdigit():
            continue
        try:
            nums = [float(x) for x in t]
        except ValueError:
            continue
        if name.endswith(("_bw_64K", "_bw_64B")) and len(nums) == 5:
            vals[name + "_MBps"][drv].append(nums[3])
            vals[name + "_Mpps"][drv].append(nums[4])
        elif "_lat_" in name and len(nums) == 9:
            vals[name + "_us_typ"][drv].append(nums[4])
            vals[name + "_us_p99"][drv].append(nums[7])
rows = []
for metric in sorted(vals):
    d = vals[metric]
    med = {k: statistics.median(v) for k, v in d.items() if v}
    r, x = med.get("rroce"), med.get("rxe")
    ratio = (r / x if x else None) if r is not None and x is not None else None
    # For latencies lower is better: report rxe/rroce so >1 means rroce wins.
    better = None
    if ratio:
        better = ratio if "_us_" not in metric else (x / r if r else None)
    rows.append({"metric": metric, "rroce": r, "rxe": x, "n": {k: len(v) for k, v in d.items()},
                 "rroce_advantage": better})
print(f"{'metric':24} {'rroce':>10} {'rxe':>10} {'rroce adv.':>10}")
for row in rows:
    f = lambda v: f"{v:10.3f}" if v is not None else f"{'-':>10}"
    print(f"{row['metric']:24} {f(row['rroce'])} {f(row['rxe'])} {f(row['rroce_advantage'])}")
json.dump(rows, open(out_json, "w"), indent=1)
