"""EcoG-Bench: load, build prompt, parse, score.

The names below load on first use: `prepare` imports only this package's folder layout (no
OpenCV or numpy in a frames job's driver)."""

from importlib import import_module
from typing import Any

_WHERE = {
    "GtClip": "data",
    "load_gt": "data",
    "METRICS": "metrics",
    "score_clip": "metrics",
    "EcogResult": "score",
    "score": "score",
}

__all__ = ["GtClip", "load_gt", "METRICS", "score_clip", "EcogResult", "score"]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
