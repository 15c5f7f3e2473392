"""The GPU figures in one call: ASR speed, the GPU's words against the CPU's, full prepare, Ray.

    make bench-gpu                                   # on a machine with an NVIDIA GPU (writes benchmarks/gpu.json)
    python benchmarks/gpu.py --device cpu --quick    # the same keys on a CPU in about a minute (in the test suite)
    python benchmarks/gpu.py --device sim --quick --out sim.json   # the GPU pipeline, simulated (gpu_sim.py)

Sections, in the order they run (each one's failure is recorded under `errors` and the next one
runs; the JSON is written after each, so a run stopped at its limit keeps what it measured; a
section that would start past `--budget-s` is listed under `skipped` with the reason):

1. `device`, `versions`: the GPU's name, driver and memory (nvidia-smi), what CTranslate2 sees,
   the cuBLAS it loaded, the packages.
2. `asr_rtf` and `words_vs_cpu` on the short clips: for each model (tiny.en, base) and compute
   type (float16, int8_float16 on CUDA), avstack's ASR clip by clip and batched across clips
   (`asr.transcribe_batch`, what the prepare feeder calls on a GPU); the real-time factor of each,
   and the words against the CPU's float32 words of the same clips (the reference for "same
   clip, same words"): the share of clips with identical text, and the word-edge differences on
   those clips (median, p90, max). Also with `aligner none` (the transcriber's own times: what
   the GPU alone computes), against the CPU's own `aligner none` words.
3. `prepare`: full `prepare` (frames, audio, ASR) of the short clips with 1, 2 and 4 workers on
   the device and on the CPU, and the hand-written pipeline (benchmarks/handwritten.py: PyAV +
   faster-whisper) on the device, each a cold CLI process, in the same run: times, times real
   time, the ratio to the CPU and to the hand-written pipeline, where each prepare's time went
   (its prepare.json profile), and whether the GPU prepare wrote the CPU prepare's words.
4. `real_speech`: `asr_timing --speech real`'s takes (praatio's hand-aligned sentences and the
   shared spontaneous take) with the device's transcriber and the CPU's, scored against the
   hand alignments.
5. `asr_rtf` on a long file (12 minutes): one transcription, and faster-whisper's batched pipeline.
6. `ray`: `prepare --executor ray` on a local Ray node, which declares the GPU when there is one.

`--device cpu` puts the CPU's int8 where the GPU's types would be, so the script runs (and its
keys are checked) on any machine; those figures are no GPU figures. The data come from `--data`
(benchmarks/gpu_kit.py makes it: 43 clips, the long file, the real speech, the weights) or, with
none given, from the bundled samples (7 clips; a long file of their speech) and ../shared.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
KEYS = ("meta", "device", "versions", "asr_rtf", "words_vs_cpu", "prepare", "real_speech", "ray", "skipped", "errors")
GPU_COMPUTES = ("float16", "int8_float16")
CPU_STAND_IN = ("int8",)  # --device cpu: what stands where the GPU's compute types would
REFERENCE = "float32"  # the CPU's reproducible compute type: the words every other path is held to
PACKAGES = ("avstack", "faster-whisper", "ctranslate2", "av", "numpy", "ray", "pocketsphinx", "onnxruntime", "torch")


def importable() -> dict[str, str]:
    """The environment a child process needs to import avstack and its CLI from this checkout,
    also where avstack is not installed (a lent machine): src/ and a folder naming cli/ avstack_cli."""
    env = dict(os.environ)
    try:
        import avstack_cli  # noqa: F401

        return env
    except ImportError:
        pass
    shim = Path(tempfile.gettempdir()) / "avstack-cli-shim"
    shim.mkdir(exist_ok=True)
    if not (shim / "avstack_cli").exists():
        (shim / "avstack_cli").symlink_to(ROOT / "cli")
    paths = [str(ROOT / "src"), str(shim), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    sys.path[:0] = [str(ROOT / "src"), str(shim)]
    return env


@dataclass
class Inputs:
    clips: list[Path]
    audio: list[Any]  # 16 kHz mono float32 per clip
    long_file: Path | None
    real: list[Any]  # asr evaluation cases with hand-aligned words
    models: dict[str, str]  # name -> folder
    data_root: Path  # the clips' folder (prepare's input)
    truths: dict[str, Any] | None = None

    @property
    def seconds(self) -> float:
        return sum(len(a) for a in self.audio) / 16_000


@dataclass
class Bench:
    args: argparse.Namespace
    env: dict[str, str]
    result: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)

    def __post_init__(self) -> None:
        self.result = {k: ([] if k in ("asr_rtf", "words_vs_cpu", "prepare", "real_speech") else {}) for k in KEYS}

    def left(self) -> float:
        return self.args.budget_s - (time.perf_counter() - self.started)

    def section(self, name: str, fn: Callable[[], None], needs_s: float = 0.0) -> None:
        """Run one section; a failure is recorded and the next section runs."""
        if self.left() < needs_s:
            self.result["skipped"][name] = f"{self.left():.0f} s of the {self.args.budget_s} s budget left"
            self.save()
            return
        t0 = time.perf_counter()
        print(f"== {name} ({self.left():.0f} s left)", flush=True)
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - one section's failure must not lose the others
            self.result["errors"][name] = f"{type(exc).__name__}: {exc}"[:2000]
            print(f"   {name} failed: {exc!r}", flush=True)
        self.result["meta"].setdefault("section_s", {})[name] = round(time.perf_counter() - t0, 1)
        self.save()

    def save(self) -> None:
        self.result["meta"]["wall_s"] = round(time.perf_counter() - self.started, 1)
        for path in self.args.out:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.result, indent=1, default=str))
            os.replace(tmp, path)


# ------------------------------------------------------------------------------------------ inputs


def load_inputs(args: argparse.Namespace, tmp: Path) -> Inputs:
    from avstack.asr import evaluation as asr_eval
    from avstack.asr.models import resolve_model
    from avstack.media.audio import load_audio

    names = ["tiny.en"] if args.quick else ["tiny.en", "base"]
    data = args.data
    models = {}
    for n in names:
        kit = data.parent / "models" / n if data else None
        models[n] = str(kit) if kit is not None and (kit / "model.bin").is_file() else resolve_model(n)
    if data is not None:
        clips = sorted((data / "clips").glob("*.mp4"))
        truths = json.loads((data / "truths.json").read_text()) if (data / "truths.json").is_file() else None
        long_file = next(iter(sorted(data.glob("long.*"))), None)
        real = real_cases(data / "real")
        root = data / "clips"
    else:  # the bundled samples, flattened into one folder of videos
        root, truths = tmp / "clips", None
        root.mkdir(parents=True, exist_ok=True)
        for i, src in enumerate(sorted((ROOT / "samples" / "ecog_en").rglob("*"))):
            if src.suffix.lower() in (".mp4", ".mov"):
                shutil.copy2(src, root / f"c{i:02d}{src.suffix.lower()}")
        clips = sorted(root.iterdir())
        long_file = None
        take = asr_eval.shared_take(SHARED) if SHARED.is_dir() else None
        real = [take] if take is not None else []
    audio = [a for a in (load_audio(c) for c in clips)]
    keep = [(c, a) for c, a in zip(clips, audio) if a is not None and len(a)]
    clips, audio = [c for c, _ in keep], [a for _, a in keep]
    if long_file is None:
        long_file = long_of(audio, tmp / "long.wav", 60.0 if args.quick else 720.0)
    return Inputs(clips, audio, long_file, real, models, root, truths)


def real_cases(folder: Path) -> list[Any]:
    from avstack.asr import evaluation as asr_eval

    cases = asr_eval.real_cases(folder / "praatio") if (folder / "praatio").is_dir() else []
    take = asr_eval.shared_take(folder / "shared") if (folder / "shared").is_dir() else None
    return cases + ([take] if take is not None else [])


def long_of(audio: list[Any], path: Path, seconds: float) -> Path:
    """A long file of the clips' speech one after another (1 s pauses), to `seconds`."""
    import numpy as np
    import soundfile as sf

    pause = np.zeros(16_000, np.float32)
    pieces, total, k = [], 0, 0
    while total < seconds * 16_000:
        pieces += [audio[k % len(audio)], pause]
        total += len(audio[k % len(audio)]) + len(pause)
        k += 1
    sf.write(path, np.concatenate(pieces)[: int(seconds * 16_000)], 16_000)
    return path


