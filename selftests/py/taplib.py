# SPDX-License-Identifier: GPL-2.0
"""Tiny TAP helpers shared by the pyverbs selftests."""
import ctypes
import sys

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
