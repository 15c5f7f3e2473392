"""avstack: egocentric clips -> the exact inputs multimodal LLMs are evaluated on.

The public API (everything else under avstack.* is internal):

    prepare(data_root, out, ...)       frames at true times, audio, word-timed ASR, a manifest
    open_prepared(path)                the prepared clips as ClipRecords (frames as FrameRefs)
    sample_frames(video, fps=, times_ms=)   frames of one file at true presentation times
    sample_root()                      the bundled sample set (seven clips), wherever avstack is installed
    transcribe(audio_or_video, ...)    words with times (Transcript, Word)
    stack(variant, drop, ...)          an input stack (Stack); render(prepared, record, stack, format=)
    score(task, truth, predictions)    the benchmark's own scores
    run(prepared, model=, out=, ...)   a model over a task's items under one stack, then scored
    ablate(prepared, model=, out=, drop=[...])   the input-stack ablation, planned, run, reported
    export(prepared, to=, out=, ...)   precomputed inputs for other harnesses (lmms-eval, hf, batch)
    view(prepared, runs, out=)         the offline site

Documentation: docs/ (`make docs` builds the site).
"""

from typing import Any

# the one name table and the one __all__ are the door's (avstack.api), which imports nothing heavy
from avstack.api import __all__


def __getattr__(name: str) -> Any:
    # loaded on first use: `import avstack` (and every CLI start) stays light
    from avstack import api

    try:
        return getattr(api, name)
    except AttributeError:
        raise AttributeError(f"module 'avstack' has no attribute {name!r}") from None


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__, "__version__"])
