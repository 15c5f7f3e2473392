"""Performance benchmark: decode strategies, JPEG encoders, prepare workers, memory, ASR speed.

Every comparison is a ratio against a baseline measured in the same run, alternating
methods, so the numbers survive a noisy machine. Prints Markdown tables and writes JSON.

    python benchmarks/perf.py                      # everything that runs on a CPU
    python benchmarks/perf.py --only decode,jpeg   # a subset
    python benchmarks/perf.py --only asr,prepare_full --device cuda --clips 100   # the GPU script
    python benchmarks/perf.py --only ray,driver_rss --clips 24 --json benchmarks/ray.json
"""

from __future__ import annotations

import argparse
import io
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
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np

from avstack import media
from avstack.media import images
from avstack.preparation.driver import prepare
from avstack.preparation.settings import PrepareSettings
from avstack.synthetic import synth

FRAMES_ONLY = PrepareSettings(anchors=("frames",))
NOISE = 8  # ffmpeg noise strength of the test clips: ~10 Mbps at 1080p30 (x264 veryfast), a phone-like bitrate


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def rounds(methods: dict[str, Callable[[], Any]], repeats: int) -> dict[str, list[float]]:
    """Seconds per method per round, methods interleaved in every round."""
    times: dict[str, list[float]] = {m: [] for m in methods}
    for _ in range(repeats):
        for name, fn in methods.items():
            times[name].append(timed(fn))
    return times


def alternate(methods: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """Median seconds per method, methods interleaved in every round."""
    return {m: statistics.median(v) for m, v in rounds(methods, repeats).items()}


def ratio(times: dict[str, list[float]], method: str, baseline: str) -> float:
    """Median over rounds of method / baseline in the same round: steadier than a ratio of
    medians on a host whose load drifts between rounds."""
    return round(statistics.median(a / b for a, b in zip(times[method], times[baseline])), 2)


def table(rows: list[dict[str, Any]], cols: list[str]) -> str:
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


# --------------------------------------------------------------------------- decode


def published_sampler(path: Path, fps: float = 2.0) -> int:
    """The EcoG authors' method: seek by frame number (index / fps) per target, then the last frame;
    PIL JPEG q95."""
    from PIL import Image

    cap = cv2.VideoCapture(str(path))
    native = cap.get(cv2.CAP_PROP_FPS)
    count = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
    n, t = 0, 0.0
    while t < count / native:
        cap.set(cv2.CAP_PROP_POS_FRAMES, int(t * native))
        ok, frame = cap.read()
        if ok:
            Image.fromarray(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)).save(io.BytesIO(), "JPEG", quality=95)
            n += 1
        t += 1 / fps
    cap.set(cv2.CAP_PROP_POS_FRAMES, count - 1)
    ok, frame = cap.read()
    if ok:
        Image.fromarray(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)).save(io.BytesIO(), "JPEG", quality=95)
    cap.release()
    return n + 1


def bare_decode(path: Path, thread_type: str | None = "AUTO") -> int:
    """Every frame decoded, nothing else; thread_type None keeps PyAV's defaults."""
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        if thread_type:
            s.thread_type = thread_type
        return sum(1 for _ in c.decode(s))


def sampler(path: Path, decode: str) -> media.Sample:
    sample = media.sample_frames(path, fps=2.0, decode=decode)
    for f in sample.frames:
        images.encode_jpeg(f.image, 90)
    return sample


def prepare_one(path: Path, work: Path) -> None:
    """`avstack prepare --anchors frames` on one clip, cold cache, in process."""
    shutil.rmtree(work, ignore_errors=True)
    (work / "in").mkdir(parents=True)
    os.symlink(path, work / "in" / path.name)
    report = prepare(work / "in", work / "out", FRAMES_ONLY, workers=1)
    assert not report.failed, report.failed


def identical(path: Path) -> bool:
    a, b = media.sample_frames(path, decode="selective"), media.sample_frames(path, decode="sequential")
    same = [(f.index, f.pts_ms) for f in a.frames] == [(f.index, f.pts_ms) for f in b.frames]
    return same and all(np.array_equal(x.image, y.image) for x, y in zip(a.frames, b.frames))


