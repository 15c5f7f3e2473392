"""All file I/O of avstack in one place: atomic writes, JSON and JSONL, hashes, predictions.

Anything read from a file is untrusted input: readers name the file and line of what they
could not use. Writers never leave a half-written file where a complete one is expected
(temp file + rename), and created files get the mode the umask allows, like `open()`.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import struct
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from avstack.errors import AvstackError

Progress = Callable[[Iterable[Any], int], Iterable[Any]]  # wraps an iterable of n items (a progress bar)


class DataError(AvstackError, ValueError):
    """Bad input data; the message names the file, the line or the item."""


class OutputError(AvstackError, OSError):
    """An output could not be written (disk full, read-only folder): names the path and the OS error."""


def _umask() -> int:
    # os.umask can only be read by setting it; done once, before any worker thread exists
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()


def _output_error(path: Path, exc: OSError) -> OutputError:
    return OutputError(exc.errno, f"cannot write {path}: {exc.strerror or exc}")


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Write via a temp file in the same folder and rename: never a half file."""
    with atomic_stream(path) as fh:
        fh.write(data)


def write_wav_float(path: str | os.PathLike[str], chunks: Iterable[Any], rate: int) -> tuple[int, str]:
    """Mono float32 samples streamed into a WAV file (IEEE float), written atomically; returns
    (sample count, sha256 of the file). The header holds only format and sizes (no PEAK chunk
    with a write time, as libsndfile adds), so the same samples give the same bytes: the file's
    hash can key a cache on any machine."""
    n = 0
    with atomic_stream(path) as fh:
        fh.write(_wav_header(0, rate))
        for chunk in chunks:
            data = chunk.astype("<f4", copy=False).tobytes()
            fh.write(data)
            n += len(data) // 4
        fh.seek(0)
        fh.write(_wav_header(n, rate))
        fh.seek(0)
        h = hashlib.sha256()
        while block := fh.read(1 << 20):
            h.update(block)
    return n, h.hexdigest()


def _wav_header(n_samples: int, rate: int) -> bytes:
    data = 4 * n_samples
    fmt = struct.pack("<HHIIHHH", 3, 1, rate, 4 * rate, 4, 32, 0)  # IEEE float, mono, 32-bit, cbSize 0
    fact = struct.pack("<I", n_samples)
    riff = 4 + (8 + len(fmt)) + (8 + len(fact)) + (8 + data)
    return (
        b"RIFF"
        + struct.pack("<I", riff)
        + b"WAVE"
        + b"fmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + b"fact"
        + struct.pack("<I", len(fact))
        + fact
        + b"data"
        + struct.pack("<I", data)
    )


@contextmanager
def atomic_stream(path: str | os.PathLike[str]) -> Iterator[Any]:
    """A binary file handle whose content replaces `path` only when the block ends without error."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise _output_error(path, exc) from None
    try:
        with os.fdopen(fd, "w+b") as fh:
            yield fh
        os.chmod(tmp, _FILE_MODE)  # mkstemp makes 0600; outputs follow the umask like open()
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise _output_error(path, exc) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def json_line(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False) + "\n"


def write_json_atomic(path: str | os.PathLike[str], obj: object) -> None:
    atomic_write(path, (json.dumps(obj, ensure_ascii=False, indent=1) + "\n").encode())


def write_jsonl_atomic(path: str | os.PathLike[str], records: Iterable[object]) -> None:
    atomic_write(path, "".join(json_line(r) for r in records).encode())


def write_csv_atomic(path: str | os.PathLike[str], rows: Iterable[Iterable[object]]) -> None:
    buf = io.StringIO(newline="")
    csv.writer(buf).writerows(rows)
    atomic_write(path, buf.getvalue().encode())


def write_per_item(path: str | os.PathLike[str], rows: dict[str, dict[str, object]]) -> None:
    """per_item.csv: an `item_id` column, then the rows' own columns (metrics, group columns)."""
    cols = list(next(iter(rows.values())).keys()) if rows else []
    write_csv_atomic(path, [["item_id", *cols], *[[i, *(_cell(r[c]) for c in cols)] for i, r in rows.items()]])


def _cell(v: object) -> object:
    return int(v) if isinstance(v, bool) else v


