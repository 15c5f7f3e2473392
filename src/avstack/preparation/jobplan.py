"""How `prepare` runs when the user leaves it open: chosen from the job, written into prepare.json.

What is chosen, and why (measured in benchmarks/floor.py and benchmarks/short_full.py):
- workers: one process per core, never more than the clips. A process per clip in flight keeps a
  poison clip's crash to itself, and clips side by side keep every core busy.
- decoder threads per worker: as many as cores. A worker's clip is split into independent spans
  (avstack.spans) that its threads decode side by side, so one long clip uses every core, and
  when the workers outnumber the clips left the idle cores go to those clips' spans (while all
  workers are busy the threads only share the cores: decoding threads wait, never spin).
- ASR mode (`auto`): on a GPU, batched (one window per clip, the clips independent sequences of
  one batch). On a CPU, single: each clip decoded alone, so its words are a property of the clip
  and never of the clips prepared beside it, their names or their order. Packing several short
  clips into one Whisper window is faster on a CPU (Whisper pads every input to 30 s) but made a
  clip's words change with the folder it was in (6 of 8 clips in a subset folder, 14 of 23 with
  the files renamed), so it is only used when asked for (`--asr-mode packed`).
Only what the user left at its default is chosen; an explicit setting is kept as given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from avstack.limits import cores


@dataclass(frozen=True)
class JobPlan:
    workers: int
    threads: int
    asr_mode: str
    why: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return asdict(self) | {"why": list(self.why)}


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
        asr_mode, reason = _asr_mode(on_gpu)
        why.append(reason)
    elif asr_mode == "auto":
        asr_mode = "single"
    return JobPlan(workers, threads, asr_mode, tuple(why))


def _asr_mode(on_gpu: bool) -> tuple[str, str]:
    if on_gpu:
        return "batched", "ASR batched: a GPU is there (one window per clip, independent sequences)"
    return "single", "ASR single: CPU, each clip decoded alone (its words depend on its audio only)"
