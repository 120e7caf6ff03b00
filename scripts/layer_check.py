#!/usr/bin/env python3
"""Layer check of the kernel driver (issue 17's rule, as a ratchet).

The rule: `unsafe` only in the abstraction layer (ib/, net/, sync/ and one
ffi module), the layer never imports a driver module above it, every
driver file without `unsafe` says `#![forbid(unsafe_code)]`, and the
driver's modules import each other without cycles.  The move into the
layer is under way, so this check holds the line where it is for the
rest: scripts/layer_baseline.txt records, per file outside the layer, how
many lines use `unsafe`, and the largest import cycle.  The check fails
when a file gains `unsafe` lines, a new file outside the layer uses
`unsafe`, the cycle grows, the layer imports the driver, a file free
of `unsafe` lacks the forbid attribute, or a driver function (outside the
layer) is longer than 100 lines; when a count drops it says so
(lower the baseline with --update).

The provider (providers/rroce/src) has the same shape and is checked
without a baseline: `unsafe` only in ffi/ (raw declarations and the safe
wrappers of C contracts) and ops/ (the C entry points), the crate root
denies unsafe_code and allows it on exactly those two modules, ffi/
imports nothing else of the crate, nothing but ops/ imports ops, the
other modules import each other without cycles, and no function outside
ffi/ and ops/ is longer than 100 lines.

    scripts/layer_check.py            check (exit 1 on a regression)
    scripts/layer_check.py --update   rewrite the baseline from the tree
    scripts/layer_check.py --report   counts and the cycle, no verdict
"""
import re
import sys
from pathlib import Path

TOP = Path(__file__).resolve().parent.parent
DRV = TOP / "drivers/infiniband/sw/rroce"
BASELINE = TOP / "scripts/layer_baseline.txt"
LAYER_DIRS = ("ib", "net", "sync")
LAYER_FILES = ("ffi.rs",)
# The crate root: `module!` expands to `unsafe` code, so it cannot forbid it.
ROOT = "rroce_main.rs"

UNSAFE = re.compile(r"\bunsafe\b")
COMMENT = re.compile(r"^\s*//")
USE = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)")


def driver_files():
    for p in sorted(DRV.rglob("*.rs")):
        rel = p.relative_to(DRV)
        if rel.parts[0] == "proto":  # the host-tested core: forbid(unsafe_code)
            continue
        yield rel, p


def in_layer(rel):
    return rel.parts[0] in LAYER_DIRS or str(rel) in LAYER_FILES


def unsafe_lines(path):
    n = 0
    for line in path.read_text().splitlines():
        if COMMENT.match(line):
            continue
        code = line.split("//", 1)[0]
        if UNSAFE.search(code) and "forbid(unsafe_code)" not in code:
            n += 1
    return n


def layer_module(m):
    return m in LAYER_DIRS or f"{m}.rs" in LAYER_FILES


def missing_forbid():
    """Driver files outside the layer with no `unsafe` and no forbid."""
    out = []
    for rel, p in driver_files():
        if in_layer(rel) or str(rel) == ROOT:
            continue
        if unsafe_lines(p) == 0 and "#![forbid(unsafe_code)]" not in p.read_text():
            out.append(str(rel))
    return out


FN = re.compile(r'^\s*(?:pub(?:\([a-z]+\))?\s+)?(?:const\s+)?(?:unsafe\s+)?(?:extern "C"\s+)?fn\s+(\w+)')
MAX_FN_LINES = 100


def too_long(path, label):
    """`label: fn NAME is N lines` for each function of `path` longer than MAX_FN_LINES."""
    out = []
    lines = [l.split("//", 1)[0] for l in path.read_text().splitlines()]
    i = 0
    while i < len(lines):
        m = FN.match(lines[i])
        if not m or lines[i].rstrip().endswith(";"):
            i += 1
            continue
        depth, started, j = 0, False, i
        while j < len(lines):
            depth += lines[j].count("{") - lines[j].count("}")
            started = started or "{" in lines[j]
            if started and depth <= 0:
                break
            j += 1
        if j - i + 1 > MAX_FN_LINES:
            out.append(f"{label}: fn {m.group(1)} is {j - i + 1} lines (at most {MAX_FN_LINES})")
        i = j + 1
    return out


def long_functions():
    """Functions of the driver (outside the layer) longer than MAX_FN_LINES."""
    out = []
    for rel, p in driver_files():
        if not in_layer(rel):
            out += too_long(p, str(rel))
    return out


def module_of(rel):
    return rel.parts[0][:-3] if len(rel.parts) == 1 else rel.parts[0]


def graph():
    edges = {}
    mods = {module_of(rel) for rel, _ in driver_files()}
    for rel, p in driver_files():
        m = module_of(rel)
        text = "\n".join(l.split("//", 1)[0] for l in p.read_text().splitlines())
        for t in USE.findall(text):
            if t in mods and t != m:
                edges.setdefault(m, set()).add(t)
        # `use crate::{a, b::c}` groups
        for grp in re.findall(r"use\s+crate::\{([^}]*)\}", text, re.S):
            for t in re.findall(r"(?:^|,)\s*([a-z_][a-z0-9_]*)", grp):
                if t in mods and t != m:
                    edges.setdefault(m, set()).add(t)
    return mods, edges