def bench_decode(tmp: Path, seconds: float, repeats: int, gop: int, noise: int = NOISE) -> list[dict[str, Any]]:
    rows = []
    for codec in ("libx264", "libx265"):
        path = tmp / f"{codec}-{gop}.mp4"
        noisy_clip(path, "1920x1080", seconds, seed=1, gop=gop, codec=codec, noise=noise)
        mbps = path.stat().st_size * 8 / seconds / 1e6
        med = alternate(
            {
                "bare_auto": lambda p=path: bare_decode(p),
                "bare_pyav_default": lambda p=path: bare_decode(p, None),
                "published": lambda p=path: published_sampler(p),
                "sequential": lambda p=path: sampler(p, "sequential"),
                "selective": lambda p=path: sampler(p, "selective"),
                "prepare": lambda p=path: prepare_one(p, tmp / "work"),
            },
            repeats,
        )
        sel = media.sample_frames(path, decode="selective")
        rows.append(
            {
                "codec": codec,
                "gop": gop,
                "mbps": round(mbps, 1),
                **{f"{k}_s": round(v, 3) for k, v in med.items()},
                "decoded": f"{sel.decoded}/{sel.frame_count}",
                "identical": identical(path),
                "prepare/bare_auto": round(med["prepare"] / med["bare_auto"], 2),
                "published/prepare": round(med["published"] / med["prepare"], 2),
                "selective/sequential": round(med["selective"] / med["sequential"], 2),
            }
        )
    return rows


# --------------------------------------------------------------------------- JPEG


def bench_jpeg(repeats: int) -> list[dict[str, Any]]:
    from PIL import Image

    rgb = synth.draw_frame(7, 1920, 1080)
    bgr = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)

    def pil() -> bytes:
        buf = io.BytesIO()
        Image.fromarray(rgb).save(buf, "JPEG", quality=90)
        return buf.getvalue()

    n = 20
    med = alternate(
        {
            "pil_rgb": lambda: [pil() for _ in range(n)],
            "cv2_rgb": lambda: [images.encode_jpeg(rgb, 90) for _ in range(n)],
            "cv2_bgr": lambda: [images.encode_jpeg(bgr, 90, order="bgr") for _ in range(n)],
        },
        repeats,
    )
    same = pil() == images.encode_jpeg(rgb, 90)
    return [
        {
            "encoder": k,
            "ms_per_1080p_frame": round(1000 * v / n, 2),
            "vs_pil": round(v / med["pil_rgb"], 2),
            "same_bytes_as_pil": same if k != "pil_rgb" else "",
        }
        for k, v in med.items()
    ]


# --------------------------------------------------------------------------- workers


def noisy_clip(
    path: Path,
    size: str,
    seconds: float,
    seed: int,
    wav: Path | None = None,
    gop: int = 30,
    codec: str = "libx264",
    noise: int = NOISE,
) -> None:
    """A distinct, camera-like (sensor noise, motion) clip with B-frames; optional audio track.
    x264/x265 defaults otherwise: closed GOPs for x264, open GOPs for x265."""
    cmd = ["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", f"testsrc2=size={size}:rate=30:d={seconds}"]
    if wav is not None:
        cmd += ["-i", str(wav), "-c:a", "aac", "-shortest"]
    cmd += ["-vf", f"noise=alls={noise}:allf=t:all_seed={seed}", "-c:v", codec, "-preset", "veryfast"]
    cmd += ["-bf", "2", "-g", str(gop), "-pix_fmt", "yuv420p"]
    if codec == "libx265":
        cmd += ["-x265-params", "log-level=error"]
    subprocess.run([*cmd, str(path)], check=True)


def bench_workers(tmp: Path, n_clips: int, repeats: int, anchors: tuple[str, ...]) -> list[dict[str, Any]]:
    root = tmp / "clips"
    root.mkdir(exist_ok=True)
    wav = None
    if "asr" in anchors:
        import soundfile as sf

        wav = tmp / "speech.wav"
        sf.write(wav, synth.speak(["put", "this", "there"], [400, 1200, 2200], 4.0)[0], 16_000)
    for i in range(n_clips):
        noisy_clip(root / f"c{i:02d}.mp4", "1280x720", 4.0, seed=i, wav=wav)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    # (label, workers, decoder/ASR threads per worker; 0 = all cores for one worker, a share for several)
    configs = [("1 worker, threads on all cores", 1, 0), ("1 worker, 1 thread", 1, 1)]
    configs += [(f"{w} workers, cores shared", w, 0) for w in sorted({2, cores})]

    def run(w: int, threads: int) -> None:
        # the CLI in a fresh process, as a user runs it: every config pays its own start-up
        shutil.rmtree(tmp / "wout", ignore_errors=True)
        cmd = [sys.executable, "-c", "from avstack_cli.app import main; main()", "prepare", str(root)]
        cmd += ["--out", str(tmp / "wout"), "--workers", str(w), "--threads", str(threads)]
        subprocess.run([*cmd, "--anchors", ",".join(anchors)], check=True, capture_output=True)

    times = rounds({label: lambda w=w, t=t: run(w, t) for label, w, t in configs}, repeats)
    threaded, single = configs[0][0], configs[1][0]
    return [
        {
            "anchors": ",".join(anchors),
            "config": label,
            "cores": cores,
            "seconds": round(statistics.median(times[label]), 2),
            "clips_per_s": round(n_clips / statistics.median(times[label]), 2),
            "vs_1_worker_threaded": ratio(times, label, threaded),
            "vs_1_worker_1_thread": ratio(times, label, single),
            "rounds": len(times[label]),
        }
        for label, _, _ in configs
    ]


