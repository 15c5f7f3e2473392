"""`prepare`: clips -> frames at true times, audio on the clip's clock, word-timed ASR, a manifest.

settings (what a job is asked), discover (which clips), jobplan (workers, threads, ASR mode),
stages (frames / audio / ASR of one clip, into a content-addressed cache), feeder (ASR across
clips: packs and batches), executors/ (local processes that survive crashes; Ray), driver (the
job: plan, run, manifest, prepare.json). Both executors call down into the stages.

May import: avstack.io, avstack.version, avstack.limits, avstack.lifeline, avstack.manifest, avstack.media,
avstack.asr, avstack.profiling (where each stage spends its time). Never a task, a prompt or a run.
"""

from importlib import import_module
from typing import Any

# imported on first use: the command line reads PrepareSettings' declarations at its start, and
# the driver (its executors, the feeder) is not needed for that
_NAMES = {
    "EXECUTORS": "driver",
    "PrepareReport": "driver",
    "prepare": "driver",
    "ANCHORS": "settings",
    "ASR_MODES": "settings",
    "PrepareSettings": "settings",
    "parse_anchors": "settings",
}

__all__ = ["ANCHORS", "ASR_MODES", "EXECUTORS", "PrepareReport", "PrepareSettings", "parse_anchors", "prepare"]


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_NAMES[name]}"), name)
