#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A low-priority task that measures how long it waits for a CPU.

Usage: sched_canary.py [PERIOD_S]   (run it under `nice -n 19`)

Sleeps PERIOD_S (0.05) at a time and notes by how much each wake-up came
late: the time the task was runnable but not run (plus timer slack).  On
SIGTERM or SIGINT it prints one line

    canary wakeups=N longest_wait_ms=W

and exits 0.  kill_reclaim.sh runs it beside the processes it kills: the
kernel work they cause (their QPs' work items and the softirqs under them)
must leave a nice 19 task its share of the CPUs, and RCU readers such a
task was preempted in must get to finish.
"""
import signal
import sys
import time

period = float(sys.argv[1]) if len(sys.argv) > 1 else 0.05
n = 0
longest = 0.0


def done(*_):
    print(f"canary wakeups={n} longest_wait_ms={longest * 1000:.0f}", flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, done)
signal.signal(signal.SIGINT, done)
print("canary started", flush=True)
last = time.monotonic()
while True:
    time.sleep(period)
    now = time.monotonic()
    longest = max(longest, now - last - period)
    last = now
    n += 1
