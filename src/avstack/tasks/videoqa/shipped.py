"""Reading a benchmark's files as they ship: a JSON file, its rows, where its videos are.

Each loader (longform, audiovisual) names the benchmark's own fields; what they share is here:
a file that is not JSON, or not the shape the benchmark ships, stops the load with the file
named; a bad row is an error naming the file and the row, and the rest go on."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from avstack.io import DataError
from avstack.tasks.videoqa.items import Item

Read = Callable[[dict[str, object], str], list[Item]]  # a row and where it is -> its items (DataError: bad row)


def load_json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not a JSON file ({exc})") from None


def video_at(root: Path | None, uid: str, places: tuple[str, ...]) -> str:
    """Where the benchmark puts a video (the first of `places` that exists under the data root),
    else `{uid}.mp4` in the root."""
    for place in places:
        rel = place.format(uid=uid)
        if root is not None and (root / rel).is_file():
            return rel
    return f"{uid}.mp4"


def each_row(
    rows: Iterable[tuple[object, object]], where: str, read: Callable[[object, str], list[Item]], errors: list[str]
) -> list[Item]:
    """Every row's items (`rows`: (its key, the row)); a row `read` refuses goes to `errors`."""
    items: list[Item] = []
    for k, row in rows:
        try:
            items += read(row, f"{where}{k}")
        except DataError as exc:
            errors.append(str(exc))
    return items


def objects(row: object, where: str) -> dict[str, object]:
    """A row that must be a JSON object."""
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected an object, found {type(row).__name__}")
    return row


def listed_rows(path: Path, what: str, unit: str, read: Read, data: object = None) -> tuple[list[Item], list[str]]:
    """The items of a file that is a list of objects (`what` names the file as its benchmark does,
    `unit` one row of it), each read by `read`, and the rows it could not read, named."""
    data = load_json(path) if data is None else data
    if not isinstance(data, list):
        raise DataError(f"{path}: {what} is a list of {unit}s; found {type(data).__name__}")
    errors: list[str] = []
    items = each_row(enumerate(data), f"{path}: {unit} #", lambda row, where: read(objects(row, where), where), errors)
    return items, errors


def table_rows(path: Path) -> Iterator[tuple[int, object]]:
    """(line, row) of a JSONL, JSON (a list), CSV or Parquet file."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        yield from enumerate(pq.read_table(path).to_pylist(), 1)
        return
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc})") from None
    if suffix == ".csv":
        yield from enumerate(csv.DictReader(text.splitlines()), 2)
        return
    if suffix == ".json":
        data = json.loads(text)
        yield from enumerate(data if isinstance(data, list) else [data], 1)
        return
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as exc:
                yield lineno, DataError(f"{path}:{lineno}: not JSON ({exc.msg})")


def table_items(path: Path, read: Callable[[dict[str, object], str], Item]) -> tuple[list[Item], list[str]]:
    """The items of a table (JSONL, JSON list, CSV, Parquet), a row each, and its bad rows, named
    by file and line."""
    items: list[Item] = []
    errors: list[str] = []
    for lineno, row in table_rows(path):
        where = f"{path}:{lineno}"
        try:
            if isinstance(row, DataError):
                raise row
            items.append(read(objects(row, where), where))
        except DataError as exc:
            errors.append(str(exc))
    return items, errors
