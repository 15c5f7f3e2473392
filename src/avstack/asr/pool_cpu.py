"""Work sent to a process pool, with the CPU seconds it took there counted in this process: the
aligner's searches run in processes of their own (asr.acoustic.in_processes), where this
process's clock cannot see them; prepare's ASR profile and the simulated device's critical path
need them."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
from typing import TypeVar

T = TypeVar("T")

_CPU_S = [0.0]  # CPU seconds of the work this process sent to pools
_LOCK = threading.Lock()


def run_timed(pool: Executor, fn: Callable[..., T], *args: object) -> T:
    """`fn(*args)` in `pool`, its CPU seconds there added to process_cpu_seconds()."""
    result, cpu = pool.submit(_timed, fn, *args).result()
    with _LOCK:
        _CPU_S[0] += cpu
    return result


def process_cpu_seconds() -> float:
    """The CPU seconds the work sent with run_timed has taken so far."""
    return _CPU_S[0]


def _timed(fn: Callable[..., T], *args: object) -> tuple[T, float]:
    began = time.process_time()
    result = fn(*args)
    return result, time.process_time() - began
