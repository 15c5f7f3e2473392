"""What an ASR result depended on, beyond the audio, the model and the settings: the engine's
versions, the device and compute type, and on a CPU the instruction set and GEMM back-end that
CTranslate2 dispatched to (the same weights give other numbers on AVX2 and AVX-512, with MKL and
with oneDNN). It goes into every ASR record and into the ASR cache key, so a node of another CPU
kind never reuses or mixes in another kind's results.

CTranslate2 tells its dispatch only in its load log (CT2_VERBOSE): a child process loads the model
once with the log on, and the answer is cached per (engine version, CPU model and flags, CT2_*
settings), so the probe runs once per machine kind.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import threading
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from avstack.asr.models import REPRODUCIBLE_CPU_COMPUTE, cache_dir

if TYPE_CHECKING:
    from avstack.asr.types import AsrSettings

_PROBE = """
import os, sys
os.environ["CT2_VERBOSE"] = "1"
from faster_whisper import WhisperModel
WhisperModel(sys.argv[1], device="cpu", compute_type=sys.argv[2], cpu_threads=1)
"""


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "absent"


def _cpu_identity() -> dict[str, str]:
    """The CPU model and its flags as the kernel reports them (what decides the dispatch)."""
    model, flags = "", ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not model:
                model = value.strip()
            elif key.strip() in ("flags", "Features") and not flags:
                flags = value.strip()
    except OSError:
        import platform

        model = platform.processor() or platform.machine()
    return {"model": model, "flags_sha": hashlib.sha256(flags.encode()).hexdigest()[:12]}


def _ct2_env() -> dict[str, str]:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(("CT2_", "MKL_CBWR", "ONEDNN_", "DNNL_"))}


def _parse_dispatch(log: str) -> dict[str, str]:
    """'Selected ISA: AVX2', 'Use Intel MKL: false', 'GEMM_S8 backend: DNNL (...)' from the load log."""
    out = {}
    for key, pattern in (
        ("isa", r"Selected ISA: (\S+)"),
        ("mkl", r"Use Intel MKL: (\S+)"),
        ("gemm_s8", r"GEMM_S8 backend: (\S+)"),
        ("sgemm", r"SGEMM backend: (\S+)"),
        ("compute", r"Selected compute type: (\S+)"),
    ):
        m = re.search(pattern, log)
        out[key] = m.group(1) if m else "unknown"
    return out


_PROBING = threading.Lock()


@lru_cache(maxsize=8)
def cpu_dispatch(model_path: str, compute_type: str) -> dict[str, str]:
    """CTranslate2's CPU dispatch on this machine (cached on disk per machine kind). One probe at
    a time: clips transcribed side by side on threads asked it at once, and two threads' files
    of one name crossed (FileNotFoundError on the second rename, seen on 16 cores)."""
    with _PROBING:
        return _cpu_dispatch(model_path, compute_type)


def _cpu_dispatch(model_path: str, compute_type: str) -> dict[str, str]:
    ident = {"ct2": _version("ctranslate2"), "cpu": _cpu_identity(), "env": _ct2_env(), "compute": compute_type}
    key = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]
    path = cache_dir() / "ct2-dispatch" / f"{key}.json"
    try:
        cached = json.loads(path.read_text())
        if isinstance(cached, dict) and all(isinstance(v, str) for v in cached.values()):
            return cached
    except (OSError, ValueError):
        pass
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _PROBE, model_path, compute_type],
            capture_output=True,
            text=True,
            timeout=120,
        )
        found = _parse_dispatch(proc.stdout + proc.stderr)
    except (OSError, subprocess.SubprocessError):
        found = _parse_dispatch("")
    if "unknown" not in found.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(found, sort_keys=True))
        os.replace(tmp, path)
    return found


@lru_cache(maxsize=1)
def gpu_identity() -> str:
    """The GPU and driver a CUDA transcription ran on (nvidia-smi's first device), e.g.
    "NVIDIA H200, driver 580.159.04": float16 kernels and their sums differ between GPU kinds
    and cuBLAS releases, so the words of one GPU kind are never taken for another's."""
    try:
        proc = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        name, driver = (x.strip() for x in proc.stdout.splitlines()[0].split(",")[:2])
        return f"{name}, driver {driver}"
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return "unknown"


MACHINE_FIELDS = ("cpu", "isa", "mkl", "gemm_s8", "sgemm")  # what the CPU dispatch put in a record


def runtime(model_path: str, device: str, compute_type: str, threads: int) -> dict[str, object]:
    """The record of what a transcription ran on; equal dicts give equal results on CPU.
    `machine_independent` says whether the words are the same on any CPU (float32, see
    asr.models.REPRODUCIBLE_CPU_COMPUTE) or only where this dispatch is the same."""
    out: dict[str, object] = {
        "faster_whisper": _version("faster-whisper"),
        "ctranslate2": _version("ctranslate2"),
        "device": device,
        "compute_type": compute_type,
        "threads": threads,
    }
    if device == "cpu":
        out["cpu"] = _cpu_identity()["model"]
        out |= {k: v for k, v in cpu_dispatch(model_path, compute_type).items() if k != "compute"}
    elif device == "cuda":
        out["gpu"] = gpu_identity()
    out["machine_independent"] = device == "cpu" and compute_type == REPRODUCIBLE_CPU_COMPUTE
    return out


def words_depend_on(rt: dict[str, object]) -> dict[str, object]:
    """The part of a runtime record the words depend on (the ASR cache key): on the reproducible
    CPU path not the CPU, its ISA or its GEMM back-end, so a cache made on an Intel machine serves
    an AMD one; on any other path all of it, so an entry made elsewhere is never reused."""
    if rt.get("machine_independent"):
        return {k: v for k, v in rt.items() if k not in MACHINE_FIELDS}
    return rt


@lru_cache(maxsize=16)
def _runtime_of(model: str, device: str, threads: int, compute_type: str) -> str:
    from avstack.asr.models import pick_device, resolve_model

    dev, compute = pick_device(device, compute_type)
    return json.dumps(runtime(resolve_model(model), dev, compute, threads), sort_keys=True)


def runtime_of(settings: AsrSettings) -> dict[str, object]:
    """`runtime` for an AsrSettings (model, device, threads, compute type), computed once per process."""
    runtime: dict[str, object] = json.loads(
        _runtime_of(settings.model, settings.device, settings.threads, settings.compute_type)
    )
    return runtime
