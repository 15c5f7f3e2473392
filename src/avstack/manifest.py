"""The prepared folder's records: one typed `ClipRecord` per clip, the one place that knows the
manifest's fields (`to_json` / `from_json`), and the readers of a prepared folder.

A manifest is input like any other file: `from_json` checks every field's type and names the
clip and the field it could not use; paths in it are resolved inside the prepared folder only.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:
    from avstack.asr.types import Transcript

from avstack.io import DataError, JsonlAppender, atomic_stream, inside, read_json, read_jsonl, write_jsonl_atomic


@dataclass(frozen=True)
class FrameRef:
    """A sampled frame on disk: its display index (a label), true pts in ms, and JPEG path
    relative to the prepared folder."""

    index: int
    pts_ms: int
    path: str

    def to_json(self) -> dict[str, object]:
        return {"index": self.index, "pts_ms": self.pts_ms, "path": self.path}

    @classmethod
    def from_json(cls, d: object, where: str) -> FrameRef:
        if not isinstance(d, dict):
            raise DataError(f"{where}: expected a frame object, found {type(d).__name__}")
        index, pts, path = d.get("index"), d.get("pts_ms"), d.get("path")
        ints = isinstance(index, int) and isinstance(pts, int) and _is_int(index) and _is_int(pts)
        if ints and isinstance(index, int) and isinstance(pts, int) and isinstance(path, str):
            return cls(index, pts, path)
        raise DataError(f"{where}: expected index (int), pts_ms (int), path (str); found {d!r:.120}")


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def is_number(x: object) -> TypeGuard[int | float]:
    """A finite int or float (not a bool): what a time, a size or a coordinate read from a file must be."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


# field -> (accepted check, what is expected); None is accepted for every optional field
_CHECKS: dict[str, tuple[Any, str]] = {
    "sha256": (lambda v: isinstance(v, str), "a string"),
    "task_template": (lambda v: isinstance(v, str), "a string"),
    "lang": (lambda v: isinstance(v, str), "a string"),
    "scene": (lambda v: isinstance(v, str), "a string"),
    "duration_ms": (_is_int, "an integer"),
    "width": (lambda v: _is_int(v) and v > 0, "a positive integer"),
    "height": (lambda v: _is_int(v) and v > 0, "a positive integer"),
    "rotation": (_is_int, "an integer"),
    "vfr": (lambda v: isinstance(v, bool), "true or false"),
    "fps": (is_number, "a number"),
    "has_audio": (lambda v: isinstance(v, bool), "true or false"),
    "streams": (lambda v: isinstance(v, dict), "an object"),
    "decode_path": (lambda v: isinstance(v, str), "a string"),
    "audio": (lambda v: isinstance(v, dict), "an object"),
    "asr": (lambda v: isinstance(v, dict), "an object"),
    "source_asr": (lambda v: isinstance(v, dict), "an object"),
    "eval_gt": (lambda v: isinstance(v, dict), "an object"),
    "error": (lambda v: isinstance(v, dict), "an object"),
}


NOT_IN_MANIFEST = ("cache_hit", "profile")  # a run's facts about a record, not the clip's


