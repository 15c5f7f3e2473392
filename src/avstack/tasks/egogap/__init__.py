"""EgoGapBench: load, build prompt, parse, score (and export for fine-tuning)."""

from avstack.tasks.egogap.data import EgoGapDataError, Item, load_bundles
from avstack.tasks.egogap.parse import parse_letter
from avstack.tasks.egogap.prompt import STYLES, build_prompt
from avstack.tasks.egogap.score import score, spearman

__all__ = ["EgoGapDataError", "Item", "load_bundles", "parse_letter", "STYLES", "build_prompt", "score", "spearman"]