# ------------------------------------------------------------------------------------------ device


def device_info(args: argparse.Namespace, inputs: Inputs) -> dict[str, Any]:
    import ctranslate2

    out: dict[str, Any] = {"requested": args.device, "ct2_cuda_devices": ctranslate2.get_cuda_device_count()}
    try:
        fields = "name,driver_version,memory.total,compute_cap"
        line = subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"], capture_output=True, text=True, timeout=30
        ).stdout.splitlines()[0]
        out |= dict(zip(("name", "driver", "memory", "compute_capability"), (x.strip() for x in line.split(","))))
    except (OSError, IndexError, subprocess.SubprocessError):
        out["name"] = platform.processor() or platform.machine() if args.device == "cpu" else "unknown"
    if args.device == "cuda":
        out["ct2_cuda_compute_types"] = sorted(ctranslate2.get_supported_compute_types("cuda"))
    out["cpu"] = cpu_model()
    out["cores"] = os.cpu_count()
    return out


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def loaded_libraries(prefix: str) -> list[str]:
    """The shared libraries this process has mapped whose names start with `prefix` (which cuBLAS)."""
    try:
        maps = Path("/proc/self/maps").read_text().splitlines()
    except OSError:
        return []
    return sorted({line.split()[-1] for line in maps if Path(line.split()[-1]).name.startswith(prefix)})


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in PACKAGES:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "absent"
    if out["avstack"] == "absent":
        import avstack

        out["avstack"] = f"{avstack.__version__} (checkout)"
    return out


