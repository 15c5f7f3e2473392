"""Each arm differs from its parent by its cue alone, checked before anything is sent.

A delta for `-frame_ts` means "the same requests without the frame times". For every item, each
arm's request is compared with its parent's (the arm it is one cue, one axis or one variant away
from; `changes_from` on the stacks says which and what it may change), part by part: the system
prompt and the text line by line, the images by their bytes and order, the clip's sound and video.
object difference the arm does not declare is an `ArmMismatch` naming the item, the arm and the first
part that differs; what each arm does change is counted for the report ("What each arm changes").

Task-neutral: it reads finished requests and the stacks' own declarations, no benchmark.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from avstack.errors import UsageError
from avstack.prompting.messages import Audio, Image, Request, Text, Video
from avstack.prompting.stacks import Changes
from avstack.prompting.timefmt import parse_frame_tag

TAG_FORMATS = ("ms", "seconds", "mmss", "index", "qwen")  # a frame tag in any of the told formats
# unchanged text lines that may lie between two changes of one region (an ASR block's closing tag)
REGION_GAP = 3


class ArmMismatch(UsageError):
    """An arm whose request differs from its parent's by more than its cue: the delta would
    measure more than the cue. Names the item, the arm, its parent and the first part that differs."""

    def __init__(self, item: str, arm: str, parent: str, cue: str, what: str):
        self.item, self.arm, self.parent, self.cue, self.what = item, arm, parent, cue, what
        super().__init__(
            f"item {item!r}: arm {arm} differs from {parent} by more than {cue}: {what}"
            " (its delta would measure more than the cue; fix the prompt template or the stack)"
        )


@dataclass
class ArmCounts:
    """What one arm changed in its parent's requests, summed over the items compared."""

    arm: str
    parent: str
    cue: str
    items: int = 0
    tags_removed: int = 0
    tags_added: int = 0
    lines_removed: int = 0
    lines_added: int = 0
    lines_shortened: int = 0
    images_removed: int = 0
    images_replaced: int = 0
    images_added: int = 0
    media_removed: int = 0
    media_added: int = 0
    parts_moved: int = 0
    unpaired: int = 0  # items one of the two has and the other has not (a packed request, a refused clip)

    def said(self) -> str:
        """One line: what changed, and what stayed identical."""
        counted = [
            (self.tags_removed, "tags removed"), (self.tags_added, "tags added"),
            (self.lines_removed, "text lines removed"), (self.lines_added, "text lines added"),
            (self.lines_shortened, "text lines shortened"), (self.images_removed, "images removed"),
            (self.images_replaced, "images replaced"), (self.images_added, "images added"),
            (self.media_removed, "sound/video parts removed"), (self.media_added, "sound/video parts added"),
            (self.parts_moved, "parts moved"),
        ]  # fmt: skip
        changed = [f"{n:,} {what}" for n, what in counted if n]
        text = self.tags_removed + self.tags_added + self.lines_removed + self.lines_added + self.lines_shortened
        same = [
            name
            for name, n in (
                ("images", self.images_removed + self.images_replaced + self.images_added),
                ("audio and video", self.media_removed + self.media_added),
                ("the order of the parts", self.parts_moved),
            )
            if not n
        ]
        same += ["the other text"] if text else ["the text"]
        head = "; ".join(changed) if changed else "nothing changed"
        tail = f" ({self.unpaired} items not paired)" if self.unpaired else ""
        return f"{head} over {self.items} {'item' if self.items == 1 else 'items'}; {', '.join(same)} identical{tail}"


@dataclass(frozen=True)
class Atom:
    """One comparable piece of a request: a line of the system prompt or of a text part, or one
    medium by its bytes. `key` is what is compared; `part` says where it is, for the error."""

    kind: str  # system | text | image | audio | video
    key: str
    part: int = -1

    def where(self) -> str:
        if self.kind == "system":
            return f"system prompt line {self.key[:60]!r}"
        if self.kind == "text":
            return f"part {self.part} (text {self.key[:60]!r})"
        return f"part {self.part} ({self.kind})"


def _digest(path: Path, memo: dict[Path, str]) -> str:
    if path not in memo:
        try:
            memo[path] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            memo[path] = f"unreadable:{path}"  # the run records it as the item's failure
    return memo[path]


def atoms(req: Request, memo: dict[Path, str] | None = None) -> list[Atom]:
    """A request as comparable atoms, in order (media by their bytes, not their names)."""
    memo = {} if memo is None else memo
    out = [Atom("system", line) for line in req.system.split("\n")]
    for k, part in enumerate(req.parts):
        if isinstance(part, Text):
            out += [Atom("text", line, k) for line in part.text.split("\n")]
        elif isinstance(part, (Image, Audio, Video)):
            out.append(Atom(type(part).__name__.lower(), _digest(req.path_of(part), memo), k))
    return out


