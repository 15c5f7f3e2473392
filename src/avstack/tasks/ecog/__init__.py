"""EcoG-Bench: load, build prompt, parse, score."""

from importlib import import_module
from typing import Any

# imported on first use: the command line reads EcoG's inputs record (tasks.ecog.inputs) at its
# start, and the scorer's numpy is not needed for that
_NAMES = {
    "GtClip": "data",
    "load_gt": "data",
    "METRICS": "metrics",
    "score_clip": "metrics",
    "EcogResult": "scoring",
    "score": "scoring",
}

__all__ = ["GtClip", "load_gt", "METRICS", "score_clip", "EcogResult", "score"]


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_NAMES[name]}"), name)