@dataclass(frozen=True)
class ClipRecord:
    """One clip of a prepared folder; field order is the manifest's key order."""

    clip_id: str
    video: str
    sha256: str | None = None
    task_template: str | None = None
    lang: str | None = None
    scene: str | None = None
    duration_ms: int | None = None
    width: int | None = None  # as displayed (after rotation)
    height: int | None = None
    rotation: int | None = None
    vfr: bool | None = None
    fps: float | None = None
    has_audio: bool | None = None
    # the clip's clock: time 0 is where a player starts it; each stream's index and span on it
    streams: Mapping[str, object] | None = None
    frames: tuple[FrameRef, ...] = ()
    last_frame: FrameRef | None = None
    decode_path: str | None = None
    damage: tuple[dict[str, object], ...] = ()  # spans a damaged packet cost: {stream, from_ms, to_ms}
    audio: dict[str, Any] | None = None
    asr: Transcript | None = None  # our words on the clip's clock (the same types `transcribe` gives)
    source_asr: dict[str, object] | None = None
    eval_gt: dict[str, object] | None = None
    error: dict[str, str] | None = None
    # not in the manifest: whether prepare found this clip's frames in the cache, and where its
    # preparation spent its time (stage -> wall s, CPU s; avstack.profiling)
    cache_hit: bool = field(default=False, compare=False, repr=False)
    profile: dict[str, tuple[float, float]] = field(default_factory=dict, compare=False, repr=False)

    @property
    def words(self) -> tuple[Any, ...]:
        """Our words (asr.types.Word), in time order; none without a transcript."""
        return self.asr.words if self.asr is not None else ()

    @property
    def ok(self) -> bool:
        return self.error is None

    def failed(self, exc: BaseException | str, kind: str | None = None) -> ClipRecord:
        return replace(self, error=error_record(exc, kind))

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {}
        for f in fields(self):
            if f.name in NOT_IN_MANIFEST:
                continue
            v = getattr(self, f.name)
            if f.name == "frames":
                v = [fr.to_json() for fr in v]
            elif f.name == "last_frame" and v is not None:
                v = v.to_json()
            elif f.name == "damage":
                v = list(v)
            elif f.name == "asr" and v is not None:
                v = v.to_ecog()
            out[f.name] = v
        return out

    @classmethod
    def from_json(cls, d: object, where: str = "manifest") -> ClipRecord:
        """A record read from a file; DataError naming the clip and field when a field is unusable."""
        if not isinstance(d, dict):
            raise DataError(f"{where}: expected a clip object, found {type(d).__name__}")
        cid = d.get("clip_id")
        if not isinstance(cid, str) or not cid or not isinstance(d.get("video"), str):
            raise DataError(f"{where}: clip_id and video must be non-empty strings; found {cid!r}")
        where = f"{where}: clip {cid!r}"
        kw: dict[str, Any] = {"clip_id": cid, "video": d["video"]}
        for name, (check, expected) in _CHECKS.items():
            v = d.get(name)
            if v is not None and not check(v):
                raise DataError(f"{where}: field {name!r} must be {expected}; found {v!r:.80}")
            kw[name] = v
        frames = d.get("frames") or []
        if not isinstance(frames, list):
            raise DataError(f"{where}: field 'frames' must be a list; found {type(frames).__name__}")
        kw["frames"] = tuple(FrameRef.from_json(f, f"{where}: frames[{i}]") for i, f in enumerate(frames))
        damage = d.get("damage") or []
        if not isinstance(damage, list) or not all(
            isinstance(x, dict) and isinstance(x.get("stream"), str) and _is_int(x.get("from_ms")) for x in damage
        ):
            raise DataError(f"{where}: field 'damage' must be a list of {{stream, from_ms}}; found {damage!r:.50}")
        kw["damage"] = tuple(damage)
        if kw.get("asr") is not None:
            from avstack.asr.types import transcript_from_ecog

            kw["asr"] = transcript_from_ecog(kw["asr"], f"{where}: asr")
        last = d.get("last_frame")
        kw["last_frame"] = None if last is None else FrameRef.from_json(last, f"{where}: last_frame")
        return cls(**kw)


def error_record(exc: BaseException | str, kind: str | None = None) -> dict[str, str]:
    if isinstance(exc, str):
        return {"type": kind or "DataError", "message": exc}
    return {"type": type(exc).__name__, "message": str(exc)}


MANIFEST = "manifest.jsonl"


def load_manifest(prepared: str | Path) -> list[ClipRecord]:
    """Every record of a prepared folder; a line that is not a usable record is a DataError
    naming the file and line (a manifest is written whole, so a bad line means tampering)."""
    path = Path(prepared) / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no manifest; run `avstack prepare DATA_ROOT --out {prepared}` first")
    check_format(prepared)
    out = []
    for lineno, rec in read_jsonl(path):
        if isinstance(rec, DataError):
            raise rec
        out.append(ClipRecord.from_json(rec, f"{path}:{lineno}"))
    return out


# prepare.FORMAT: the prepared-folder format this code writes; 3: a clip's `asr` is a Transcript of
# Words (its JSON unchanged), read by this code as the format-2 folders of avstack 0.x before it are
READ_FORMATS = (2, 3)
PREPARED_FORMAT = 3


def check_format(prepared: str | Path) -> None:
    """Refuse a folder prepared by an older avstack (its times are on another clock), in one line."""
    meta = read_json(Path(prepared) / "prepare.json")
    if isinstance(meta, dict) and meta.get("format", 1) not in READ_FORMATS:
        raise DataError(
            f"{prepared} was prepared by avstack {meta.get('avstack_version', '?')} (format {meta.get('format', 1)}; "
            f"this avstack reads formats {', '.join(map(str, READ_FORMATS))}): re-run `avstack prepare` into it"
        )


def manifest_shards(prepared: str | Path, size: int) -> list[tuple[int, int]]:
    """Byte ranges of the manifest holding `size` lines each (workers read their own slice)."""
    path = Path(prepared) / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no manifest; run `avstack prepare DATA_ROOT --out {prepared}` first")
    ranges, start, offset, n = [], 0, 0, 0
    with open(path, "rb") as fh:
        for line in fh:
            offset += len(line)
            n += 1
            if n == size:
                ranges.append((start, offset))
                start, n = offset, 0
    if n:
        ranges.append((start, offset))
    return ranges