# ------------------------------------------------------------------------------------------ ASR


def settings_of(model: str, device: str, compute: str, aligner: str = "auto") -> Any:
    from avstack import asr

    return asr.AsrSettings(model=model, device=device, language="en", compute_type=compute, aligner=aligner)


def on_cpu(audio: list[Any], s: Any) -> list[Any]:
    """The CPU reference: each clip alone, one thread each, clips side by side on every core (the
    words do not depend on the threads: each transcription keeps its one)."""
    from avstack import asr
    from avstack.asr.models import set_replicas

    n = os.cpu_count() or 1
    set_replicas(n)
    try:
        with ThreadPoolExecutor(n) as pool:
            return list(pool.map(lambda a: asr.transcribe(a, s), audio))
    finally:
        set_replicas(1)


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def rtf_row(model: str, compute: str, aligner: str, kind: str, mode: str, audio_s: float, wall: float) -> dict:
    return {
        "model": model,
        "compute_type": compute,
        "aligner": aligner,
        "set": kind,
        "mode": mode,
        "audio_s": round(audio_s, 1),
        "wall_s": round(wall, 3),
        "rtf": round(wall / audio_s, 5),
        "x_realtime": round(audio_s / wall, 1),
    }


def compare_words(got: list[Any], ref: list[Any]) -> dict[str, Any]:
    """Clips whose text is identical to the reference's, and on those the word-edge differences."""
    same, diffs, examples = 0, [], []
    for g, r in zip(got, ref):
        gt, rt = [w.text for w in g.words], [w.text for w in r.words]
        if gt != rt:
            if len(examples) < 3:
                examples.append({"device": " ".join(gt), "cpu": " ".join(rt)})
            continue
        same += 1
        for a, b in zip(g.words, r.words):
            diffs += [abs(a.begin_ms - b.begin_ms), abs(a.end_ms - b.end_ms)]
    return {
        "clips": len(ref),
        "identical_text": same,
        "identical_text_share": round(same / max(1, len(ref)), 3),
        "edges_compared": len(diffs),
        "edge_diff_median_ms": statistics.median(diffs) if diffs else None,
        "edge_diff_p90_ms": percentile(diffs, 90),
        "edge_diff_max_ms": max(diffs) if diffs else None,
        "differing": examples,
    }


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    import numpy as np

    return float(np.percentile(values, q))


