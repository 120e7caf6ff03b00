# SPDX-License-Identifier: GPL-2.0
"""Tiny TAP helpers shared by the pyverbs selftests."""
import ctypes
import signal
import sys
import time
import traceback

from pyverbs.pyverbs_error import PyverbsRDMAError

_n = 0
_failed = 0


def check(ok, desc, detail=""):
    """Print one "ok/not ok" line; `detail` is shown on failure."""
    global _n, _failed
    _n += 1
    if not ok:
        _failed += 1
    print(f"{'ok' if ok else 'not ok'} {_n} - {desc}" + (f" # {detail}" if detail and not ok else ""))


def errno_of(fn):
    """The errno a verbs call fails with, 0 if it succeeds."""
    try:
        fn()
    except PyverbsRDMAError as ex:
        return ex.error_code
    return 0


def vm_pin_kb():
    """This process's pinned memory (VmPin of /proc/self/status), in kB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmPin:"):
                return int(line.split()[1])
    return -1


def lock_memory():
    """mlockall(MCL_CURRENT | MCL_FUTURE): fault in and lock every page of
    the process, mapped now or later.  For fault injection: a page fault
    served by the test VM's 9p root file system during an injected
    allocation failure can break the 9p client for the whole VM."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mlockall(1 | 2) != 0:
        raise OSError(ctypes.get_errno(), "mlockall")


def finish():
    """Summarise and exit non-zero if any check failed."""
    print(f"# {_n - _failed}/{_n} checks passed")
    sys.exit(1 if _failed else 0)


class CaseTimeout(Exception):
    """A case ran past run_cases' per-case limit."""


def _alarm(_sig, _frame):
    raise CaseTimeout()


def run_cases(cases, names, setup, limit_s):
    """Run several cases of a check script in this one process (a Python
    start with pyverbs costs seconds under TCG): for each NAME of `names`,
    `cases[NAME](*setup())` between a "#@ begin NAME" and a "#@ end NAME
    ok|fail" line, with its own check numbering.  `setup` opens fresh
    objects (contexts, PDs) for each case, which are closed after it (their
    `close()`), so cases share only the process.
    A case that raises, or runs longer than `limit_s` seconds (SIGALRM, so a
    case blocked inside a C call is cut only when that call returns; the
    caller's timeout covers the process as a whole), fails with the reason,
    and the next case runs.  Exit status 1 if any case failed."""
    global _n, _failed
    any_failed = False
    signal.signal(signal.SIGALRM, _alarm)
    for name in names:
        _n = _failed = 0
        print(f"#@ begin {name}", flush=True)
        t0 = time.monotonic()
        signal.alarm(limit_s)
        objs = ()
        try:
            if name not in cases:
                check(False, f"case {name} exists", f"one of: {', '.join(cases)}")
            else:
                objs = setup()
                cases[name](*objs)
        except CaseTimeout:
            check(False, f"case {name} ran to the end", f"killed after {limit_s} s")
        except PyverbsRDMAError as ex:
            check(False, f"case {name} ran to the end", f"unexpected verbs error: {ex}")
        except Exception as ex:  # pylint: disable=broad-except
            for line in traceback.format_exc().splitlines():
                print(f"# {line}")
            check(False, f"case {name} ran to the end", f"{type(ex).__name__}: {ex}")
        finally:
            signal.alarm(0)
            for o in objs:
                try:
                    o.close()
                except Exception as ex:  # pylint: disable=broad-except
                    check(False, f"case {name}: its objects close", f"{type(ex).__name__}: {ex}")
        print(f"# {_n - _failed}/{_n} checks passed in {time.monotonic() - t0:.1f} s")
        print(f"#@ end {name} {'fail' if _failed else 'ok'}", flush=True)
        any_failed = any_failed or _failed > 0
    sys.exit(1 if any_failed else 0)
