#!/usr/bin/env python3
"""Per-iteration instruction counts from bench/icount/provider.sh's profiles.

    report.py DIR N BASE_REV

Reads DIR/{base,head}.MODE.{N,2N}.cg (callgrind output), sums each
object's self cost (instructions executed in its own code), and prints,
per mode, (cost at 2N - cost at N) / N for the provider, libibverbs, the
mock kernel and the whole process, old and new, and new/old.
"""
import re
import sys
from collections import defaultdict

MODES = ("send1", "send16", "recv1")
GROUPS = (
    ("provider", "librroce-rdmav34.so"),
    ("libibverbs", "libibverbs.so"),
    ("mock", "mock_uverbs.so"),
)


def self_cost_by_object(path):
    """{object path: self Ir} of one callgrind profile."""
    names = {}
    cost = defaultdict(int)
    ob = "?"
    skip = False
    total = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith(("ob=", "cob=")):
                # name compression: "(id) name" the first time (in either
                # kind of line), "(id)" after that
                key, _, val = line.rstrip("\n").partition("=")
                m = re.match(r"\((\d+)\)(?: (.*))?$", val)
                if m and m.group(2):
                    names[m.group(1)] = m.group(2)
                if key == "ob":
                    ob = names.get(m.group(1), "?") if m else val.strip()
            elif line.startswith("calls="):
                skip = True  # the next cost line is the call's inclusive cost
            elif line[:1].isdigit() or line[:1] in "+-*":
                if skip:
                    skip = False
                    continue
                parts = line.split()
                if len(parts) > 1:
                    cost[ob] += int(parts[1])
            elif line.startswith("totals:") or line.startswith("summary:"):
                total = int(line.split()[1])
    summed = sum(cost.values())
    if total is not None and total != summed:
        sys.exit(f"{path}: self costs add up to {summed}, the profile says {total}")
    return cost, summed


def per_iteration(d, which, mode, n):
    """{group: instructions per iteration} for one provider and mode."""
    (c1, t1), (c2, t2) = (self_cost_by_object(f"{d}/{which}.{mode}.{k}.cg") for k in (n, 2 * n))
    res = {}
    for group, needle in GROUPS:
        a = sum(v for o, v in c1.items() if needle in o)
        b = sum(v for o, v in c2.items() if needle in o)
        res[group] = (b - a) / n
    res["all"] = (t2 - t1) / n
    return res


def main():
    d, n, base = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    cols = [g for g, _ in GROUPS] + ["all"]
    print(f"instructions per iteration (callgrind; ({2 * n} - {n} iterations) / {n}); old = {base}, new = working tree")
    print(f"{'mode':8} {'':4} " + " ".join(f"{c:>11}" for c in cols))
    for mode in MODES:
        old = per_iteration(d, "base", mode, n)
        new = per_iteration(d, "head", mode, n)
        print(f"{mode:8} {'old':4} " + " ".join(f"{old[c]:11.1f}" for c in cols))
        print(f"{'':8} {'new':4} " + " ".join(f"{new[c]:11.1f}" for c in cols))
        print(f"{'':8} {'n/o':4} " + " ".join(
            f"{(new[c] / old[c] if old[c] else float('nan')):11.3f}" for c in cols))


if __name__ == "__main__":
    main()
