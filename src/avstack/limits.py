"""Bounds shared by the media layer and the commands that set them, and what this machine allows
(no heavy imports here)."""

import os

DEFAULT_MAX_PIXELS = 7680 * 4320  # 8K UHD: what one decoded frame may cost (about 100 MB as RGB)


def cores() -> int:
    """The CPUs this process may run on (its affinity, where the system says)."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
