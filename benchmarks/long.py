"""Hour-long prepare, bounded (#59): one file made here, with flashes and spoken words at known
times, through `prepare` three ways, each beside a bare full decode of the same file in the same
run (machines are noisy: the claims are ratios):

- `--anchors full --fps 0.5` (frames, audio, tiny.en word timing), in a fresh process: its peak
  RSS (VmHWM), every flash frame at its pts and every word on the clock;
- `--anchors frames --fps 0.5`: its time over the bare decode's (bound 0.85);
- `--anchors frames --max-frames 64`: its time over the bare decode's (bound 0.1: it decodes
  only near those frames).

    python benchmarks/long.py                  # -> benchmarks/long.json (about 10 minutes on 2 cores)
    python benchmarks/long.py --minutes 10     # a shorter file, to try it

Continuous speech (#69), beside that sparse hour: a licence text read aloud without a break
(avstack.synthetic.longread: every word's true time known) over a 2 fps test pattern, at each
length asked, through `prepare --anchors full --fps 0.5 --lang en` in a fresh process: peak RSS
(the prepare's own VmHWM and its largest child's), seconds of prepare per second of audio, and
word-edge error in the first and the last 10 minutes (drift):

    python benchmarks/long.py --continuous 5,30,120 --model tiny.en   # -> benchmarks/long_continuous_tiny_en.json
    python benchmarks/long.py --continuous 5,30 --model base          # -> benchmarks/long_continuous_base.json
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import av
import soundfile as sf

from avstack.synthetic import synth
from avstack.synthetic.awkward import ffmpeg_exe

RATE = 16_000
FPS = 10
SIZE = "640x360"
GOP = 50  # a keyframe every 5 s, as cameras and phones write
CPU_SECONDS: list[float] = []  # each prepare's CPU seconds (a shared machine moves the wall, less the CPU)
# distinct sentences in turn: Whisper's VAD joins the speech of a sparse hour into a few windows, and
# one sentence said over and over there reads as a repetition loop (tiny.en: "this, this, this...")
SENTENCES = (
    ("open", "the", "door"), ("take", "your", "cup"), ("look", "over", "here"), ("turn", "it", "left"),
    ("pick", "that", "up"), ("move", "this", "there"), ("close", "the", "box"), ("wash", "your", "hands"),
)  # fmt: skip


def flash_times(minutes: float) -> list[float]:
    """A white flash every 5 minutes (on the 0.5 fps grid: a sampled frame lands in each), first at 1 min."""
    return [60.0 + 300.0 * k for k in range(int((minutes * 60 - 60) // 300) + 1) if 60.0 + 300.0 * k < minutes * 60]


def make_hour(path: Path, minutes: float) -> tuple[list[float], list[dict]]:
    """The file: a moving test pattern with white flashes (0.4 s) and a sentence spoken every 2
    minutes over low noise; returns the flash times and the true word times."""
    seconds = minutes * 60
    flashes = flash_times(minutes)
    starts = [int(1000 * (30 + 120 * k + 0.6 * j)) for k in range(int((seconds - 35) // 120) + 1) for j in range(3)]
    words = [SENTENCES[(i // 3) % len(SENTENCES)][i % 3] for i in range(len(starts))]
    audio, truth = synth.speak(words, starts, seconds, noise_level=0.002)
    wav = path.with_suffix(".wav")
    sf.write(wav, audio, RATE, subtype="PCM_16")
    enable = "+".join(f"between(t,{t:.1f},{t + 0.4:.1f})" for t in flashes)
    cmd = [
        ffmpeg_exe() or "ffmpeg",
        "-v",
        "error",
        "-y",
        "-f",
        "lavfi",
        "-i",
        f"testsrc2=size={SIZE}:rate={FPS}:d={seconds}",
    ]
    cmd += ["-i", str(wav), "-vf", f"drawbox=x=0:y=0:w=iw:h=ih:color=white:t=fill:enable='{enable}'"]
    cmd += ["-c:v", "libx264", "-preset", "veryfast", "-bf", "2", "-g", str(GOP), "-pix_fmt", "yuv420p"]
    cmd += ["-c:a", "aac", "-shortest", str(path)]
    subprocess.run(cmd, check=True)
    wav.unlink()
    return flashes, truth


def bare_decode(path: Path) -> float:
    t0 = time.perf_counter()
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        s.thread_type = "AUTO"
        for _ in c.decode(s):
            pass
    return time.perf_counter() - t0


def prepare(path: Path, out: Path, *args: str) -> tuple[float, int]:
    """`avstack prepare` on the file in a fresh process: (seconds, peak RSS in MB); its CPU
    seconds (user and system, its own children's included) in CPU_SECONDS[-1]."""
    code = (
        "import re, sys; from avstack_cli.app import main; sys.argv = ['avstack'] + sys.argv[1:]\n"
        "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\nelse:\n    code = 0\n"
        "print('HWM', re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1), file=sys.stderr)\n"
        "sys.exit(code)"
    )
    t0, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-c", code, "prepare", str(path.parent), "--out", str(out), *args],
                          capture_output=True, text=True)  # fmt: skip
    wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU_SECONDS.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"prepare {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    hwm = int(done.stderr.rsplit("HWM", 1)[1].split()[0])
    return wall, round(hwm / 1024)


