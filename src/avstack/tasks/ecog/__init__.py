"""EcoG-Bench: load, build prompt, parse, score."""

from .data import GtClip, load_gt
from .metrics import METRICS, score_clip
from .score import EcogResult, score

__all__ = ["GtClip", "load_gt", "METRICS", "score_clip", "EcogResult", "score"]
