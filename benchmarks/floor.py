"""`prepare --anchors frames` against a bare decode, the floor, and the decoders people pick instead.

The job: 4 camera-like 1080p 10 s clips (x264 GOP 30 / 60 / 250 with B-frames, x265 GOP 60), 2 fps
plus the last frame, q90 JPEGs. Every method is a whole process (start-up included), methods
alternate within each round, and each figure is the median over rounds of its ratio to the bare
decode timed in the same round (the machine is noisy; ratios survive it).

- bare: every frame decoded by PyAV with frame threads, nothing else (the baseline).
- floor: only the frames a selective plan needs, its spans of all clips on one pool of as many
  threads as cores, and the JPEGs encoded (not written): what prepare could cost with no cache,
  manifest, hashing or processes. `floor_cpu` is the same work's CPU seconds over the cores, the
  bound no scheduling beats.
- peers (with `--peer-python` naming an interpreter that has them): torchcodec
  `get_frames_played_at` and decord `get_batch`, JPEGs by OpenCV as ours.

`--profile` adds where the CPU of `prepare --anchors frames` goes, stage by stage (one worker,
one thread, so each stage's thread CPU is its own): `PYTHONPATH=<old checkout>/src` profiles an
older avstack the same way (the before/after table in docs/performance.md).

    python benchmarks/floor.py --rounds 3 --profile --peer-python /work/peers/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from before import checkout  # noqa: E402

CLIPS = (("libx264", 30), ("libx264", 60), ("libx264", 250), ("libx265", 60))

BARE = """
import av, sys
for p in sys.argv[1:]:
    with av.open(p) as c:
        s = c.streams.video[0]
        s.thread_type = "AUTO"
        for _ in c.decode(s):
            pass
"""

FLOOR = """
import sys
from concurrent.futures import ThreadPoolExecutor
from avstack import media
from avstack.media import images, spans
from avstack.media.decode import make_frame
from avstack.limits import cores
threads = cores()
readers = [media.FrameReader(p, media.Sampling(threads=threads), pixel_format="bgr24") for p in sys.argv[1:]]
def make(r):
    return lambda i, rel, f: make_frame(i, rel, f, r.info.rotation, None, "bgr24")
def jpeg(frame):
    return len(images.encode_jpeg(frame.image, 90, None, "bgr"))
with ThreadPoolExecutor(threads) as pool:
    jobs = [pool.submit(spans.decode_span, r.path, s, r._scan.decode_order, r.plan, r._origin, make(r), jpeg)
            for r in readers for s in r.spans()]
    print(sum(len(j.result()[0]) for j in jobs))
"""

PEERS = {
    "torchcodec": """
import sys, cv2
from torchcodec.decoders import VideoDecoder
for p in sys.argv[1:]:
    d = VideoDecoder(p, num_ffmpeg_threads=0)
    m = d.metadata
    t0, t1 = m.begin_stream_seconds or 0.0, m.end_stream_seconds
    times = [t0 + k / 2 for k in range(int((t1 - t0) * 2) + 1) if t0 + k / 2 < t1]
    batch = d.get_frames_played_at(seconds=times).data
    frames = [batch[i] for i in range(len(batch))] + [d[len(d) - 1]]
    for f in frames:
        bgr = cv2.cvtColor(f.permute(1, 2, 0).numpy(), cv2.COLOR_RGB2BGR)
        cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, 90])
""",
    "decord": """
import sys, cv2
from decord import VideoReader
for p in sys.argv[1:]:
    vr = VideoReader(p)
    n, fps = len(vr), vr.get_avg_fps()
    idx = sorted({min(n - 1, int(k / 2 * fps)) for k in range(int(n / fps * 2) + 1)} | {n - 1})
    for f in vr.get_batch(idx).asnumpy():
        cv2.imencode(".jpg", cv2.cvtColor(f, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 90])
""",
}


def make_clips(root: Path, seconds: float = 10.0) -> list[Path]:
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for codec, gop in CLIPS:
        path = root / f"{codec}_g{gop}.mp4"
        if not path.exists():
            cmd = ["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", f"testsrc2=size=1920x1080:rate=30:d={seconds}"]
            cmd += ["-vf", f"noise=alls=8:allf=t:all_seed={gop}", "-c:v", codec, "-preset", "veryfast"]
            cmd += ["-bf", "2", "-g", str(gop), "-pix_fmt", "yuv420p"]
            cmd += ["-x265-params", "log-level=error"] if codec == "libx265" else []
            subprocess.run([*cmd, str(path)], check=True)
        paths.append(path)
    return paths


def has(python: str, module: str) -> bool:
    return subprocess.run([python, "-c", f"import {module}"], capture_output=True).returncode == 0


def methods(
    clips: list[Path], root: Path, work: Path, peer_python: str | None, before: str | None
) -> tuple[dict[str, list[str]], dict[str, dict[str, str]]]:
    py, files = sys.executable, [str(c) for c in clips]
    prepare = [py, "-c", "from avstack_cli.app import main; main()", "prepare", str(root), "--anchors", "frames"]
    out: dict[str, list[str]] = {
        "bare PyAV full decode (frame threads)": [py, "-c", BARE, *files],
        "avstack prepare --anchors frames (default)": [*prepare, "--out", str(work / "a")],
        "avstack prepare --anchors frames --workers 1": [*prepare, "--out", str(work / "b"), "--workers", "1"],
    }
    envs: dict[str, dict[str, str]] = {}
    if before:  # the same job with avstack as it was at that revision (its default settings)
        label = f"avstack prepare --anchors frames at {before}"
        out[label] = [*prepare, "--out", str(work / "c")]
        envs[label] = checkout(before, work / "before")
    if has_spans():  # an older avstack (PYTHONPATH, for the "before" profile) has no spans
        out["floor: needed frames only, spans on all cores, JPEG"] = [py, "-c", FLOOR, *files]
    for name, code in PEERS.items():
        if peer_python and has(peer_python, name):
            out[f"{name} + JPEG"] = [peer_python, "-c", code, *files]
    return out, envs


def has_spans() -> bool:
    from avstack import media

    return hasattr(media.FrameReader, "spans")


def floor_cpu(clips: list[Path]) -> float:
    """CPU seconds of the floor's work on one thread (decode of the needed frames, colour, JPEG)."""
    code = FLOOR.replace("threads = cores()", "threads = 1")
    t0 = os.times()
    subprocess.run([sys.executable, "-c", code, *map(str, clips)], check=True, capture_output=True)
    t1 = os.times()
    return (t1.children_user - t0.children_user) + (t1.children_system - t0.children_system)


