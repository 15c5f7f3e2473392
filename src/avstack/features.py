"""`export --to features`: a harness-agnostic precompute of any prepared folder (EcoG or not): one
row per clip with its frames (paths, and in Parquet the JPEG bytes), their true pts, the WAV, the
ASR words with times and the stream facts on the clip's clock. No prompt, no task."""

from __future__ import annotations

from pathlib import Path

from avstack.io import DataError, inside, write_jsonl_atomic
from avstack.manifest import ClipRecord, frame_file, load_manifest

FEATURES_JSONL = "features.jsonl"
FEATURES_PARQUET = "features.parquet"


def feature_row(prepared: Path, rec: ClipRecord) -> dict[str, object]:
    frames = [frame_file(prepared, f, rec.clip_id) for f in rec.frames]  # a manifest is input: paths stay inside
    return {
        "clip_id": rec.clip_id,
        "video": rec.video,
        "duration_ms": rec.duration_ms,
        "width": rec.width,
        "height": rec.height,
        "fps": rec.fps,
        "frames": [str(p) for p in frames],
        "frame_pts_ms": [f.pts_ms for f in rec.frames],
        "frame_index": [f.index for f in rec.frames],
        # the clip's sound on its clock (sample 0 is the clip's start): what an omni stack sends
        "wav": str(inside(prepared, rec.audio["path"], f"clip {rec.clip_id!r}: audio"))
        if rec.audio and rec.audio.get("path")
        else None,
        "asr_text": rec.asr.text if rec.asr is not None else "",
        "words": [{"text": w.text, "begin_ms": w.begin_ms, "end_ms": w.end_ms, "prob": w.prob} for w in rec.words],
        "streams": rec.streams or {},
    }


def export_features(prepared: str | Path, out: str | Path, parquet: bool = True) -> Path:
    """features.jsonl (and features.parquet with the frames embedded, when `datasets` is installed
    and `parquet`) for every prepared clip; failed clips are left out and named in the error when
    no clip is usable. Returns the JSONL path."""
    prepared, out = Path(prepared).resolve(), Path(out)
    records = load_manifest(prepared)
    rows = [feature_row(prepared, r) for r in records if r.ok and r.frames]
    if not rows:
        failed = [r.clip_id for r in records if not r.ok]
        raise DataError(f"{prepared}: no prepared clip has frames to export ({len(failed)} failed: {failed[:3]})")
    out.mkdir(parents=True, exist_ok=True)
    path = out / FEATURES_JSONL
    write_jsonl_atomic(path, rows)
    if parquet:
        _write_parquet(rows, out / FEATURES_PARQUET)
    return path


def _write_parquet(rows: list[dict[str, object]], path: Path) -> None:
    try:
        from datasets import Dataset, Features, Image, Sequence, Value
    except ImportError:
        return  # the JSONL says everything; Parquet with embedded frames needs avstack[export]
    features = Features(
        {
            "clip_id": Value("string"),
            "video": Value("string"),
            "duration_ms": Value("int64"),
            "width": Value("int64"),
            "height": Value("int64"),
            "fps": Value("float64"),
            "frames": Sequence(Image()),
            "frame_pts_ms": Sequence(Value("int64")),
            "frame_index": Sequence(Value("int64")),
            "wav": Value("string"),
            "asr_text": Value("string"),
            "words": [
                {
                    "text": Value("string"),
                    "begin_ms": Value("int64"),
                    "end_ms": Value("int64"),
                    "prob": Value("float64"),
                }
            ],
        }
    )
    table = [{k: v for k, v in r.items() if k != "streams"} for r in rows]
    tmp = path.with_suffix(".partial.parquet")
    Dataset.from_list(table, features=features).to_parquet(str(tmp))
    tmp.replace(path)