def sccs(nodes, edges):
    """Tarjan: the strongly connected components with more than one module."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def measure():
    counts = {}
    for rel, p in driver_files():
        if in_layer(rel):
            continue
        n = unsafe_lines(p)
        if n:
            counts[str(rel)] = n
    mods, edges = graph()
    comps = sccs(mods, edges)
    cycle = max((len(c) for c in comps), default=0)
    return counts, comps, cycle


def load_baseline():
    base, cycle = {}, 0
    if BASELINE.exists():
        for line in BASELINE.read_text().splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            k, v = line.split()
            if k == "cycle":
                cycle = int(v)
            else:
                base[k] = int(v)
    return base, cycle


PROV = TOP / "providers/rroce/src"
PROV_LAYER = ("ffi", "ops")


def provider_check():
    """The provider's layer rule: a list of violations and a summary."""
    bad, counts, edges = [], {}, {}
    files = sorted(PROV.rglob("*.rs"))
    mods = {(p.relative_to(PROV).parts[0]).removesuffix(".rs") for p in files}
    for p in files:
        rel = p.relative_to(PROV)
        m = rel.parts[0].removesuffix(".rs")
        text = "\n".join(l.split("//", 1)[0] for l in p.read_text().splitlines())
        targets = set(USE.findall(text))
        for grp in re.findall(r"use\s+crate::\{([^}]*)\}", text, re.S):
            targets |= set(re.findall(r"(?:^|,)\s*([a-z_][a-z0-9_]*)", grp))
        for t in targets:
            if t in mods and t != m:
                edges.setdefault(m, set()).add(t)
        if m in PROV_LAYER or str(rel) == "lib.rs":
            continue
        n = unsafe_lines(p)
        if n:
            counts[str(rel)] = n
            bad.append(f"provider {rel}: {n} lines with unsafe (only ffi/ and ops/ may have it)")
        bad += too_long(p, f"provider {rel}")
    root = (PROV / "lib.rs").read_text()
    if "#![deny(unsafe_code)]" not in root:
        bad.append("provider lib.rs does not say #![deny(unsafe_code)]")
    allowed = re.findall(r"#\[allow\(unsafe_code\)\]\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+(\w+)", root)
    if sorted(allowed) != sorted(PROV_LAYER) or root.count("allow(unsafe_code)") != len(PROV_LAYER):
        bad.append(f"provider lib.rs allows unsafe_code on {allowed or 'nothing'}, not exactly on ffi and ops")
    for t in sorted(edges.get("ffi", ())):
        bad.append(f"provider ffi/ imports crate::{t} (it must stay at the bottom)")
    for m in sorted(edges):
        if m != "ops" and "ops" in edges[m]:
            bad.append(f"provider {m} imports ops (only the C entry points' callers may)")
    safe_edges = {m: {t for t in ts if t not in PROV_LAYER} for m, ts in edges.items() if m not in PROV_LAYER}
    comps = sccs(mods - set(PROV_LAYER) - {"lib"}, safe_edges)
    for c in comps:
        bad.append(f"provider import cycle: {' '.join(c)}")
    layer = sum(unsafe_lines(p) for p in files if p.relative_to(PROV).parts[0].removesuffix(".rs") in PROV_LAYER)
    summary = (f"provider: {sum(counts.values())} lines with unsafe outside ffi/ and ops/ "
               f"({layer} inside), {len(comps)} import cycles")
    return bad, summary


def main():
    pbad, psummary = provider_check()
    if "--report" in sys.argv:
        print(psummary)
        for b in pbad:
            print(f"  {b}")
    counts, comps, cycle = measure()
    total = sum(counts.values())
    if "--report" in sys.argv or "--update" in sys.argv:
        for k, v in sorted(counts.items(), key=lambda kv: -kv[1]):
            print(f"{v:4} {k}")
        print(f"{total:4} lines with unsafe outside the layer, in {len(counts)} files")
        for c in comps:
            print(f"cycle of {len(c)} modules: {' '.join(c)}")
    if "--update" in sys.argv:
        lines = ["# scripts/layer_check.py --update: lines using `unsafe` outside the",
                 "# abstraction layer, per file, and the largest module import cycle.",
                 "# The target is an empty file (issue 17); counts may only go down."]
        lines += [f"{k} {v}" for k, v in sorted(counts.items())]
        lines.append(f"cycle {cycle}")
        BASELINE.write_text("\n".join(lines) + "\n")
        return 0
    if "--report" in sys.argv:
        return 0
    base, base_cycle = load_baseline()
    bad = []
    for k, v in sorted(counts.items()):
        if v > base.get(k, 0):
            bad.append(f"{k}: {v} lines with unsafe (baseline {base.get(k, 0)})")
    if cycle > base_cycle:
        bad.append(f"module import cycle of {cycle} modules (baseline {base_cycle}): "
                   + "; ".join(" ".join(c) for c in comps))
    lower = sum(base.values()) - total
    _, edges = graph()
    for m in sorted(edges):
        if layer_module(m):
            up = sorted(t for t in edges[m] if not layer_module(t))
            if up:
                bad.append(f"layer module {m} imports driver modules above it: {' '.join(up)}")
    for f in missing_forbid():
        bad.append(f"{f} uses no unsafe but lacks #![forbid(unsafe_code)]")
    bad += long_functions()
    bad += pbad
    for b in bad:
        print(f"not ok: layer rule: {b}")
    state = (f"{total} lines with unsafe outside the layer (baseline {sum(base.values())}), "
             f"largest import cycle {cycle} modules (baseline {base_cycle})")
    state += "; " + psummary
    if bad:
        print(f"layer check FAILED: {state}")
        return 1
    print(f"layer check ok: {state}" + (f"; {lower} fewer: lower the baseline with --update" if lower > 0 or cycle < base_cycle else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