def run_rounds(
    cmds: dict[str, list[str]], envs: dict[str, dict[str, str]], clips: list[Path], rounds: int, work: Path
) -> dict[str, Any]:
    times: dict[str, list[float]] = {k: [] for k in [*cmds, *(["floor_cpu / cores"] if has_spans() else [])]}
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    for _ in range(rounds):
        for name, cmd in cmds.items():
            for sub in "abc":
                shutil.rmtree(work / sub, ignore_errors=True)
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, env=envs.get(name))
            times[name].append(time.perf_counter() - t0)
        if has_spans():
            times["floor_cpu / cores"].append(floor_cpu(clips) / cores)
    base = next(iter(cmds))
    return {
        name: {
            "seconds": round(statistics.median(v), 2),
            "vs_bare": round(statistics.median(a / b for a, b in zip(v, times[base])), 3),
        }
        for name, v in times.items()
    }


PROFILE = r"""
import json, sys, time
from avstack import preparation
from avstack.media import frames, images
from avstack.preparation import stages
cpu = {}
def timed(name, fn):
    def wrap(*a, **k):
        t0 = time.thread_time()
        try:
            return fn(*a, **k)
        finally:
            cpu[name] = cpu.get(name, 0.0) + time.thread_time() - t0
    return wrap
stages.sha256_file = timed("hash (sha256 of the file)", stages.sha256_file)
frames.describe = timed("probe (demux pass, first frame)", frames.describe)
frames.scan_packets = timed("packet scan for the plan", frames.scan_packets)
frames.make_frame = timed("colour conversion (to BGR)", frames.make_frame)
images.encode_jpeg = timed("JPEG encode", images.encode_jpeg)
images.atomic_write = timed("file writes", images.atomic_write)
stages.write_json_atomic = timed("cache index and manifest writes", stages.write_json_atomic)
c0 = time.process_time()
preparation.prepare(sys.argv[1], sys.argv[2], preparation.PrepareSettings(anchors=("frames",), threads=1), workers=1)
total = time.process_time() - c0
inner = sum(v for k, v in cpu.items() if k not in ("file writes",))
cpu["decode (needed frames and their references)"] = total - inner
print(json.dumps({"stages": cpu, "cpu_s": total}))
"""


def profile(root: Path, work: Path, rounds: int) -> dict[str, Any]:
    """CPU seconds per stage of `prepare --anchors frames` (one worker, one thread, in process):
    medians over rounds."""
    runs = []
    for _ in range(rounds):
        shutil.rmtree(work / "p", ignore_errors=True)
        cmd = [sys.executable, "-c", PROFILE, str(root), str(work / "p")]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
    names = list(runs[0]["stages"])
    stages = {n: round(statistics.median(r["stages"].get(n, 0.0) for r in runs), 3) for n in names}
    return {"stages": stages, "cpu_s": round(statistics.median(r["cpu_s"] for r in runs), 2)}


def startup() -> float:
    """Wall seconds of an interpreter importing what `prepare --anchors frames` needs (the main
    process and each worker pay it)."""
    code = "import avstack_cli.app, avstack.preparation, av, cv2"
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="also the per-stage CPU profile")
    ap.add_argument("--peer-python", help="an interpreter with torchcodec and/or decord installed")
    ap.add_argument("--before", help="also avstack at this git revision, in the same rounds")
    ap.add_argument("--json", type=Path, default=Path("benchmarks/floor.json"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        clips = make_clips(tmp / "clips")
        result: dict[str, Any] = {"clips": [c.name for c in clips], "rounds": args.rounds}
        cmds, envs = methods(clips, tmp / "clips", tmp, args.peer_python, args.before)
        result["methods"] = run_rounds(cmds, envs, clips, args.rounds, tmp)
        print("| method | s (median) | vs bare decode |\n|---|---|---|")
        for name_, row in result["methods"].items():
            print(f"| {name_} | {row['seconds']} | {row['vs_bare']} |")
        if args.profile:
            result["startup_s"] = round(statistics.median(startup() for _ in range(3)), 3)
            result["profile"] = profile(tmp / "clips", tmp, args.rounds)
            print(f"\nstart-up (imports) {result['startup_s']} s; CPU by stage, prepare one worker one thread:")
            for stage, secs in sorted(result["profile"]["stages"].items(), key=lambda kv: -kv[1]):
                print(f"| {stage} | {secs} |")
    args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
