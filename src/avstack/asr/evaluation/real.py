"""Real recordings with hand-aligned words: praatio's example sentences (fetched from PyPI once)."""

from __future__ import annotations

import os
import re
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING

from avstack.asr.evaluation.cases import Case
from avstack.errors import UsageError

if TYPE_CHECKING:  # a TypedDict: only the annotations read it
    from avstack.asr.types import TimedWord


# ---------------------------------------------------------------- real speech, hand-aligned
# praatio's source distribution carries three read sentences with word boundaries set by hand
# (examples/files: bobby, mary, damon_set_test): real voices, real recordings, nobody here made
# them. Fetched once from PyPI (pip download, sdist) into a cache folder.
PRAATIO = "praatio==6.2.2"


REAL_NAMES = ("bobby", "mary", "damon_set_test")  # praatio's sentences, in real_cases' order
REAL_FILES = {"bobby": ("bobby_words", "word"), "mary": ("mary", "word"), "damon_set_test": ("damon_set_test", "words")}


def praatio_examples(cache: Path | None = None) -> Path | None:
    """The folder of praatio's example files, fetched into `cache` when missing; None when it
    cannot be had (no network to PyPI, no pip)."""
    import subprocess
    import sys

    cache = cache or Path(os.environ.get("AVSTACK_CACHE", Path.home() / ".cache" / "avstack")) / "praatio"
    found = sorted(cache.glob("praatio-*/examples/files"))
    if found:
        return found[-1]
    cache.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "-q",
        "--no-deps",
        "--no-binary",
        ":all:",
        PRAATIO,
        "-d",
        str(cache),
    ]
    if subprocess.run(cmd, capture_output=True, timeout=300).returncode != 0:
        return None
    for sdist in cache.glob("praatio-*.tar.gz"):
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if "/examples/files/" in m.name and m.isfile()]
            _extract_plain_files(tar, members, cache)
    found = sorted(cache.glob("praatio-*/examples/files"))
    return found[-1] if found else None


def _extract_plain_files(tar: tarfile.TarFile, members: list[tarfile.TarInfo], into: Path) -> None:
    """Regular files only, each inside `into`. Python's "data" extraction filter says this, but it
    arrived in 3.11.4 / 3.10.12, and the project runs on every 3.10 and 3.11 patch release."""
    root = into.resolve()
    for m in members:
        target = (root / m.name).resolve()
        if not m.isfile() or root not in target.parents:
            raise UsageError(f"{m.name}: expected a plain file inside the archive, found a link or an outside path")
        target.parent.mkdir(parents=True, exist_ok=True)
        source = tar.extractfile(m)
        assert source is not None  # a regular member always has its bytes
        target.write_bytes(source.read())


_TG_TOKEN = re.compile(r'"((?:[^"]|"")*)"|(?<![\w.])(-?\d+(?:\.\d+)?(?:[eE]-?\d+)?)(?![\w.])')


def textgrid_words(path: Path, tier: str) -> list[TimedWord]:
    """The labelled intervals of one interval tier of a TextGrid, in ms. Praat writes the long
    and the short text format; both are the same values in the same order (the long one labels
    them), so the file is read as its sequence of strings and numbers."""
    text = re.sub(r"\[\d+\]", "", path.read_text(encoding="utf-8", errors="replace"))
    tokens = [(q if q or n == "" else n).replace('""', '"') for q, n in _TG_TOKEN.findall(text)]
    try:
        return _tier(tokens, tier, path)
    except (IndexError, ValueError) as exc:
        raise UsageError(f"{path}: expected a TextGrid with an interval tier {tier!r}; {exc}") from None


def _tier(tokens: list[str], tier: str, path: Path) -> list[TimedWord]:
    k = tokens.index("TextGrid") + 3  # xmin, xmax, then the tier count
    for _ in range(int(tokens[k])):
        kind, name, count = tokens[k + 1], tokens[k + 2], int(tokens[k + 5])
        width = 3 if kind == "IntervalTier" else 2
        items = tokens[k + 6 : k + 6 + width * count]
        k += 5 + width * count
        if name != tier:
            continue
        if kind != "IntervalTier":
            raise UsageError(f"{path}: tier {tier!r} is a {kind}, not an IntervalTier")
        words: list[TimedWord] = [
            {"text": label.lower(), "begin_time": round(float(a) * 1000), "end_time": round(float(b) * 1000)}
            for a, b, label in zip(items[0::3], items[1::3], items[2::3])
            if label.strip()
        ]
        return words
    raise UsageError(f"{path}: no tier named {tier!r}")


def real_cases(folder: Path) -> list[Case]:
    """The hand-aligned real sentences as cases (16 kHz mono, times from the TextGrids)."""
    from avstack.media.audio import load_audio

    cases = []
    for name, (grid, tier) in REAL_FILES.items():
        audio = load_audio(folder / f"{name}.wav")
        if audio is None:
            raise UsageError(f"{folder / name}.wav: no audio")
        cases.append(Case("en", audio, textgrid_words(folder / f"{grid}.TextGrid", tier), 0))
    return cases


# ---------------------------------------------------------------- the shared real spontaneous take
# ../shared/realspeech: one real take of spontaneous speech (25 s, 64 words with fillers, a
# drawn-out word, a 1.3 s pause) and its word alignment (the Montreal Forced Aligner's test fixture,
# checked by its authors: a reference at the 10-20 ms level). What the aligner may be tuned on; the
# rest of that source is the held-out set, never read here.
SHARED_TAKE = Path("realspeech") / "cold_corpus"
SPOKEN_FILLERS = ("uh", "um", "er")


def shared_take(shared: Path) -> Case | None:
    """The shared take as a disfluent case: its words without the fillers as the truth (Whisper
    leaves fillers out, and a filler is no word to time), the fillers apart, so the word right
    after one is scored too. None where `shared` lacks it."""
    import json

    from avstack.asr.evaluation.cases import DisfluentCase
    from avstack.media.audio import load_audio

    wav, labels = (shared / SHARED_TAKE).with_suffix(".wav"), (shared / SHARED_TAKE).with_suffix(".json")
    if not wav.is_file() or not labels.is_file():
        return None
    audio = load_audio(wav)
    if audio is None:
        raise UsageError(f"{wav}: expected an audio track, found none")
    try:
        words = json.loads(labels.read_text(encoding="utf-8"))["words"]
        truth = [w for w in words if w["text"] not in SPOKEN_FILLERS]
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{labels}: expected {{'words': [{{text, begin_time, end_time}}, ...]}}; {exc!r}") from None
    fillers = tuple(w for w in words if w["text"] in SPOKEN_FILLERS)
    return DisfluentCase("en", audio, truth, 0, fillers)
