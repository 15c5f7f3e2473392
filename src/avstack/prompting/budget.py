"""Frame budgets at stack time: prepare once at the densest rate, then let each stack pick its
frames from the prepared ones (`--fps`, `--max-frames`), uniform in time, each keeping its true
pts and so its tag. A budget is part of the stack (its name says it: `full@32f`, `full@1fps`), so
the answer cache, the plan and the exports see it, and it can be an axis of the ablation.

Picked by time, never by index: a variable-frame-rate clip's frames are not evenly spaced, so
"every k-th frame" is not uniform in time (the trap lmms-eval #674 fell into when resampling)."""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from avstack.errors import UsageError
from avstack.options import STACKS, Flag

_NAME = re.compile(r"^(?:(?P<fps>\d+(?:\.\d+)?)fps)?-?(?:(?P<n>\d+)f)?$")


FPS_FLAG = Flag(
    "Frame budget at stack time: at most this many frames a second, picked from the prepared ones uniformly in "
    "time, each at its true pts (ablate: a comma list is an axis)",
    STACKS,
    name="fps",
    text=str | None,
)
MAX_FRAMES_FLAG = Flag(
    "Frame budget at stack time: at most this many frames, spread evenly in time over the prepared ones, first "
    "and last kept (ablate: a comma list such as 8,32,128 is an axis)",
    STACKS,
    name="max-frames",
    text=str | None,
)


@dataclass(frozen=True)
class FrameBudget:
    """At most `fps` frames a second and at most `max_frames` in all (None: no bound)."""

    fps: float | None = None
    max_frames: int | None = None

    def __post_init__(self) -> None:
        if self.fps is not None and not (math.isfinite(self.fps) and self.fps > 0):
            raise UsageError(f"--fps: expected a positive number of frames a second, found {self.fps!r}")
        if self.max_frames is not None and self.max_frames < 1:
            raise UsageError(f"--max-frames: expected at least 1 frame, found {self.max_frames!r}")

    @property
    def unbounded(self) -> bool:
        return self.fps is None and self.max_frames is None

    @property
    def label(self) -> str:
        """The budget in a stack's name: `1fps`, `32f`, `1fps-32f`, or '' for none."""
        parts = [f"{self.fps:g}fps"] if self.fps is not None else []
        parts += [f"{self.max_frames}f"] if self.max_frames is not None else []
        return "-".join(parts)

    @classmethod
    def parse(cls, label: str) -> FrameBudget | None:
        """The inverse of `label`; None when `label` is not a budget."""
        m = _NAME.match(label)
        if not label or m is None or not (m["fps"] or m["n"]):
            return None
        return cls(float(m["fps"]) if m["fps"] else None, int(m["n"]) if m["n"] else None)

    def pick(self, pts_ms: Sequence[int]) -> list[int]:
        """The positions (into `pts_ms`, ascending) of the frames this budget keeps: with `fps`,
        the frame nearest each tick 1/fps apart from the first; with `max_frames`, that many ticks
        spread evenly from the first frame's time to the last's (both ends kept). A tick whose
        nearest frame is taken already takes the nearest free one, so no frame is sent twice."""
        keep = list(range(len(pts_ms)))
        if self.fps is not None and len(keep) > 1:
            step = 1000.0 / self.fps
            first, last = pts_ms[0], pts_ms[-1]
            ticks = [first + k * step for k in range(int((last - first) / step) + 1)]
            keep = _nearest(pts_ms, keep, ticks)
        if self.max_frames is not None and len(keep) > self.max_frames:
            times = [pts_ms[i] for i in keep]
            n, first, last = self.max_frames, times[0], times[-1]
            ticks = [first + (last - first) * k / (n - 1) for k in range(n)] if n > 1 else [first]
            keep = [keep[j] for j in _nearest(times, list(range(len(times))), ticks)]
        return keep


def frame_budgets(fps: str | float | None, max_frames: str | int | None, one: bool = False) -> tuple[Any, ...]:
    """--fps and --max-frames as frame budgets: every pair of the two comma lists (one, for a run)."""

    def values(given: str | float | int | None, kind: type, flag: str) -> list[Any]:
        if given is None:
            return [None]
        text = str(given)
        try:
            return [kind(v) for v in text.split(",") if v.strip()] or [None]
        except ValueError:
            what = "numbers" if kind is float else "whole numbers"
            raise UsageError(f"{flag}: expected {what} (a comma list), found {text!r}") from None

    rates, counts = values(fps, float, "--fps"), values(max_frames, int, "--max-frames")
    if one and len(rates) * len(counts) > 1:
        raise UsageError("--fps, --max-frames: one value each for one stack (ablate compares several)")
    return tuple(dict.fromkeys(FrameBudget(r, n) for r in rates for n in counts))


def packs_of(given: str | bool) -> tuple[bool, ...]:
    """--pack off | on | off,on (or a bool) as the ablation's packing axis."""
    if isinstance(given, bool):
        return (given,)
    said = {"off": False, "on": True}
    values = [v.strip() for v in given.split(",") if v.strip()]
    if not values or any(v not in said for v in values):
        raise UsageError(f"--pack: expected off, on or off,on; found {given!r}")
    return tuple(dict.fromkeys(said[v] for v in values))


def comma_list(given: str | Any) -> tuple[str, ...]:
    """A comma list option (or a sequence already) as a tuple of its non-empty items."""
    items = given.split(",") if isinstance(given, str) else list(given)
    return tuple(x.strip() for x in items if x.strip())


def one_budget(fps: str | float | None, max_frames: str | int | None) -> FrameBudget:
    """--fps and --max-frames of one stack (a run's) as its frame budget."""
    (budget,) = frame_budgets(fps, max_frames, one=True)
    return budget


def _nearest(times: Sequence[int], among: list[int], ticks: Sequence[float]) -> list[int]:
    """For each tick in turn, the nearest frame of `among` (indices into `times`) not yet taken
    (the earlier on a tie); the indices kept, ascending."""
    sub = [times[i] for i in among]
    taken: set[int] = set()
    for t in ticks:
        right = bisect.bisect_left(sub, t)
        left = right - 1
        while left >= 0 and left in taken:
            left -= 1
        while right < len(sub) and right in taken:
            right += 1
        options = [c for c in (left, right) if 0 <= c < len(sub)]
        if options:
            taken.add(min(options, key=lambda c: (abs(sub[c] - t), c)))
    return sorted(among[c] for c in taken)


def budgeted(record: Any, budget: FrameBudget) -> Any:
    """The clip record with only the frames `budget` keeps (the record itself when unbounded)."""
    if budget.unbounded or not record.frames:
        return record
    from dataclasses import replace

    keep = budget.pick([f.pts_ms for f in record.frames])
    return replace(record, frames=tuple(record.frames[i] for i in keep))