# --------------------------------------------------------------------------- memory


def bench_rss(tmp: Path, seconds: float) -> list[dict[str, Any]]:
    """Peak RSS of `avstack prepare --anchors frames` on one 2160p clip, in a fresh process."""
    root = tmp / "uhd"
    root.mkdir(exist_ok=True)
    path = root / "uhd.mp4"
    if not path.exists():
        cmd = ["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", f"testsrc2=size=3840x2160:rate=30:d={seconds}"]
        cmd += ["-c:v", "libx264", "-preset", "ultrafast", "-bf", "2", "-g", "30", "-pix_fmt", "yuv420p", str(path)]
        subprocess.run(cmd, check=True)
    # VmHWM, not ru_maxrss: Linux carries the parent's high-water mark across fork + exec into ru_maxrss
    code = (
        "import re; from avstack.preparation import prepare, PrepareSettings; "
        f"r = prepare({str(root)!r}, {str(tmp / 'uhd_out')!r}, PrepareSettings(anchors=('frames',)), workers=1); "
        "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1); "
        "print(r.records[0].decode_path, hwm)"
    )
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    wall = time.perf_counter() - t0
    path_used, kb = out.strip().rsplit(" ", 1)
    return [
        {
            "clip": f"{seconds:.0f} s 3840x2160 H.264",
            "peak_rss_mb": round(int(kb) / 1024),
            "seconds": round(wall, 1),
            "decode_path": path_used,
        }
    ]


# --------------------------------------------------------------------------- ASR


def bench_asr(tmp: Path, device: str, n_clips: int, models: list[str]) -> list[dict[str, Any]]:
    """RTF per model and device: clips one by one, batched across clips (transcribe_batch, one
    window per clip) and packed (transcribe_packed, several clips per window)."""
    from avstack import asr

    clips = [
        synth.speak(["put", "this", "cup", "over", "there"], [300 + 40 * i, 900, 1500, 2100, 2700], 4.0, seed=i)[0]
        for i in range(n_clips)
    ]
    audio_s = sum(len(c) for c in clips) / asr.RATE
    rows = []
    for model in models:
        settings = asr.AsrSettings(model=model, device=device, language="en")
        t0 = time.perf_counter()
        asr.transcribe(clips[0], settings)
        load_s = time.perf_counter() - t0
        dev, compute = asr.pick_device(device)
        modes = {
            "sequential": lambda s=settings: [asr.transcribe(c, s) for c in clips],
            "batched": lambda s=settings: asr.transcribe_batch(clips, s),
            "packed": lambda s=settings: asr.transcribe_packed(clips, s),
        }
        for mode, fn in modes.items():
            secs = timed(fn)
            rows.append(
                {
                    "model": model,
                    "device": f"{dev} {compute}",
                    "mode": mode,
                    "clips": n_clips,
                    "first_call_s": round(load_s, 2),
                    "rtf": round(secs / audio_s, 4),
                    "clips_per_s": round(n_clips / secs, 2),
                }
            )
    return rows


