"""Worker processes die with the process that started them.

A `kill -9` of `avstack prepare` must not leave spawn workers (and through them the resource
tracker) writing into the output folder. On Linux the kernel sends SIGKILL when the parent dies
(PR_SET_PDEATHSIG); elsewhere, and as a second line, a daemon thread watches the parent's pid.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time

PR_SET_PDEATHSIG = 1


def tie_to_parent(parent_pid: int, poll_s: float = 0.5) -> None:
    """Call first thing in a worker process started by `parent_pid`."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the watchdog below does it
        pass
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os._exit(1)
    threading.Thread(target=_watch, args=(parent_pid, poll_s), daemon=True, name="avstack-lifeline").start()


def _watch(parent_pid: int, poll_s: float) -> None:
    while os.getppid() == parent_pid:
        time.sleep(poll_s)
    os._exit(1)