INDEX_TAG = re.compile(r"^<frame_index>\d+$")  # the `index` format's tag tells a position, no time


def is_tag(line: str) -> bool:
    line = line.strip()
    return bool(line) and (
        any(parse_frame_tag(f, line) is not None for f in TAG_FORMATS) or bool(INDEX_TAG.match(line))
    )


def shortened(before: str, after: str) -> bool:
    """Is `after` `before` with some characters deleted (nothing added, nothing reordered)?"""
    if len(after) >= len(before):
        return False
    ops = difflib.SequenceMatcher(None, before, after, False).get_opcodes()
    return all(op in ("equal", "delete") for op, *_ in ops)


@dataclass
class _Diff:
    removed: list[Atom] = field(default_factory=list)
    added: list[Atom] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)  # where, in the parent's atoms


def _first_bad(parent: list[Atom], arm: list[Atom], changes: Changes, counts: ArmCounts) -> str | None:
    """Count what changed; the first change `changes` does not allow, described, or None."""
    if changes.order == "permuted" and changes.text == "none":
        if sorted((a.kind, a.key) for a in parent) != sorted((a.kind, a.key) for a in arm):
            gone = next(a for a in parent if (a.kind, a.key) not in {(b.kind, b.key) for b in arm})
            return f"{gone.where()} is not among the arm's parts (a layout may only move parts)"
        counts.parts_moved += sum(a.key != b.key for a, b in zip(parent, arm, strict=False))
        return None
    matcher = difflib.SequenceMatcher(None, [(a.kind, a.key) for a in parent], [(a.kind, a.key) for a in arm], False)
    diff = _Diff()
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        diff.removed += parent[i1:i2]
        diff.added += arm[j1:j2]
        diff.spans.append((i1, i2))
        if op == "replace":
            bad = _replaced(parent[i1:i2], arm[j1:j2], changes, counts)
            if bad:
                return bad
        else:
            bad = _one_sided(parent[i1:i2] if op == "delete" else arm[j1:j2], op == "delete", changes, counts)
            if bad:
                return bad
    return _moved(diff, changes, counts) or _outside_region(diff, parent, changes)


def _media_ok(kind: str, removed: int, added: int, changes: Changes) -> bool:
    mode = changes.images if kind == "image" else changes.media
    if mode == "any":
        return True
    if mode == "fewer":
        return added == 0
    if mode == "replaced":
        return added == removed
    return removed == added == 0


def _replaced(old: Sequence[Atom], new: Sequence[Atom], changes: Changes, counts: ArmCounts) -> str | None:
    for kind in ("image", "audio", "video"):
        r, a = sum(x.kind == kind for x in old), sum(x.kind == kind for x in new)
        if not _media_ok(kind, r, a, changes):
            where = next(x for x in (*new, *old) if x.kind == kind)
            return f"{where.where()} differs (an arm dropping {changes.cue} keeps its {kind}s as they are)"
        _count_media(kind, r, a, counts)
    old_text = [x for x in old if x.kind in ("text", "system")]
    new_text = [x for x in new if x.kind in ("text", "system")]
    if changes.text == "any" or changes.text == "region":
        counts.lines_removed += len(old_text)
        counts.lines_added += len(new_text)
        return None
    # lines whose words were partly deleted (the words that introduce a dropped cue), paired in order;
    # the rest are removed or added lines, each judged on its own
    removed, rest_new = [], list(new_text)
    for x in old_text:
        if rest_new and changes.text in ("tags", "retag", "fewer") and shortened(x.key, rest_new[0].key):
            counts.lines_shortened += 1
            rest_new.pop(0)
        else:
            removed.append(x)
    return _one_sided(removed, True, changes, counts) or _one_sided(rest_new, False, changes, counts)


def _count_media(kind: str, removed: int, added: int, counts: ArmCounts) -> None:
    if kind == "image":
        both = min(removed, added)
        counts.images_replaced += both
        counts.images_removed += removed - both
        counts.images_added += added - both
    else:
        counts.media_removed += removed
        counts.media_added += added


