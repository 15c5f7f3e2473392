"""Word-level ASR with faster-whisper, guarded against Whisper's short-clip failures.

models: bundled offline models, names, devices · text: guards and Chinese handling ·
refine: speech energy and word-edge refinement · whisper: transcription (one clip, a batch,
a file) · packing: several short clips in one window · types: settings, words, transcripts.
"""

from .align import aligner_setting, realign
from .models import BUNDLED, load_model, pick_device, resolve_model
from .packing import PACK_GAP_S, PACK_WINDOW_S, _clips_of, interleave, packed_seconds, plan_packs, transcribe_packed
from .refine import refine_edges, snap_to_regions, speech_present, voiced_regions
from .runtime import runtime_of
from .text import clean_token, collapse_repeats, group_chinese, is_punctuation, sanitize, to_simplified
from .types import ASR_VERSION, RATE, AsrSettings, Transcript, Word, language_setting
from .whisper import REPETITIVE, transcribe, transcribe_batch, transcribe_file

__all__ = [
    "ASR_VERSION",
    "BUNDLED",
    "PACK_GAP_S",
    "PACK_WINDOW_S",
    "RATE",
    "REPETITIVE",
    "AsrSettings",
    "Transcript",
    "Word",
    "_clips_of",
    "aligner_setting",
    "clean_token",
    "collapse_repeats",
    "group_chinese",
    "interleave",
    "packed_seconds",
    "is_punctuation",
    "language_setting",
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
    "transcribe",
    "transcribe_batch",
    "transcribe_file",
    "transcribe_packed",
    "voiced_regions",
]