def bench_prepare_full(tmp: Path, n_clips: int, device: str, model: str) -> list[dict[str, Any]]:
    """The whole `prepare --anchors full` on generated spoken clips, per ASR mode: per clip in the
    workers, one model fed batches of clips (the GPU path) or packs of clips; cold caches."""
    import soundfile as sf

    from avstack import asr

    root = tmp / "spoken"
    root.mkdir(exist_ok=True)
    for i in range(n_clips):
        audio, _ = synth.speak(
            ["put", "this", "cup", "over", "there"], [300 + 13 * i, 900, 1500, 2100, 2700], 4.0, seed=i
        )
        wav = tmp / f"s{i}.wav"
        sf.write(wav, audio, asr.RATE)
        noisy_clip(root / f"c{i:03d}.mp4", "1280x720", 4.0, seed=i, wav=wav)
    rows = []
    for mode in ("single", "packed", "batched"):
        settings = PrepareSettings(asr_model=model, asr_device=device, lang="en", asr_mode=mode)
        shutil.rmtree(tmp / "full_out", ignore_errors=True)
        secs = timed(lambda s=settings: prepare(root, tmp / "full_out", s))
        dev, compute = asr.pick_device(device)
        rows.append(
            {
                "clips": n_clips,
                "model": model,
                "device": f"{dev} {compute}",
                "asr_mode": mode,
                "seconds": round(secs, 1),
                "clips_per_s": round(n_clips / secs, 2),
            }
        )
    return rows


def bench_ray(tmp: Path, n_clips: int, repeats: int) -> list[dict[str, Any]]:
    """`prepare --anchors frames` on the same clips: Ray Data on a local 2-node cluster (1 CPU
    each) vs the local executor with 2 workers. The cluster's start and the first run's worker
    warm-up are reported apart; then rounds alternate, each on a fresh output folder."""
    import ray
    from ray.cluster_utils import Cluster

    from avstack.tasks import all_layouts

    root = tmp / "ray_clips"
    root.mkdir(exist_ok=True)
    for i in range(n_clips):
        noisy_clip(root / f"c{i:02d}.mp4", "1280x720", 4.0, seed=i)
    settings = PrepareSettings(anchors=("frames",))
    t0 = time.perf_counter()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, log_to_driver=False, include_dashboard=False)
    cluster.wait_for_nodes()
    start_s = time.perf_counter() - t0
    try:
        warm = tmp / "ray_warm"
        t0 = time.perf_counter()
        prepare(root, warm, settings, layouts=all_layouts(), executor="ray")
        first_s = time.perf_counter() - t0

        stamps: dict[str, list[tuple[float, float, float]]] = {"local": [], "ray": []}

        def run(executor: str) -> None:
            """One cold run; records (start-up: time to the first clip, steady clips/s after it, total)."""
            out = tmp / f"out_{executor}"
            shutil.rmtree(out, ignore_errors=True)
            seen: list[float] = []

            def clock(items: Any, n: int) -> Any:
                for item in items:
                    seen.append(time.perf_counter())
                    yield item

            t0 = time.perf_counter()
            prepare(root, out, settings, workers=2, progress=clock, layouts=all_layouts(), executor=executor)
            total = time.perf_counter() - t0
            steady = (len(seen) - 1) / (seen[-1] - seen[0]) if len(seen) > 1 and seen[-1] > seen[0] else 0.0
            stamps[executor].append((seen[0] - t0, steady, total))

        for _ in range(repeats):  # alternating, so both meet the same machine weather
            run("local")
            run("ray")
    finally:
        ray.shutdown()
        cluster.shutdown()
    rows = []
    local_steady = statistics.median(s for _, s, _ in stamps["local"])
    for executor, label in (("local", "local, 2 workers"), ("ray", "ray, 2 nodes x 1 CPU")):
        first = statistics.median(f for f, _, _ in stamps[executor])
        steady = statistics.median(s for _, s, _ in stamps[executor])
        total = statistics.median(t for _, _, t in stamps[executor])
        rows.append(
            {
                "executor": label,
                "clips": n_clips,
                "run_s": round(total, 2),
                "startup_s (to 1st clip)": round(first, 2),
                "steady_clips_per_s": round(steady, 2),
                "steady_vs_local": round(steady / local_steady, 2),
                "cluster_start_s": round(start_s, 1) if executor == "ray" else None,
                "first_run_s": round(first_s, 1) if executor == "ray" else None,
            }
        )
    return rows