def check_full(out: Path, flashes: list[float], truth: list[dict]) -> dict:
    """Every flash frame white at its pts (and no other frame), every word on the clock."""
    import cv2

    from avstack.manifest import load_manifest

    (rec,) = load_manifest(out)
    white = {f.pts_ms for f in rec.frames if cv2.imread(str(out / f.path)).mean() > 200}
    expected = {round(t * 1000) for t in flashes}
    words = (rec.asr.to_ecog() if rec.asr else {}).get("words", [])
    errors = []
    for t in truth:  # the nearest recognized word of the same text
        near = [w for w in words if w["text"].strip(" .,!?").lower() == t["text"]]
        if near:
            errors.append(min(abs(w["begin_time"] - t["begin_time"]) for w in near))
    return {
        "frames": len(rec.frames),
        "frame_pts_on_grid": all(f.pts_ms % 2000 == 0 for f in rec.frames[:-1]),  # the last: the clip's end
        "flash_frames_expected": sorted(expected),
        "flash_frames_found": sorted(white),
        "words_true": len(truth),
        "words_found": len(errors),
        "word_onset_error_ms_median": statistics.median(errors) if errors else None,
        "word_onset_error_ms_p90": sorted(errors)[int(0.9 * (len(errors) - 1))] if errors else None,
    }


def make_read(path: Path, minutes: float) -> list[dict]:
    """The continuous read over a 2 fps test pattern; its true word times."""
    from avstack.synthetic.longread import read_aloud

    audio, truth = read_aloud(minutes * 60)
    wav = path.with_suffix(".wav")
    sf.write(wav, audio, RATE, subtype="PCM_16")
    del audio
    cmd = [ffmpeg_exe() or "ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", f"testsrc2=size={SIZE}:rate=2",
           "-i", str(wav), "-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", "-c:a", "aac",
           "-shortest", str(path)]  # fmt: skip
    subprocess.run(cmd, check=True)
    wav.unlink()
    return truth


def edge_errors(words: list[dict], truth: list[dict], lo_ms: int, hi_ms: int) -> dict:
    """Begin and end errors (ms) of the words said in [lo_ms, hi_ms), each matched to the nearest
    recognized word of its text within 1 s; how many were found."""
    by_text: dict[str, list[dict]] = {}
    for w in words:
        by_text.setdefault(w["text"].strip(" .,!?;:'\"").lower(), []).append(w)
    errors, signed, said, found = [], [], 0, 0
    for t in truth:
        if not lo_ms <= t["begin_time"] < hi_ms:
            continue
        said += 1
        near = min(by_text.get(t["text"], []), key=lambda w: abs(w["begin_time"] - t["begin_time"]), default=None)
        if near is not None and abs(near["begin_time"] - t["begin_time"]) <= 1000:
            found += 1
            signed += [near["begin_time"] - t["begin_time"], near["end_time"] - t["end_time"]]
    errors = sorted(abs(e) for e in signed)
    return {
        "said": said,
        "found": found,
        "edge_error_ms_median": statistics.median(errors) if errors else None,
        "edge_error_ms_p90": errors[int(0.9 * (len(errors) - 1))] if errors else None,
        # a clock that drifts moves every edge one way: the signed median shifts, not only the tail
        "signed_edge_error_ms_median": statistics.median(signed) if signed else None,
    }


