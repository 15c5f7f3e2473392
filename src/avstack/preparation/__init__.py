"""`prepare`: clips -> frames at true times, audio on the clip's clock, word-timed ASR, a manifest.

settings (what a job is asked), discover (which clips), jobplan (workers, threads, ASR mode),
stages (frames / audio / ASR of one clip, into a content-addressed cache), feeder (ASR across
clips: packs and batches), executors/ (local processes that survive crashes; Ray), driver (the
job: plan, run, manifest, prepare.json). Both executors call down into the stages.

May import: avstack.io, avstack.version, avstack.limits, avstack.lifeline, avstack.manifest, avstack.media,
avstack.asr, avstack.profiling (where each stage spends its time). Never a task, a prompt or a run.
"""

from avstack.preparation.driver import EXECUTORS, PrepareReport, prepare
from avstack.preparation.settings import ANCHORS, ASR_MODES, PrepareSettings, parse_anchors

__all__ = ["ANCHORS", "ASR_MODES", "EXECUTORS", "PrepareReport", "PrepareSettings", "parse_anchors", "prepare"]
