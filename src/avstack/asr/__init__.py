"""Word-level ASR with faster-whisper, guarded against Whisper's short-clip failures.

models: bundled offline models, names, devices · text: guards and Chinese handling ·
refine: speech energy and word-edge refinement · whisper: transcription (one clip, a
file) · batch: many clips in one model call, heard on the device, then finished on the CPU ·
windows: long audio a window at a time · packing: several short clips in one window ·
acoustic: word edges by forced alignment · lexicon: its English pronunciations · align:
cross-attention timing · types: settings, words, transcripts · evaluation: word-timing accuracy
on speech with known times (tests and benchmarks only).

May import: avstack.io, avstack.media, avstack.lifeline, avstack.profiling.
"""

from avstack.asr.align import aligner_setting, realign
from avstack.asr.batch import finish, hear_batch, transcribe_batch
from avstack.asr.models import BUNDLED, load_model, pick_device, resolve_model
from avstack.asr.packing import (
    PACK_GAP_S,
    PACK_WINDOW_S,
    clips_of,
    hear_packed,
    interleave,
    packed_seconds,
    plan_packs,
    transcribe_packed,
)
from avstack.asr.refine import refine_edges, snap_to_regions, speech_present, voiced_regions
from avstack.asr.runtime import runtime_of
from avstack.asr.text import clean_token, collapse_repeats, group_chinese, is_punctuation, sanitize, to_simplified
from avstack.asr.types import (
    ASR_VERSION,
    RATE,
    AsrSettings,
    Heard,
    Transcript,
    Word,
    language_setting,
    transcript_from_ecog,
)
from avstack.asr.whisper import REPETITIVE, transcribe, transcribe_file, transcribe_long
from avstack.asr.windows import WINDOW_MAX_S, needs_windows

__all__ = [
    "ASR_VERSION",
    "BUNDLED",
    "PACK_GAP_S",
    "PACK_WINDOW_S",
    "RATE",
    "REPETITIVE",
    "WINDOW_MAX_S",
    "AsrSettings",
    "Heard",
    "Transcript",
    "Word",
    "clips_of",
    "aligner_setting",
    "clean_token",
    "finish",
    "hear_batch",
    "hear_packed",
    "collapse_repeats",
    "group_chinese",
    "interleave",
    "packed_seconds",
    "is_punctuation",
    "language_setting",
    "needs_windows",
    "load_model",
    "pick_device",
    "plan_packs",
    "realign",
    "refine_edges",
    "resolve_model",
    "runtime_of",
    "sanitize",
    "snap_to_regions",
    "speech_present",
    "to_simplified",
    "transcript_from_ecog",
    "transcribe",
    "transcribe_batch",
    "transcribe_file",
    "transcribe_packed",
    "transcribe_long",
    "voiced_regions",
]