def continuous(minutes: list[float], model: str, keep: Path | None = None) -> dict:
    """Each length of continuous speech through `prepare --anchors full` in a fresh process
    (`keep`: each length's words and true words written there, to look at after)."""

    from avstack.manifest import load_manifest

    runs = {}
    for m in minutes:
        with tempfile.TemporaryDirectory() as name:
            tmp = Path(name)
            (tmp / "in").mkdir()
            path = tmp / "in" / "read.mp4"
            truth = make_read(path, m)
            before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            wall, rss = prepare(path, tmp / "out", "--anchors", "full", "--fps", "0.5", "--asr-model", model,
                                "--lang", "en", "--workers", "1")  # fmt: skip
            child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            (rec,) = load_manifest(tmp / "out")
            words = (rec.asr.to_ecog() if rec.asr else {}).get("words", [])
            last = rec.duration_ms
            if keep is not None:
                keep.mkdir(parents=True, exist_ok=True)
                (keep / f"read_{m:g}_{model}.json").write_text(json.dumps({"words": words, "truth": truth}))
            runs[f"{m:g}"] = {
                "minutes": m,
                "words_said": len(truth),
                "words_recognized": len(words),
                "seconds": round(wall, 1),
                "seconds_per_audio_second": round(wall / (m * 60), 4),
                "cpu_seconds": round(CPU_SECONDS[-1], 1),
                "cpu_seconds_per_audio_second": round(CPU_SECONDS[-1] / (m * 60), 4),
                "peak_rss_mb": rss,
                "largest_process_peak_rss_mb": round(child / 1024) if child > before else None,
                "windows": len((rec.asr.to_ecog() if rec.asr else {}).get("timing", {}).get("windows_ms") or [0]),
                "first_10_min": edge_errors(words, truth, 0, 600_000),
                "last_10_min": edge_errors(words, truth, max(0, last - 600_000), last + 1),
            }
            print(json.dumps(runs[f"{m:g}"]), flush=True)
    short, long_ = runs[f"{min(minutes):g}"], runs[f"{max(minutes):g}"]
    return {
        "model": model,
        "runs": runs,
        "peak_rss_longest_over_shortest": round(long_["peak_rss_mb"] / short["peak_rss_mb"], 3),
        "time_per_second_longest_over_shortest": round(
            long_["seconds_per_audio_second"] / short["seconds_per_audio_second"], 3
        ),
        "cpu_per_second_longest_over_shortest": round(
            long_["cpu_seconds_per_audio_second"] / short["cpu_seconds_per_audio_second"], 3
        ),
        "bounds": {"peak_rss_mb": 1200, "peak_rss_ratio": 1.1, "time_ratio": 1.0},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--continuous", default=None, help="minutes of continuous speech, a comma list: 5,30")
    ap.add_argument("--model", default="tiny.en", help="the Whisper model of the continuous case")
    ap.add_argument("--keep", type=Path, default=None, help="continuous case: write each length's words here")
    args = ap.parse_args()
    if args.continuous:
        minutes = [float(m) for m in args.continuous.split(",")]
        out = args.json or Path(f"benchmarks/long_continuous_{args.model.replace('.', '_')}.json")
        result = continuous(minutes, args.model, args.keep)
        print(json.dumps(result, indent=1))
        out.write_text(json.dumps(result, indent=1) + "\n")
        return
    args.json = args.json or Path("benchmarks/long.json")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        (tmp / "in").mkdir()
        path = tmp / "in" / "hour.mp4"
        t0 = time.perf_counter()
        flashes, truth = make_hour(path, args.minutes)
        made_s = time.perf_counter() - t0
        bare = [bare_decode(path)]
        frames_s, frames_rss = prepare(path, tmp / "frames", "--anchors", "frames", "--fps", "0.5")
        bare.append(bare_decode(path))
        few_s, few_rss = prepare(path, tmp / "few", "--anchors", "frames", "--max-frames", "64")
        bare.append(bare_decode(path))
        full_s, full_rss = prepare(path, tmp / "full", "--anchors", "full", "--fps", "0.5", "--asr-model", "tiny.en",
                                   "--lang", "en")  # fmt: skip
        bare_s = statistics.median(bare)
        result = {
            "file": f"{args.minutes:g} min, {SIZE} at {FPS} fps, H.264 GOP {GOP} with B-frames, AAC; "
            f"{len(flashes)} flashes, {len(truth)} spoken words",
            "made_in_s": round(made_s, 1),
            "bare_full_decode_s": [round(b, 2) for b in bare],
            "frames_fps_0.5": {
                "seconds": round(frames_s, 2),
                "over_bare_decode": round(frames_s / bare_s, 3),
                "bound": 0.85,
                "peak_rss_mb": frames_rss,
            },  # fmt: skip
            "frames_max_64": {
                "seconds": round(few_s, 2),
                "over_bare_decode": round(few_s / bare_s, 3),
                "bound": 0.1,
                "peak_rss_mb": few_rss,
            },  # fmt: skip
            "full_fps_0.5_tiny_en": {
                "seconds": round(full_s, 1),
                "peak_rss_mb": full_rss,
                "bound_rss_mb": 1536,
                **check_full(tmp / "full", flashes, truth),
            },  # fmt: skip
        }
    print(json.dumps(result, indent=1))
    args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
