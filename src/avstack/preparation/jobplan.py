"""How `prepare` runs when the user leaves it open: chosen from the job, written into prepare.json.

What is chosen, and why (measured in benchmarks/floor.py and benchmarks/short_full.py):
- workers: one process per core, never more than the clips. A process per clip in flight keeps a
  poison clip's crash to itself, and clips side by side keep every core busy.
- decoder threads per worker: as many as cores. A worker's clip is split into independent spans
  (avstack.spans) that its threads decode side by side, so one long clip uses every core, and
  when the workers outnumber the clips left the idle cores go to those clips' spans (while all
  workers are busy the threads only share the cores: decoding threads wait, never spin).
- ASR mode (`auto`): on a GPU, batched. On a CPU, packed when at least two clips with audio are
  short enough to share Whisper's window (the median duration under PACK_MEDIAN_S): Whisper pads
  every input to 30 s, so a 5 s clip alone pays for 30; else single.
Only what the user left at its default is chosen; an explicit setting is kept as given.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from avstack.limits import cores

PACK_MEDIAN_S = 12.0  # at least two clips per 28 s window, with the pauses between them
SAMPLED_CLIPS = 32  # durations read from this many clips (headers only), spread over the job


@dataclass(frozen=True)
class JobPlan:
    workers: int
    threads: int
    asr_mode: str
    why: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"why": list(self.why)}


def header_duration_s(path: Path) -> float | None:
    """The container's stated duration (no packet is read); None when it does not say."""
    import av

    try:
        with av.open(str(path)) as c:
            return c.duration / 1_000_000 if c.duration else None
    except (av.FFmpegError, OSError):
        return None


def sample_durations(paths: Sequence[Path], n: int = SAMPLED_CLIPS) -> list[float]:
    step = max(1, len(paths) // n)
    found = [header_duration_s(p) for p in list(paths)[::step][:n]]
    return [d for d in found if d is not None]


def plan_job(
    paths: Sequence[Path],
    workers: int | None,
    threads: int,
    asr_mode: str,
    wants_asr: bool,
    on_gpu: bool,
    n_cores: int | None = None,
    local: bool = True,
) -> JobPlan:
    """The configuration for these clips on this machine; `workers=None`, `threads=0` and
    `asr_mode="auto"` are the user's "choose for me". Not `local` (Ray): only the ASR mode is
    chosen here; the cluster places the work."""
    n_cores = n_cores or cores()
    why: list[str] = []
    n = max(1, len(paths))
    if not local:
        workers = 1
    elif workers is None:
        workers = min(n_cores, n)
        why.append(f"{workers} worker(s): one per core ({n_cores}), at most one per clip ({len(paths)})")
    else:
        workers = max(1, min(workers, n))
    if threads == 0 and local:
        threads = n_cores
        why.append(
            f"{threads} decoder thread(s) per worker: a clip's spans may take every core, so the last "
            "clips do not run on one core while the others idle"
        )
    if asr_mode == "auto" and wants_asr:
        asr_mode, reason = _asr_mode(paths, on_gpu)
        why.append(reason)
    elif asr_mode == "auto":
        asr_mode = "single"
    return JobPlan(workers, threads, asr_mode, tuple(why))


def _asr_mode(paths: Sequence[Path], on_gpu: bool) -> tuple[str, str]:
    if on_gpu:
        return "batched", "ASR batched: a GPU is there"
    if len(paths) < 2:
        return "single", "ASR single: one clip"
    durations = sample_durations(paths)
    if not durations:
        return "single", "ASR single: no clip states its duration"
    median = statistics.median(durations)
    if median <= PACK_MEDIAN_S:
        return "packed", f"ASR packed: CPU, clips short (median {median:.1f} s of {len(durations)} read)"
    return "single", f"ASR single: CPU, clips long (median {median:.1f} s) for sharing a window"
