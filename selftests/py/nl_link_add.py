#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""`rdma link add NAME type TYPE netdev NETDEV` over RDMA netlink, with
slab fault injection aimed at the kernel's work for this one request.

    nl_link_add.py NAME TYPE NETDEV [--make-it-fail]
    nl_link_add.py --serve [--make-it-fail]

With --make-it-fail the process marks itself in /proc/thread-self/
make-it-fail (for failslab's task-filter) only after everything it needs
is loaded and locked in memory (mlockall: no page of a library or of
Python is faulted in from the file system afterwards), and clears the
mark before printing: the allocations that can fail are those of the
netlink request (the link add in the kernel), not those of exec, file I/O
or page faults — the test VM's root file system is 9p, whose client does
not survive arbitrary allocation failures of its callers.

Prints "ok", "error ERRNO-NAME" (the kernel's answer) or "unknown
ERRNO-NAME" (the answer was lost: receiving failed) and exits 0, 1 or 3.

With --serve it reads requests "NAME TYPE NETDEV" from stdin, one per line,
and answers each with one such line (flushed), until end of input: a bash
coprocess then pays the Python start once for many requests (seconds each
on the debug kernel under TCG).
"""
import errno
import os
import socket
import struct
import sys

from taplib import lock_memory

NETLINK_RDMA = 20
RDMA_NL_NLDEV = 5
RDMA_NLDEV_CMD_NEWLINK = 3
ATTR_DEV_NAME = 2
ATTR_NDEV_NAME = 51
ATTR_LINK_TYPE = 65
NLM_F_REQUEST = 0x1
NLM_F_ACK = 0x4
NLMSG_ERROR = 2


def attr(kind: int, text: str) -> bytes:
    data = text.encode() + b"\0"
    hdr = struct.pack("=HH", 4 + len(data), kind)
    pad = b"\0" * ((4 - len(data) % 4) % 4)
    return hdr + data + pad


def link_add(name: str, kind: str, netdev: str, mark: bool) -> tuple:
    """One NEWLINK request; (exit status, answer line)."""
    body = attr(ATTR_DEV_NAME, name) + attr(ATTR_LINK_TYPE, kind) + attr(ATTR_NDEV_NAME, netdev)
    msg_type = (RDMA_NL_NLDEV << 10) + RDMA_NLDEV_CMD_NEWLINK
    msg = struct.pack("=IHHII", 16 + len(body), msg_type, NLM_F_REQUEST | NLM_F_ACK, 1, 0) + body
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_RDMA)
    sock.bind((0, 0))
    flag = os.open("/proc/thread-self/make-it-fail", os.O_WRONLY) if mark else -1
    err = None
    lost = None
    try:
        if mark:
            os.write(flag, b"1")
        sock.send(msg)
    except OSError as e:
        err = -e.errno
    try:
        while err is None:
            reply = sock.recv(65536)
            off = 0
            while off + 16 <= len(reply):
                length, rtype = struct.unpack_from("=IH", reply, off)
                if rtype == NLMSG_ERROR:
                    (err,) = struct.unpack_from("=i", reply, off + 16)
                    break
                off += max((length + 3) & ~3, 16)
    except OSError as e:
        lost = e.errno
    finally:
        if mark:
            os.write(flag, b"0")
            os.close(flag)
        sock.close()
    if lost is not None:
        return 3, "unknown " + errno.errorcode.get(lost, str(lost))
    if err == 0:
        return 0, "ok"
    return 1, "error " + errno.errorcode.get(-err, str(-err))


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    mark = "--make-it-fail" in sys.argv
    serve = "--serve" in sys.argv
    if len(args) != (0 if serve else 3):
        print(__doc__, file=sys.stderr)
        return 2
    if mark:
        lock_memory()
    if not serve:
        rc, text = link_add(*args, mark)
        print(text)
        return rc
    for line in sys.stdin:
        req = line.split()
        if len(req) != 3:
            print("error EINVAL (want: NAME TYPE NETDEV)", flush=True)
            continue
        print(link_add(*req, mark)[1], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