def short_asr(b: Bench, inputs: Inputs, computes: tuple[str, ...]) -> None:
    from avstack import asr

    dev = b.args.device
    for name, path in inputs.models.items():
        refs = {al: on_cpu(inputs.audio, settings_of(path, "cpu", REFERENCE, al)) for al in ("auto", "none")}
        for k, compute in enumerate(computes):
            if b.left() < 30:
                b.result["skipped"][f"asr {name} {compute}"] = "out of budget"
                continue
            s = settings_of(path, dev, compute)
            asr.transcribe(inputs.audio[0], s)  # loads the model and warms the device (untimed)
            per_clip, wall = timed(lambda s=s: [asr.transcribe(a, s) for a in inputs.audio])
            batched, wall_b = timed(lambda s=s: asr.transcribe_batch(inputs.audio, s, batch_size=16))
            rows = [("per_clip", "auto", per_clip, wall), ("batched", "auto", batched, wall_b)]
            if k == 0:  # the transcriber alone: what the device computes, without the CPU's aligner
                bare = replace(s, aligner="none")
                mine, wall_n = timed(lambda s=bare: [asr.transcribe(a, s) for a in inputs.audio])
                rows.append(("per_clip", "none", mine, wall_n))
                # a batch's device part alone (asr.hear_batch, what the feeder's transcriber thread
                # runs): the simulated device's figure (benchmarks/gpu_sim.py); not finished, so
                # its words are not compared
                _, wall_h = timed(lambda s=s: asr.hear_batch(inputs.audio, s, 16))
                b.result["asr_rtf"].append(rtf_row(name, compute, "none", "short", "batched", inputs.seconds, wall_h))
            for mode, aligner, trs, w in rows:
                b.result["asr_rtf"].append(rtf_row(name, compute, aligner, "short", mode, inputs.seconds, w))
                cmp = compare_words(trs, refs[aligner])
                b.result["words_vs_cpu"].append({"model": name, "compute_type": compute, "mode": mode} | cmp)
                b.result["words_vs_cpu"][-1]["aligner"] = aligner
            b.result["device"].setdefault("runtime", per_clip[0].runtime)
            b.result["device"]["cublas"] = loaded_libraries("libcublas")
            b.save()


def long_asr(b: Bench, inputs: Inputs, computes: tuple[str, ...]) -> None:
    from faster_whisper import BatchedInferencePipeline

    from avstack import asr
    from avstack.media.audio import load_audio

    assert inputs.long_file is not None
    audio = load_audio(inputs.long_file)
    seconds = len(audio) / 16_000
    for name, path in inputs.models.items():
        for compute in computes:
            if b.left() < 20:
                b.result["skipped"][f"long {name} {compute}"] = "out of budget"
                continue
            s = settings_of(path, b.args.device, compute, "none")
            _, wall = timed(lambda s=s: asr.transcribe(audio, s))
            b.result["asr_rtf"].append(rtf_row(name, compute, "none", "long", "sequential", seconds, wall))
            pipe = BatchedInferencePipeline(asr.load_model(path, s.device, s.threads, 1, compute))
            _, wall_b = timed(
                lambda p=pipe: list(p.transcribe(audio, language="en", word_timestamps=True, batch_size=16)[0])
            )
            b.result["asr_rtf"].append(rtf_row(name, compute, "faster-whisper", "long", "batched", seconds, wall_b))
            b.save()