def iter_manifest(prepared: str | Path, start: int = 0, end: int | None = None) -> Iterator[ClipRecord]:
    """The records of a byte range of the manifest, one at a time (validated like load_manifest)."""
    path = Path(prepared) / MANIFEST
    with open(path, "rb") as fh:
        fh.seek(start)
        while end is None or fh.tell() < end:
            line = fh.readline()
            if not line:
                break
            if line.strip():
                try:
                    rec = json.loads(line)
                except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                    raise DataError(f"{path} (byte {fh.tell() - len(line)}): not JSON ({exc})") from None
                yield ClipRecord.from_json(rec, f"{path} (byte {fh.tell() - len(line)})")


def write_manifest(prepared: str | Path, records: list[ClipRecord]) -> None:
    write_jsonl_atomic(Path(prepared) / MANIFEST, (r.to_json() for r in records))


class ManifestWriter:
    """The manifest written as clips finish: each record appended to `manifest.partial.jsonl` (so
    the driver keeps only clip ids and offsets, whatever the clip count), then one final
    `manifest.jsonl` in clip-id order, streamed from the partial file."""

    def __init__(self, prepared: str | Path):
        self.folder = Path(prepared)
        self.partial = self.folder / "manifest.partial.jsonl"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.partial.write_bytes(b"")  # what a killed run left is redone from the cache
        self._out = JsonlAppender(self.partial)
        self._where: dict[str, tuple[int, int]] = {}  # clip id -> (offset, length) of its line
        self._lock = threading.Lock()  # records arrive from the workers' results and the ASR thread
        self.count, self.cache_hits = 0, 0
        self.failed: list[ClipRecord] = []

    def add(self, rec: ClipRecord) -> None:
        where = self._out.append(rec.to_json())
        with self._lock:
            self._where[rec.clip_id] = where  # a later line of a clip replaces an earlier one
            self.count += 1
            self.cache_hits += int(rec.cache_hit)
            if rec.error:
                self.failed.append(rec)

    def finish(self) -> Path:
        """Write manifest.jsonl in clip-id order, copying each clip's line from the partial file."""
        path = self.folder / MANIFEST
        with open(self.partial, "rb") as src, atomic_stream(path) as dst:
            for cid in sorted(self._where):
                offset, length = self._where[cid]
                src.seek(offset)
                dst.write(src.read(length))
        self.partial.unlink()
        return path


def data_root_of(prepared: str | Path) -> str | None:
    """The data root recorded by prepare (where the original videos are), if any."""
    meta = read_json(Path(prepared) / "prepare.json")
    root = meta.get("data_root") if isinstance(meta, dict) else None
    return root if isinstance(root, str) else None


def frame_file(prepared: str | Path, frame: FrameRef, clip_id: str) -> Path:
    """A frame's JPEG, which must lie inside the prepared folder."""
    return inside(prepared, frame.path, f"clip {clip_id!r}: frame {frame.index}")


class Prepared:
    """A folder written by `prepare`, opened once: its `ClipRecord`s (validated as they are read)
    and its data root, read when opened and handed down the stages (a task's requests, runs and
    scores of every stack), never reread; clips by id; a frame's image."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.records = load_manifest(self.path)
        self.data_root = data_root_of(self.path)  # where the original videos are, if recorded

    def __iter__(self) -> Iterator[ClipRecord]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, clip_id: str) -> ClipRecord:
        for rec in self.records:
            if rec.clip_id == clip_id:
                return rec
        raise KeyError(f"{self.path}: no clip {clip_id!r}")

    def frame_path(self, record: ClipRecord, frame: FrameRef) -> Path:
        """The JPEG of one of the record's frames (always inside the prepared folder)."""
        return frame_file(self.path, frame, record.clip_id)

    def load_image(self, record: ClipRecord, frame: FrameRef) -> object:
        """A frame as an RGB array (height x width x 3, uint8), upright as displayed."""
        import cv2

        bgr = cv2.imread(str(self.frame_path(record, frame)), cv2.IMREAD_COLOR)
        if bgr is None:
            raise OSError(f"{self.frame_path(record, frame)}: not a readable image")
        return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)

    def __repr__(self) -> str:
        return f"Prepared({str(self.path)!r}, {len(self)} clips)"


def opened(prepared: str | Path | Prepared) -> Prepared:
    """A prepared folder as one opened value (as given when it is one already)."""
    return prepared if isinstance(prepared, Prepared) else Prepared(prepared)
