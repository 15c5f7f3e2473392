"""EgoGapBench data: image bundles of multiple-choice items (../shared/egogapbench/FORMAT.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from avstack.io import DataError

LETTERS = "ABCDEFGH"
MOTOR = ("motor_a", "motor_b")
OFF_VANTAGE = "composition_off"


class EgoGapDataError(DataError):
    """Bad bundle data; the message names the file, line and item."""


@dataclass(frozen=True)
class Item:
    """One multiple-choice item. Options are (letter, text, label) in letter order."""

    uid: str
    bundle_uid: str
    image_id: int | str
    file_name: str
    kind: str  # mcq3 | mcq4
    cand_kind: str  # direct | indirect
    options: tuple[tuple[str, str, str], ...]
    correct_letter: str
    eval_prompt: str | None = None
    style: str | None = None
    extra: dict[str, object] = field(default_factory=dict, compare=False)

    @property
    def n_options(self) -> int:
        return len(self.options)

    @property
    def letters(self) -> list[str]:
        return [letter for letter, _, _ in self.options]

    def label_of(self, letter: str | None) -> str | None:
        return next((lab for let, _, lab in self.options if let == letter), None)

    def relettered(self, order: list[int]) -> Item:
        """Options taken in `order` (indices into the current options), lettered A, B, ...; key follows."""
        picked = [self.options[i] for i in order]
        options = tuple((LETTERS[i], text, label) for i, (_, text, label) in enumerate(picked))
        correct = next(let for let, _, lab in options if lab == "correct")
        return replace(self, options=options, correct_letter=correct, eval_prompt=None)


def item_from_json(raw: dict[str, Any], bundle: dict[str, Any], where: str) -> Item:
    try:
        opts, labels = raw["options"], raw["option_labels"]
        letters = sorted(opts)
        if letters != list(LETTERS[: len(letters)]) or sorted(labels) != letters:
            raise EgoGapDataError(f"{where}: options must be lettered A, B, ... with a label each; found {letters}")
        options = tuple((k, str(opts[k]), str(labels[k])) for k in letters)
        correct = str(raw["correct_letter"])
        if labels.get(correct) != "correct":
            raise EgoGapDataError(f"{where}: correct_letter {correct!r} is not the option labelled 'correct'")
        return Item(
            uid=str(raw["uid"]),
            bundle_uid=str(bundle.get("bundle_uid", bundle.get("image_id"))),
            image_id=bundle["image_id"],
            file_name=str(bundle["file_name"]),
            kind=str(raw.get("kind") or f"mcq{len(options)}"),
            cand_kind=str(raw.get("cand_kind", "")),
            options=options,
            correct_letter=correct,
            eval_prompt=raw.get("eval_prompt"),
            style=bundle.get("prompt_style"),
        )
    except KeyError as exc:
        raise EgoGapDataError(f"{where}: missing field {exc.args[0]!r}") from None
    except (TypeError, AttributeError) as exc:  # a field of the wrong type (options not an object, ...)
        raise EgoGapDataError(f"{where}: a field has the wrong type ({exc})") from None


def load_bundles(path: str | Path) -> list[Item]:
    """Every item of a `*.bundles.jsonl` file, in file order."""
    path = Path(path)
    items: list[Item] = []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise EgoGapDataError(f"{path}: not UTF-8 text ({exc.reason})") from None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            bundle = json.loads(line)
        except json.JSONDecodeError as exc:
            raise EgoGapDataError(f"{path}:{n}: not JSON ({exc.msg})") from None
        if not isinstance(bundle, dict) or not isinstance(bundle.get("mcq_items"), list):
            raise EgoGapDataError(f"{path}:{n}: expected a bundle object with an 'mcq_items' list")
        for j, raw in enumerate(bundle["mcq_items"]):
            if not isinstance(raw, dict):
                raise EgoGapDataError(f"{path}:{n}: mcq_items[{j}] must be an object, found {raw!r:.40}")
            items.append(item_from_json(raw, bundle, f"{path}:{n} item {raw.get('uid', j)}"))
    uids = [i.uid for i in items]
    if len(set(uids)) != len(uids):
        dup = next(u for u in uids if uids.count(u) > 1)
        raise EgoGapDataError(f"{path}: item uid {dup!r} appears more than once")
    return items


def relative_name(item: Item) -> str:
    """The item's image name as written into an export without an image folder: it must be a
    relative path that does not climb (`..`), since the file is read by someone else's loader."""
    name = Path(item.file_name)
    if not item.file_name or name.is_absolute() or ".." in name.parts:
        raise EgoGapDataError(f"item {item.uid}: image path {item.file_name!r} must be relative, without '..'")
    return item.file_name


def image_path(item: Item, images: str | Path) -> Path:
    """The item's image under the user's image folder; refuses paths that leave it."""
    root = Path(images).resolve()
    name = Path(item.file_name)
    for candidate in (root / name, root / name.name):
        resolved = candidate.resolve()
        if not resolved.is_relative_to(root):
            raise EgoGapDataError(f"item {item.uid}: image path {item.file_name!r} escapes {root}")
        if resolved.is_file():
            return resolved
    raise EgoGapDataError(f"item {item.uid}: image {item.file_name!r} not found under {root}")
