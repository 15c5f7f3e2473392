"""A simulated device: prepare's GPU pipeline tested on any machine (`benchmarks/gpu.py --device sim`).

The transcriber's compute is replaced by the time the GPU took for it, measured on a lent device
(benchmarks/gpu.json, tiny.en float16): a sleep of that length, which frees the GIL as
CTranslate2 does. What the sleep returns is the CPU's words for the same group (heard for real,
untimed, before the timed run). Everything else is done for real: probing, decoding frames and
audio in the workers, the guards and the acoustic aligner in its processes, the cache, the
manifest. It reports:

- the wall time of `prepare` (in this process, `--workers`, ASR across clips in GPU batches);
- the simulated GPU's busy time (the sum of the sleeps) and each CPU stage's CPU seconds;
- the critical path: the largest of the GPU's busy time and each CPU stage's CPU time over the
  cores (the issue's definition), and beside it the stricter one the cores impose when the
  stages share them (all CPU stages' time over the cores);
- wall over each, and the ASR thread's profile (prepare.json's `asr_thread`).

    python benchmarks/gpu.py --device sim --quick --out /tmp/sim.json   # the bundled samples
    python benchmarks/gpu.py --device sim --data .gpukit/data --out benchmarks/gpu_sim.json
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

GPU_JSON = Path(__file__).with_name("gpu.json")
# where gpu.json has no row for the transcriber alone: tiny.en float16 on an H200, 43 clips one by
# one (benchmarks/gpu.json, asr_rtf: short, per_clip, aligner none), 5.07 s for 259.3 s of audio
FALLBACK_RTF = 0.01956


def gpu_rtf(path: Path = GPU_JSON) -> tuple[float, str]:
    """The device's seconds per audio second for the transcriber alone, batched where measured,
    else clip by clip (a batch is then taken to cost its clips' sum: batching only helps)."""
    try:
        rows = json.loads(path.read_text()).get("asr_rtf", [])
    except (OSError, ValueError):
        return FALLBACK_RTF, "fallback (no gpu.json)"
    device = [r for r in rows if r.get("model") == "tiny.en" and r.get("compute_type") == "float16"]
    for mode in ("batched", "per_clip"):
        for r in device:
            if r.get("set") == "short" and r.get("mode") == mode and r.get("aligner") == "none":
                return float(r["rtf"]), f"gpu.json: tiny.en float16, short clips, {mode}, transcriber alone"
    return FALLBACK_RTF, "fallback (gpu.json has no transcriber-alone row)"


def group_key(clips: list[np.ndarray]) -> str:
    h = hashlib.sha256()
    for c in clips:
        h.update(np.ascontiguousarray(c, dtype=np.float32).tobytes())
        h.update(b"|")
    return h.hexdigest()


@dataclass
class SimDevice:
    """asr.hear_batch as the GPU would run it: the CPU's result for the group, after the GPU's time."""

    rtf: float
    heard: dict[str, Any] = field(default_factory=dict)
    busy_s: float = 0.0
    groups: int = 0
    recording: bool = True

    def hear_batch(self, real: Any) -> Any:
        def hear(clips: list[np.ndarray], s: Any, batch_size: int = 16) -> Any:
            key = group_key(clips)
            if self.recording:  # the CPU's words, untimed
                self.heard[key] = real(clips, s, batch_size)
                return self.heard[key]
            if key not in self.heard:
                raise RuntimeError("a group the recording run did not hear: the groups moved between runs")
            seconds = sum(len(c) for c in clips) / 16_000 * self.rtf
            time.sleep(seconds)  # frees the GIL, as CTranslate2's compute does
            self.busy_s += seconds
            self.groups += 1
            return self.heard[key]

        return hear


def run_sim(data_root: Path, tmp: Path, workers: int, model: str, audio_s: float) -> dict[str, Any]:
    """One recording prepare (the CPU hears every group) and one timed prepare on the simulated device."""
    from avstack import asr
    from avstack.limits import cores
    from avstack.preparation.driver import prepare
    from avstack.preparation.settings import PrepareSettings

    rtf, source = gpu_rtf()
    sim = SimDevice(rtf)
    real = asr.hear_batch
    settings = PrepareSettings(asr_mode="batched", lang="en", asr_model=model, asr_device="cpu")
    asr.hear_batch = sim.hear_batch(real)  # the feeder calls asr.hear_batch
    try:
        prepare(data_root, tmp / "record", settings, workers=workers)
        sim.recording = False
        t0, cpu0 = time.perf_counter(), os.times()
        report = prepare(data_root, tmp / "sim", settings, workers=workers)
        wall, cpu1 = time.perf_counter() - t0, os.times()
    finally:
        asr.hear_batch = real
    if report.failed:
        raise RuntimeError(f"{len(report.failed)} clips failed: {report.failed[0].error}")
    # every process's CPU: this one's and the workers' and aligners' (children, counted once ended)
    used = sum(cpu1[:4]) - sum(cpu0[:4])
    return summary(report.profile, wall, sim, cores(), workers, audio_s, rtf, source) | {
        "cpu_all_processes_s": round(used, 3),
        "wall_over_all_cpu_per_core": round(wall / (used / cores()), 3) if used else None,
        "same_words_as_recording": _words(tmp / "sim") == _words(tmp / "record"),
    }


def summary(
    profile: dict[str, Any], wall: float, sim: SimDevice, n_cores: int, workers: int, audio_s: float, rtf: float,
    source: str,
) -> dict[str, Any]:  # fmt: skip
    """The figures: wall, the GPU's busy time, the CPU stages, the critical path and the ratios."""
    asr_thread = profile.get("asr_thread") or {}
    cpu = {name: v["cpu_s"] for name, v in profile.get("stages", {}).items()}
    # the CPU's part of ASR: the finisher threads' own time and the aligner processes' searches
    cpu["alignment"] = asr_thread.get("finishing_cpu_s", 0.0) + asr_thread.get("aligner_process_cpu_s", 0.0)
    per_stage = max(cpu.values(), default=0.0) / n_cores
    shared = sum(cpu.values()) / n_cores
    critical = max(sim.busy_s, per_stage)
    critical_shared = max(sim.busy_s, shared)
    return {
        "cores": n_cores,
        "workers": workers,
        "audio_s": round(audio_s, 1),
        "gpu_rtf": rtf,
        "gpu_rtf_source": source,
        "wall_s": round(wall, 3),
        "x_realtime": round(audio_s / wall, 1) if wall else None,
        "gpu_busy_s": round(sim.busy_s, 3),
        "gpu_groups": sim.groups,
        "cpu_stage_s": {k: round(v, 3) for k, v in cpu.items()},
        "critical_path_s": round(critical, 3),
        "critical_path_shared_cores_s": round(critical_shared, 3),
        "wall_over_critical_path": round(wall / critical, 3) if critical else None,
        "wall_over_critical_path_shared_cores": round(wall / critical_shared, 3) if critical_shared else None,
        "bound": 1.25,
        "asr_thread": asr_thread,
        "profile_stages": profile.get("stages"),
    }


def _words(out: Path) -> dict[str, list[tuple[str, int, int]]]:
    from avstack.manifest import load_manifest

    return {
        r.clip_id: [
            (w["text"], w["begin_time"], w["end_time"]) for w in (r.asr.to_ecog() if r.asr else {}).get("words", [])
        ]
        for r in load_manifest(out)
    }