def real_speech(b: Bench, inputs: Inputs, computes: tuple[str, ...]) -> None:
    from avstack import asr
    from avstack.asr import evaluation as asr_eval

    if not inputs.real:
        b.result["skipped"]["real_speech"] = "no real takes (praatio's examples, ../shared/realspeech) here"
        return
    seconds = sum(len(c.audio) for c in inputs.real) / 16_000
    for name, path in inputs.models.items():
        for device, compute in ((b.args.device, computes[0]), ("cpu", REFERENCE)):
            s = settings_of(path, device, compute)
            asr.transcribe(inputs.real[0].audio[:16_000], s)  # load (untimed)
            trs, wall = timed(lambda s=s: [asr.transcribe(c.audio, s) for c in inputs.real])
            row = asr_eval.summarize(inputs.real, [list(t.words) for t in trs], 0, wall / seconds)
            keep = ("clips", "words", "recognized_pct", "boundary_median_ms", "boundary_p90_ms", "rtf")
            b.result["real_speech"].append(
                {"model": name, "device": device, "compute_type": compute} | {k: row.get(k) for k in keep}
            )


# ------------------------------------------------------------------------------------------ prepare


def cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "from avstack_cli.app import main; main()", *args]


def run_prepare(b: Bench, inputs: Inputs, out: Path, extra: list[str]) -> float:
    shutil.rmtree(out, ignore_errors=True)
    cmd = cli("prepare", str(inputs.data_root), "--out", str(out), "--lang", "en", *extra)
    cmd += ["--asr-model", inputs.models["tiny.en"]]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=b.env, timeout=max(30, b.left()))
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"prepare {' '.join(extra)} exited {proc.returncode}: {proc.stderr[-1500:]}")
    return wall


def manifest_words(out: Path) -> dict[str, tuple[list[str], list[tuple[int, int]], str]]:
    from avstack.manifest import load_manifest

    found = {}
    for rec in load_manifest(out):
        words = (rec.asr.to_ecog() if rec.asr else {}).get("words", [])
        device = ((rec.asr.to_ecog() if rec.asr else {}).get("runtime") or {}).get("device", "?")
        found[rec.clip_id] = ([w["text"] for w in words], [(w["begin_time"], w["end_time"]) for w in words], device)
    return found


def prepare_section(b: Bench, inputs: Inputs, tmp: Path) -> None:
    workers = (1,) if b.args.quick else (1, 2, 4)
    cpu_workers = b.args.cpu_workers or workers
    compute = GPU_COMPUTES[0] if b.args.device == "cuda" else CPU_STAND_IN[0]
    runs = {"device": ["--device", b.args.device, "--asr-compute", compute], "cpu": ["--device", "cpu"]}
    if not b.args.quick:  # each clip alone on the device: the CPU's words (batched decodes otherwise)
        runs["device-single"] = [*runs["device"], "--asr-mode", "single"]
    walls: dict[tuple[str, int], float] = {}
    b.result["prepare"] = []
    for w in workers:
        for side, extra in runs.items():
            if (side == "cpu" and w not in cpu_workers) or (side == "device-single" and w != max(workers)):
                continue
            if b.left() < 20:
                b.result["skipped"][f"prepare {side} {w}"] = "out of budget"
                continue
            out = tmp / f"prep-{side}-{w}"
            walls[(side, w)] = run_prepare(b, inputs, out, [*extra, "--workers", str(w)])
            meta = json.loads((out / "prepare.json").read_text())
            b.result["prepare"].append(
                {
                    "where": f"{side}: {' '.join(extra)}",
                    "side": side,
                    "workers": w,
                    "wall_s": round(walls[(side, w)], 2),
                }
                | {"plan": meta.get("plan"), "profile": meta.get("profile")}
            )
            b.save()
    hand = handwritten(b, inputs, tmp / "hand", compute)
    for row in b.result["prepare"]:
        wall, cpu = walls.get((row["side"], row["workers"]), row["wall_s"]), walls.get(("cpu", row["workers"]))
        row |= {
            "clips": len(inputs.clips),
            "audio_s": round(inputs.seconds, 1),
            "x_realtime": round(inputs.seconds / wall, 1),
            "ratio_to_cpu": round(wall / cpu, 3) if cpu else None,
            "ratio_to_handwritten": round(wall / hand, 3) if hand else None,
        }
    b.result["prepare"].append({"where": f"hand-written ({b.args.device}, {compute})", "side": "hand", "wall_s": hand})
    if (tmp / "prep-device-1").is_dir() and (tmp / "prep-cpu-1").is_dir():
        b.result["prepare"].append(
            prepared_words(manifest_words(tmp / "prep-device-1"), manifest_words(tmp / "prep-cpu-1"))
        )


