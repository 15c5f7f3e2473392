"""The per-clip pipeline a researcher writes by hand, the baseline `prepare` is measured against.

For each clip: PyAV decodes the video, keeps the first frame at or after each 0.5 s step (2 fps,
by pts) and writes it as a JPEG (OpenCV, quality 90); PyAV decodes the audio resampled to 16 kHz
mono; faster-whisper transcribes it with word timestamps (the model loaded once, CPU int8, its
documented default for a CPU, all cores; `--device cuda --compute-type float16` on a GPU); the words
go to one JSON file per clip. No cache, no alignment, no checks: what "PyAV frames + faster-whisper
word timestamps" costs.

    python benchmarks/handwritten.py CLIPS_DIR OUT_DIR [--model tiny.en]
"""

from __future__ import annotations

import argparse
import json
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np


def frames(path: Path, out: Path, fps: float = 2.0) -> int:
    step, next_t, n = Fraction(1) / Fraction(fps), Fraction(0), 0
    with av.open(str(path)) as c:
        stream = c.streams.video[0]
        stream.thread_type = "AUTO"
        for frame in c.decode(stream):
            if frame.pts is None:
                continue
            t = frame.pts * stream.time_base
            if t < next_t:
                continue
            cv2.imwrite(str(out / f"{n:05d}.jpg"), frame.to_ndarray(format="bgr24"), [cv2.IMWRITE_JPEG_QUALITY, 90])
            n += 1
            next_t += step
            while next_t <= t:
                next_t += step
    return n


def audio(path: Path) -> np.ndarray:
    chunks = []
    with av.open(str(path)) as c:
        if not c.streams.audio:
            return np.zeros(0, np.float32)
        resampler = av.AudioResampler(format="flt", layout="mono", rate=16_000)
        for frame in c.decode(c.streams.audio[0]):
            for f in resampler.resample(frame):
                chunks.append(f.to_ndarray().reshape(-1))
        for f in resampler.resample(None):
            chunks.append(f.to_ndarray().reshape(-1))
    return np.concatenate(chunks) if chunks else np.zeros(0, np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("clips", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--model", default="tiny.en")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda (the GPU pipeline: float16)")
    ap.add_argument("--compute-type", default="int8", help="faster-whisper's documented default: int8 on a CPU")
    args = ap.parse_args()
    from faster_whisper import WhisperModel

    from avstack.asr.models import resolve_model  # only to find the offline weights on disk

    model = WhisperModel(resolve_model(args.model), device=args.device, compute_type=args.compute_type)
    for path in sorted(p for p in args.clips.iterdir() if p.suffix.lower() in (".mp4", ".mov", ".mkv")):
        out = args.out / path.stem
        out.mkdir(parents=True, exist_ok=True)
        n = frames(path, out)
        samples = audio(path)
        segments = model.transcribe(samples, language="en", word_timestamps=True)[0] if len(samples) else []
        words = [
            {"text": w.word.strip(), "begin_time": round(w.start * 1000), "end_time": round(w.end * 1000)}
            for s in segments
            for w in s.words or []
        ]
        (out / "words.json").write_text(json.dumps({"frames": n, "words": words}))


if __name__ == "__main__":
    main()