def read_json(path: str | os.PathLike[str]) -> Any | None:
    """A JSON file's content; None when missing, unreadable or cut (a cache entry to recompute)."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def read_json_file(path: Path, expect: type, what: str = "") -> Any:
    """A JSON input file that must exist and hold `expect`; DataError naming the file otherwise."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: missing") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not isinstance(data, expect):
        raise DataError(f"{path}: expected a JSON {expect.__name__}{what}, found {type(data).__name__}")
    return data


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON or a DataError naming file:line) for each non-empty line."""
    try:
        with open(path, encoding="utf-8", errors="strict") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    yield lineno, json.loads(line)
                except json.JSONDecodeError as exc:
                    yield lineno, DataError(f"{path}:{lineno}: not JSON ({exc.msg})")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason})") from None


def read_jsonl_objects(path: str | os.PathLike[str], what: str = "record") -> list[dict[str, object]]:
    """Every line must be a JSON object; the first bad one is a DataError naming file:line."""
    out = []
    for lineno, rec in read_jsonl(path):
        if isinstance(rec, DataError):
            raise rec
        if not isinstance(rec, dict):
            raise DataError(f"{path}:{lineno}: expected a JSON object ({what}), found {type(rec).__name__}")
        out.append(rec)
    return out


def load_records(path: str | os.PathLike[str], key: str = "clips") -> list[Any]:
    """Records of a .jsonl file (bad lines as DataError items), or of a .json file (a list, or a
    dict holding `key`)."""
    p = Path(path)
    if p.suffix == ".json":
        data = read_json_file(p, (list, dict))  # type: ignore[arg-type]
        if isinstance(data, dict):
            data = data.get(key, [])
        if not isinstance(data, list):
            raise DataError(f"{p}: expected a list of records under {key!r}, found {type(data).__name__}")
        return data
    return [rec for _, rec in read_jsonl(p)]


def read_predictions(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Prediction records of a .jsonl file (one object per line) or a .json file (a list, or a dict
    holding `predictions`); a bad line or item is a DataError naming the file and line."""
    p = Path(path)
    if p.suffix == ".json":
        recs = load_records(p, "predictions")
        bad = next((i for i, r in enumerate(recs, 1) if not isinstance(r, dict)), None)
        if bad is not None:
            raise DataError(f"{p}: item {bad}: expected a JSON object, found {type(recs[bad - 1]).__name__}")
        return recs
    return read_jsonl_objects(p, "a prediction")


class JsonlAppender:
    """Appends one JSON line per record, each in one write() call, from many threads. A write failure
    (disk full) raises OutputError naming the file, and what was written before stays whole."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()

    def append(self, record: object) -> tuple[int, int]:
        """Append one line; returns (offset, length) of the line in the file."""
        data = json_line(record).encode()
        with self._lock:
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, _FILE_MODE)
                try:
                    written = os.write(fd, data)
                    if written != len(data):
                        raise OSError(28, "short write (No space left on device?)")
                    return os.lseek(fd, 0, os.SEEK_CUR) - written, written
                finally:
                    os.close(fd)
            except OSError as exc:
                _cut_tail(self.path, len(data))
                raise _output_error(self.path, exc) from None


def _cut_tail(path: Path, max_len: int) -> None:
    """Remove a partial last line left by a failed append, so the file ends on a whole line."""
    try:
        with open(path, "rb+") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - max_len))
            tail = fh.read()
            if tail and not tail.endswith(b"\n"):
                cut = tail.rfind(b"\n")
                fh.truncate(size - len(tail) + cut + 1 if cut >= 0 else size - len(tail))
    except OSError:
        pass  # the reader skips a cut last line anyway


def sha256_file(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def inside(base: str | os.PathLike[str], rel: object, what: str, links: bool = False) -> Path:
    """`base/rel` when `rel` is a relative path that stays inside `base`; DataError naming `what`
    otherwise. For every path read from a manifest, run or bundle. With `links=True` the name may
    lead through links the user made inside `base` (a data root's linked videos); else the
    resolved path must stay inside too."""
    if not isinstance(rel, str) or not rel:
        raise DataError(f"{what}: expected a relative path, found {rel!r}")
    p = Path(rel)
    root = Path(base).resolve()
    if p.is_absolute() or ".." in p.parts:
        raise DataError(f"{what}: path {rel!r} escapes {root}")
    if links:
        return root / p
    full = (root / p).resolve()
    if not full.is_relative_to(root):
        raise DataError(f"{what}: path {rel!r} resolves outside {root}")
    return full
