"""EgoGapBench: load, build prompt, parse, score (and export for fine-tuning)."""

from importlib import import_module
from typing import Any

# imported on first use: the command line reads EgoGap's inputs record (tasks.egogap.inputs) at
# its start, and the scorer's numpy is not needed for that
_NAMES = {
    "EgoGapDataError": "data",
    "Item": "data",
    "load_bundles": "data",
    "parse_letter": "parse",
    "STYLES": "prompt",
    "build_prompt": "prompt",
    "score": "scoring",
    "spearman": "scoring",
}

__all__ = ["EgoGapDataError", "Item", "load_bundles", "parse_letter", "STYLES", "build_prompt", "score", "spearman"]


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_NAMES[name]}"), name)