def prepared_words(got: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    """The words the device's prepare wrote against those the CPU's prepare wrote (1 worker each)."""
    same = [k for k in ref if k in got and got[k][0] == ref[k][0]]
    diffs = [abs(x - y) for k in same for p, q in zip(got[k][1], ref[k][1]) for x, y in zip(p, q)]
    return {
        "where": "words: the device's prepare against the CPU's (1 worker)",
        "side": "words",
        "asr_records_by_device": sorted({v[2] for v in got.values()}),
        "identical_text_share": round(len(same) / max(1, len(ref)), 3),
        "edge_diff_median_ms": statistics.median(diffs) if diffs else None,
        "edge_diff_p90_ms": percentile(diffs, 90),
    }


def handwritten(b: Bench, inputs: Inputs, out: Path, compute: str) -> float | None:
    """The hand-written per-clip pipeline (PyAV + faster-whisper) on the device, same clips."""
    shutil.rmtree(out, ignore_errors=True)
    script = str(Path(__file__).with_name("handwritten.py"))
    cmd = [sys.executable, script, str(inputs.data_root), str(out), "--model", inputs.models["tiny.en"]]
    cmd += ["--device", b.args.device, "--compute-type", compute]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=b.env, timeout=max(30, b.left()))
    if proc.returncode != 0:
        b.result["errors"]["handwritten"] = proc.stderr[-1500:]
        return None
    return round(time.perf_counter() - t0, 2)


def ray_section(b: Bench, inputs: Inputs, tmp: Path) -> None:
    try:
        import ray  # noqa: F401
    except ImportError:
        b.result["skipped"]["ray"] = "Ray is not installed (pip install 'avstack[ray]')"
        return
    out = tmp / "prep-ray"
    compute = GPU_COMPUTES[0] if b.args.device == "cuda" else CPU_STAND_IN[0]
    wall = run_prepare(b, inputs, out, ["--executor", "ray", "--device", b.args.device, "--asr-compute", compute])
    words = manifest_words(out)
    b.result["ray"] = {
        "clips": len(inputs.clips),
        "wall_s": round(wall, 2),
        "x_realtime": round(inputs.seconds / wall, 1),
        "asr_on_device": sum(v[2] == b.args.device for v in words.values()),
        "note": "a cold local Ray node: its start is in wall_s",
    }


# ------------------------------------------------------------------------------------------ main


def merge_earlier(b: Bench, earlier: dict[str, Any], only: list[str]) -> None:
    """Keep an earlier run's sections that this run does not measure again (its rows, errors and
    times), so a second call on a lent machine fills in what the first missed. Each row says
    which run it came from (`meta.runs`)."""
    owned = {"asr_short": ("asr_rtf:short", "words_vs_cpu"), "asr_long": ("asr_rtf:long",)}
    again = {k for name in only for k in owned.get(name, (name,))}
    for key in ("asr_rtf", "words_vs_cpu", "prepare", "real_speech", "ray"):
        rows = earlier.get(key)
        if key == "asr_rtf":
            b.result[key] = [r for r in rows or [] if f"asr_rtf:{r.get('set')}" not in again]
        elif key not in again and rows:
            b.result[key] = rows
    b.result["errors"] = {k: v for k, v in earlier.get("errors", {}).items() if k not in only}
    runs = earlier.get("meta", {}).get("runs", [earlier.get("meta", {}).get("started")])
    b.result["meta"]["runs"] = [*runs, b.result["meta"]["started"]]
    b.result["meta"]["section_s"] = {k: v for k, v in earlier.get("meta", {}).get("section_s", {}).items()}