def _one_sided(run: Sequence[Atom], removed: bool, changes: Changes, counts: ArmCounts) -> str | None:
    """Atoms only the parent has (`removed`) or only the arm has."""
    for kind in ("image", "audio", "video"):
        n = sum(x.kind == kind for x in run)
        if n and not _media_ok(kind, n if removed else 0, 0 if removed else n, changes):
            where = next(x for x in run if x.kind == kind)
            verb = "is missing from" if removed else "is only in"
            return f"{where.where()} {verb} the arm ({changes.cue} may not change the {kind}s)"
        _count_media(kind, n if removed else 0, 0 if removed else n, counts)
    for x in (x for x in run if x.kind in ("text", "system")):
        if not x.key.strip():
            continue  # a blank line a template leaves or not
        tag = is_tag(x.key) and x.kind == "text"
        text = changes.text
        if removed:
            ok = text in ("any", "region", "fewer") or (tag and text in ("tags", "retag"))
        else:
            ok = text in ("any", "region") or (tag and text == "retag")
        if not ok:
            verb = "removed" if removed else "added"
            return f"{x.where()} {verb} ({changes.cue} may change {_may(changes)} only)"
        if tag:
            counts.tags_removed += removed
            counts.tags_added += not removed
        else:
            counts.lines_removed += removed
            counts.lines_added += not removed
    return None


def _may(changes: Changes) -> str:
    return {
        "none": "nothing",
        "tags": "the frame time tags and the words that introduce them",
        "retag": "the frame time tags",
        "fewer": "what it leaves out",
        "region": "one stretch of text",
    }.get(changes.text, "anything")


def _moved(diff: _Diff, changes: Changes, counts: ArmCounts) -> str | None:
    """A part the arm has elsewhere (a delete here, an insert there): moved, unless allowed."""
    gone = {(a.kind, a.key) for a in diff.removed if a.key.strip()}
    moved = [a for a in diff.added if a.key.strip() and (a.kind, a.key) in gone]
    if moved and changes.order != "permuted":
        return f"{moved[0].where()} moved (an arm dropping {changes.cue} keeps every other part in its place)"
    counts.parts_moved += len(moved)
    return None


def _outside_region(diff: _Diff, parent: list[Atom], changes: Changes) -> str | None:
    """`region`: every change within one stretch of text (gaps of a few unchanged text lines)."""
    if changes.text != "region" or len(diff.spans) < 2:
        return None
    spans = sorted(diff.spans)
    for (_, end), (start, _) in zip(spans, spans[1:]):
        gap = parent[end:start]
        if len(gap) > REGION_GAP or any(a.kind not in ("text", "system") for a in gap):
            where = parent[start] if start < len(parent) else parent[-1]
            return f"{where.where()} changed apart from the {changes.cue} text (a second place)"
    return None


# ------------------------------------------------------------------------------------ arms


@dataclass(frozen=True)
class Arm:
    """An arm, the arm it is compared with, and what it may change there."""

    name: str
    parent: str
    changes: Changes


def arms_of(stacks: Sequence[Any]) -> list[Arm]:
    """Each stack's parent among the earlier stacks (the nearest one it declares itself one step
    from: `changes_from`), the baseline excepted. A stack without one is compared with nothing."""
    out = []
    for k, stack in enumerate(stacks):
        declares = getattr(stack, "changes_from", None)
        if not callable(declares):
            continue
        for other in stacks[:k][::-1]:  # the nearest earlier one (the baseline comes first, an A/A arm last)
            changes = declares(other)
            if changes is not None:
                out.append(Arm(stack.name, other.name, changes))
                break
    return out


def item_of(req: Request) -> str:
    return str(req.meta.get("item_id") or req.meta.get("clip_id") or "?")


def check_arms(arms: Sequence[Arm], requests: Mapping[str, Sequence[Request]]) -> list[ArmCounts]:
    """Compare every arm's request with its parent's, item by item; raises ArmMismatch at the first
    undeclared difference, else returns what each arm changed."""
    memo: dict[Path, str] = {}
    out = []
    for arm in arms:
        counts = ArmCounts(arm.name, arm.parent, arm.changes.cue)
        mine = {item_of(r): r for r in requests.get(arm.name, ())}
        theirs = {item_of(r): r for r in requests.get(arm.parent, ())}
        counts.unpaired = len(set(mine) ^ set(theirs))
        for item in sorted(set(mine) & set(theirs)):
            bad = _first_bad(atoms(theirs[item], memo), atoms(mine[item], memo), arm.changes, counts)
            if bad:
                raise ArmMismatch(item, arm.name, arm.parent, arm.changes.cue, bad)
            counts.items += 1
        out.append(counts)
    return out


def changes_section(counts: Sequence[ArmCounts] | Sequence[Mapping[str, Any]]) -> str:
    """The report's "What each arm changes": one line an arm, counted over the items."""
    rows = [c if isinstance(c, ArmCounts) else ArmCounts(**c) for c in counts]
    if not rows:
        return ""
    lines = ["", "## What each arm changes", ""]
    lines += ["Each arm's requests against those of the arm it is one step from, item by item, before sending:"]
    lines += ["anything beyond what its cue may change stops the plan (avstack.runs.ablation.integrity).", ""]
    lines += [f"- `{c.arm}` against `{c.parent}` ({c.cue}): {c.said()}" for c in rows]
    return "\n".join([*lines, ""])
