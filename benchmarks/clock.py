"""One clock, side by side: where avstack and the published OpenCV sampler put a flash and a beep,
on files built the way phones, cameras and ffmpeg pipelines build them (avstack.synthetic.awkward).

    python benchmarks/clock.py [--json benchmarks/clock.json]

Per file: the flash error (the first white frame's time as each method states it, less its
presentation time) and the beep error (its onset in the audio each method hands to ASR, less its
presentation time). The OpenCV sampler is the EcoG authors' method (benchmarks/perf.py
`published_sampler`): frame k is taken to be at k / CAP_PROP_FPS; its audio is the decoded samples
laid end to end from the first one, as avstack did before the one clock.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import av
import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from avstack import media
from avstack.synthetic import awkward


def avstack_flash_ms(path: Path) -> int:
    sample = media.sample_frames(path, fps=100)  # every frame shown on a 10 ms grid
    return next(f.pts_ms for f in sample.frames if awkward.white(f.image))


def opencv_flash_ms(path: Path) -> float:
    cap = cv2.VideoCapture(str(path))
    fps = cap.get(cv2.CAP_PROP_FPS)
    k = 0
    while True:
        ok, frame = cap.read()
        if not ok:
            return float("nan")
        if awkward.white(frame):
            cap.release()
            return k / fps * 1000
        k += 1


def avstack_beep_ms(path: Path) -> float:
    samples = media.load_audio(path, origin=media.clip_origin(media.probe(path)))
    return awkward.onset_ms(samples, media.AUDIO_RATE) if samples is not None else float("nan")


def end_to_end_beep_ms(path: Path) -> float:
    """The first audio stream's samples laid end to end from the first one (no timestamps)."""
    with av.open(str(path)) as c:
        resampler = av.AudioResampler(format="flt", layout="mono", rate=16_000)
        chunks = [o.to_ndarray().reshape(-1) for f in c.decode(audio=0) for o in resampler.resample(f)]
    return awkward.onset_ms(np.concatenate(chunks), 16_000)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if not awkward.available():
        sys.exit("needs ffmpeg and ffprobe")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        truths = awkward.build(root, speech=False)
        rows = []
        for name, truth in sorted(truths.items()):
            path = root / name
            rows.append(
                {
                    "file": name,
                    "avstack_flash": avstack_flash_ms(path) - truth.flash_ms,
                    "opencv_flash": round(opencv_flash_ms(path) - truth.flash_ms),
                    "avstack_beep": round(avstack_beep_ms(path) - truth.beep_ms),
                    "end_to_end_beep": round(end_to_end_beep_ms(path) - truth.beep_ms),
                }
            )
    cols = ["file", "avstack_flash", "opencv_flash", "avstack_beep", "end_to_end_beep"]
    print("| file | avstack flash (ms) | OpenCV sampler flash (ms) | avstack beep (ms) | end-to-end audio beep (ms) |")
    print("|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(f"{r[c]:+d}" if isinstance(r[c], int) else str(r[c]) for c in cols) + " |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