def bench_driver_rss(tmp: Path, counts: tuple[int, ...] = (200, 2000)) -> list[dict[str, Any]]:
    """Peak RSS of the `prepare` driver (a fresh process, VmHWM) for N tiny clips: the manifest is
    written as clips finish, so the driver holds clip ids, not records."""
    src = tmp / "tiny.mp4"
    synth.write_clip(src, synth.ClipSpec(width=64, height=48, duration_s=0.5, fps=10))
    rows = []
    for n in counts:
        root = tmp / f"tiny_{n}"
        root.mkdir(exist_ok=True)
        for i in range(n):
            if not (root / f"c{i:05d}.mp4").exists():
                shutil.copy(src, root / f"c{i:05d}.mp4")
        code = (
            "import re, sys\nfrom avstack_cli.app import main\nsys.argv = ['avstack', *sys.argv[1:]]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('HWM', re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1), file=sys.stderr)"
        )
        out = tmp / f"tiny_out_{n}"
        shutil.rmtree(out, ignore_errors=True)
        cmd = [sys.executable, "-c", code, "prepare", str(root), "--out", str(out), "--anchors", "frames"]
        t0 = time.perf_counter()
        res = subprocess.run([*cmd, "--workers", "2"], capture_output=True, text=True, check=True)
        secs = time.perf_counter() - t0
        hwm = next(int(x.split()[1]) for x in res.stderr.splitlines() if x.startswith("HWM"))
        rows.append({"clips": n, "driver_peak_rss_mb": round(hwm / 1024, 1), "seconds": round(secs, 1)})
    base = rows[0]["driver_peak_rss_mb"]
    for r in rows:
        r["vs_smallest"] = round(r["driver_peak_rss_mb"] / base, 2)
    return rows


SECTIONS = ("decode", "jpeg", "workers", "rss", "asr", "prepare_full", "ray", "driver_rss")


def machine() -> str:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"{platform.machine()}, {cores} cores, python {platform.python_version()}, av {av.__version__}, "
        f"opencv {cv2.__version__}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="decode,jpeg,workers,asr", help=f"comma list of {', '.join(SECTIONS)}")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0, help="1080p decode clip length")
    ap.add_argument("--gop", type=int, default=30)
    ap.add_argument("--noise", type=int, default=NOISE, help="sensor-noise strength of the decode clips")
    ap.add_argument("--clips", type=int, default=12, help="clips for the workers and ASR sections")
    ap.add_argument("--anchors", default="frames", help="anchors for the workers section (frames or full)")
    ap.add_argument("--rss-seconds", type=float, default=60.0)
    ap.add_argument("--device", default="auto", help="ASR device: auto, cpu, cuda")
    ap.add_argument("--models", default="tiny.en,base")
    ap.add_argument("--json", type=Path, default=Path("benchmarks/perf.json"))
    args = ap.parse_args()
    only = [s for s in args.only.split(",") if s]
    result: dict[str, Any] = {"machine": machine()}
    print(f"machine: {result['machine']}\n")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        if "decode" in only:
            rows = result["decode"] = bench_decode(tmp, args.seconds, args.repeats, args.gop, args.noise)
            print("## Decode: 2 fps + last frame from 1080p, JPEG included\n")
            print(table(rows, list(rows[0])) + "\n")
        if "jpeg" in only:
            rows = result["jpeg"] = bench_jpeg(args.repeats)
            print("## JPEG encoders\n\n" + table(rows, list(rows[0])) + "\n")
        if "workers" in only:
            anchors = ("frames", "audio", "asr") if args.anchors == "full" else tuple(args.anchors.split(","))
            rows = result["workers"] = bench_workers(tmp, args.clips, args.repeats, anchors)
            print(f"## prepare on {args.clips} clips (1280x720, 4 s)\n\n" + table(rows, list(rows[0])) + "\n")
        if "rss" in only:
            rows = result["rss"] = bench_rss(tmp, args.rss_seconds)
            print("## Peak memory\n\n" + table(rows, list(rows[0])) + "\n")
        if "asr" in only:
            rows = result["asr"] = bench_asr(tmp, args.device, args.clips, args.models.split(","))
            print("## ASR speed\n\n" + table(rows, list(rows[0])) + "\n")
        if "prepare_full" in only:
            rows = result["prepare_full"] = bench_prepare_full(tmp, args.clips, args.device, args.models.split(",")[0])
            print("## prepare --anchors full\n\n" + table(rows, list(rows[0])) + "\n")
        if "ray" in only:
            rows = result["ray"] = bench_ray(tmp, args.clips, args.repeats)
            print(f"## Ray vs local on {args.clips} clips\n\n" + table(rows, list(rows[0])) + "\n")
        if "driver_rss" in only:
            rows = result["driver_rss"] = bench_driver_rss(tmp)
            print("## prepare driver memory\n\n" + table(rows, list(rows[0])) + "\n")
    args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
