"""EcoG-Bench: load, build prompt, parse, score."""

from avstack.tasks.ecog.data import GtClip, load_gt
from avstack.tasks.ecog.metrics import METRICS, score_clip
from avstack.tasks.ecog.score import EcogResult, score

__all__ = ["GtClip", "load_gt", "METRICS", "score_clip", "EcogResult", "score"]
