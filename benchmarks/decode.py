"""Decode benchmark: avstack's sampler vs the published sampler vs a bare full PyAV decode.

Generated 10 s 1080p H.264 and HEVC clips (B-frames); every method in the same run,
alternating, so ratios survive a noisy machine. Prints a table and writes JSON.

    python benchmarks/decode.py [--seconds 10] [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

import av
import cv2

from avstack import media, synth


def published_sampler(path: Path, fps: float = 2.0) -> int:
    """The benchmark's own method: seek by frame number per 2 fps target, then the last frame; PIL JPEG q95."""
    from PIL import Image

    cap = cv2.VideoCapture(str(path))
    native = cap.get(cv2.CAP_PROP_FPS)
    count = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
    duration = count / native
    n, t = 0, 0.0
    while t < duration:
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


def avstack_sampler(path: Path, thread_type: str = "AUTO") -> int:
    sample = media.sample_frames(path, fps=2.0, thread_type=thread_type)
    for f in sample.frames:
        media.encode_jpeg(f.image, 95)
    return len(sample.frames)


def bare_decode(path: Path) -> int:
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        s.thread_type = "AUTO"
        return sum(1 for _ in c.decode(s))


METHODS = {
    "avstack": avstack_sampler,
    "published": published_sampler,
    "bare_decode": bare_decode,
    "avstack_FRAME": lambda p: avstack_sampler(p, "FRAME"),
    "avstack_SLICE": lambda p: avstack_sampler(p, "SLICE"),
    "avstack_NONE": lambda p: avstack_sampler(p, "NONE"),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--gop", type=int, default=30, help="keyframe interval of the generated clips")
    ap.add_argument("--json", type=Path, default=Path("benchmarks/decode.json"))
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for codec in ("libx264", "libx265"):
            path = Path(tmp) / f"{codec}.mp4"
            synth.write_clip(path, synth.ClipSpec(1920, 1080, 30, args.seconds, codec=codec, crf=23, gop=args.gop))
            times: dict[str, list[float]] = {m: [] for m in METHODS}
            for _ in range(args.repeats):
                for name, fn in METHODS.items():
                    t0 = time.perf_counter()
                    fn(path)
                    times[name].append(time.perf_counter() - t0)
            med = {m: statistics.median(v) for m, v in times.items()}
            rows.append(
                {
                    "codec": codec,
                    "gop": args.gop,
                    **{f"{m}_s": round(v, 3) for m, v in med.items()},
                    "published/avstack": round(med["published"] / med["avstack"], 2),
                    "avstack/bare": round(med["avstack"] / med["bare_decode"], 2),
                }
            )
    print(
        f"machine: {platform.machine()} {platform.processor() or ''}, python {platform.python_version()}, "
        f"av {av.__version__}"
    )
    cols = ["codec", "gop", *(f"{m}_s" for m in METHODS), "published/avstack", "avstack/bare"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")
    args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
