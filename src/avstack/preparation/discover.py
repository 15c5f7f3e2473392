"""Find the clips of a data root. The core knows one layout, a plain folder of videos; a task
passes its own folder layouts (EcoG's `指令N` folders) in, and the first that recognises the
root wins."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from avstack.io import DataError
from avstack.manifest import ClipRecord

# the containers people keep video in that FFmpeg demuxes (others: prepare --include GLOB)
VIDEO_SUFFIXES = (
    ".mp4",
    ".mov",
    ".m4v",
    ".mkv",
    ".webm",
    ".avi",
    ".ts",
    ".m2ts",
    ".mts",
    ".mpg",
    ".mpeg",
    ".flv",
    ".3gp",
    ".3g2",
    ".wmv",
    ".asf",
    ".ogv",
    ".mxf",
    ".vob",
    ".f4v",
    ".divx",
)


@dataclass(frozen=True)
class ClipJob:
    """One clip to prepare; `problem` is set when the clip cannot be located or its data is bad."""

    clip_id: str
    video: str  # relative to the data root (posix)
    path: str  # absolute
    task_template: str | None = None
    lang: str | None = None
    scene: str | None = None
    source_asr: dict[str, object] | None = None
    eval_gt: dict[str, object] | None = None
    problem: str | None = None
    meta: dict[str, object] = field(default_factory=dict, compare=False)
    # the task's check of a prepared record (e.g. masks against the frame size); a module-level
    # function, so it travels to worker processes
    check: Callable[[ClipRecord], str | None] | None = field(default=None, compare=False)


# A layout returns the clip jobs of a root it recognises, or None when the root is not its kind.
Layout = Callable[[Path, "str | None"], "list[ClipJob] | None"]


def rel_path(root: Path, path: Path) -> str:
    """Lexical path below root. Symlinks inside the data root are the user's own and are followed
    (a linked video, a linked task folder); names read from annotation files are checked apart."""
    return path.relative_to(root).as_posix()


def discover(
    root: str | Path, layouts: Sequence[Layout] = (), lang: str | None = None, include: Sequence[str] = ()
) -> list[ClipJob]:
    """Clips of the first layout that recognises `root`, else every video below it (by suffix, or
    matching an `include` glob); sorted by id."""
    return discover_all(root, layouts, lang, include)[0]


def discover_all(
    root: str | Path, layouts: Sequence[Layout] = (), lang: str | None = None, include: Sequence[str] = ()
) -> tuple[list[ClipJob], list[str]]:
    """`discover`'s clips, and in a plain folder the files passed over (not videos by name)."""
    root = Path(root)
    if not root.is_dir():
        raise DataError(f"data root {root} is not a folder")
    skipped: list[str] = []
    for layout in layouts:
        jobs = layout(root, lang)
        if jobs is not None:
            break
    else:
        jobs = plain_jobs(root, include)
        skipped = skipped_files(root, include)
    return sorted(jobs, key=lambda j: j.clip_id), skipped


def is_video_name(path: Path, include: Sequence[str] = ()) -> bool:
    return path.suffix.lower() in VIDEO_SUFFIXES or any(path.match(g) for g in include)


def _visible_files(root: Path) -> list[Path]:
    """Files below root, hidden files and folders (.cache, .DS_Store, ...) left out."""
    return [
        p
        for p in sorted(root.rglob("*"))
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    ]


def plain_jobs(root: Path, include: Sequence[str] = ()) -> list[ClipJob]:
    return [
        ClipJob(clip_id=rel_path(root, p), video=rel_path(root, p), path=str(p.resolve()))
        for p in _visible_files(root)
        if is_video_name(p, include)
    ]


def skipped_files(root: str | Path, include: Sequence[str] = (), limit: int = 10_000) -> list[str]:
    """Files below a plain folder of videos that prepare passes over (not a video by name), so the
    user hears of them; hidden files and the first `limit` only."""
    out = []
    for p in _visible_files(Path(root)):
        if not is_video_name(p, include):
            out.append(rel_path(Path(root), p))
            if len(out) >= limit:
                break
    return out
