"""EgoGapBench: load, build prompt, parse, score (and export for fine-tuning)."""

from .data import EgoGapDataError, Item, load_bundles
from .parse import parse_letter
from .prompt import STYLES, build_prompt
from .score import score, spearman

__all__ = ["EgoGapDataError", "Item", "load_bundles", "parse_letter", "STYLES", "build_prompt", "score", "spearman"]