def simulated(b: Bench) -> dict[str, Any]:
    """--device sim: prepare's pipeline with the transcriber's compute replaced by the GPU's
    measured time (benchmarks/gpu_sim.py); written under `simulated`."""
    from gpu_sim import run_sim

    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        os.environ.setdefault("AVSTACK_CACHE", str(tmp / "cache"))
        inputs = load_inputs(b.args, tmp)
        b.result["meta"] |= {"clips": len(inputs.clips), "audio_s": round(inputs.seconds, 1)}
        b.result["versions"] = versions()
        sim = lambda: b.result.update(  # noqa: E731
            simulated=run_sim(inputs.data_root, tmp, b.args.workers, inputs.models["tiny.en"], inputs.seconds)
        )
        b.section("simulated", sim)
    s = b.result.get("simulated", {})
    ratios = f"x{s.get('wall_over_critical_path')}; shared cores x{s.get('wall_over_critical_path_shared_cores')}"
    print(f"simulated device: wall {s.get('wall_s')} s, critical path {s.get('critical_path_s')} s ({ratios})")
    return b.result


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=("cuda", "cpu", "sim"), default="cuda", help="sim: benchmarks/gpu_sim.py")
    ap.add_argument("--workers", type=int, default=2, help="--device sim: prepare's workers")
    ap.add_argument("--quick", action="store_true", help="tiny.en, the bundled samples, 1 worker: about a minute")
    ap.add_argument("--data", type=Path, default=None, help="benchmarks/gpu_kit.py's data folder")
    ap.add_argument("--out", type=Path, action="append", default=None, help="JSON to write (repeatable)")
    ap.add_argument("--budget-s", type=float, default=450.0, help="no section starts past this (seconds)")
    ap.add_argument("--only", default="", help="comma list of sections to run (default: all)")
    ap.add_argument("--merge", type=Path, default=None, help="an earlier gpu.json whose other sections are kept")
    ap.add_argument(
        "--cpu-workers", type=lambda t: tuple(int(x) for x in t.split(",")), default=(), help="CPU prepares (1,2,4)"
    )
    args = ap.parse_args(argv)
    args.out = args.out or [Path(__file__).with_name("gpu.json")]
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    env = importable()
    b = Bench(args, env)
    computes = GPU_COMPUTES if args.device == "cuda" else CPU_STAND_IN
    b.result["meta"] = {
        "args": {k: str(v) for k, v in vars(args).items()},
        "compute_types": list(computes),
        "reference": f"cpu {REFERENCE}",
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    b.result["meta"]["runs"] = [b.result["meta"]["started"]]
    if args.device == "sim":
        return simulated(b)
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        os.environ.setdefault("AVSTACK_CACHE", str(tmp / "cache"))
        env.setdefault("AVSTACK_CACHE", os.environ["AVSTACK_CACHE"])
        inputs = load_inputs(args, tmp)
        b.result["meta"] |= {"clips": len(inputs.clips), "audio_s": round(inputs.seconds, 1)}
        b.result["meta"]["models"] = list(inputs.models)
        b.result["versions"] = versions()
        sections: list[tuple[str, Callable[[], None], float]] = [
            ("device", lambda: b.result["device"].update(device_info(args, inputs)), 0),
            ("prepare", lambda: prepare_section(b, inputs, tmp), 60),
            ("asr_short", lambda: short_asr(b, inputs, computes), 60),
            ("real_speech", lambda: real_speech(b, inputs, computes), 20),
            ("asr_long", lambda: long_asr(b, inputs, computes), 20),
            ("ray", lambda: ray_section(b, inputs, tmp), 40),
        ]
        only = [x for x in args.only.split(",") if x]
        if args.merge is not None:
            merge_earlier(b, json.loads(args.merge.read_text()), only)
        for name, fn, needs in sections:
            if not only or name in only or name == "device":
                b.section(name, fn, needs)
    print(json.dumps({k: b.result[k] for k in ("errors", "skipped")}, indent=1))
    print(f"wrote {', '.join(map(str, args.out))} in {b.result['meta']['wall_s']} s")
    return b.result


if __name__ == "__main__":
    main()
