"""Export EgoGap items for fine-tuning: ms-swift multimodal SFT JSONL with an image-level split."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from avstack.io import atomic_write
from avstack.tasks.egogap.data import EgoGapDataError, Item, image_path, relative_name
from avstack.tasks.egogap.prompt import build_prompt


def split_of(item: Item, test_fraction: float, seed: int) -> str:
    """train or test, decided by the IMAGE (bundle), so no image lands on both sides."""
    h = int(hashlib.sha256(f"{seed}:{item.bundle_uid}".encode()).hexdigest()[:12], 16) / 16**12
    return "test" if h < test_fraction else "train"


def swift_record(item: Item, image: str, style: str, rationale: str | None) -> dict[str, object]:
    """ms-swift's messages + images format; `<image>` marks where the image goes in the user turn."""
    answer: dict[str, object] = {"answer": item.correct_letter}
    if rationale:
        answer["rationale"] = rationale
    return {
        "messages": [
            {"role": "user", "content": "<image>" + build_prompt(item, style)},
            {"role": "assistant", "content": json.dumps(answer, ensure_ascii=False)},
        ],
        "images": [image],
        "uid": item.uid,
        "image_id": item.image_id,
    }


def load_rationales(path: str | Path | None) -> dict[str, str]:
    """JSONL lines {"uid", "rationale"} (e.g. written by a teacher model); empty when no file."""
    if path is None:
        return {}
    out = {}
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rec = json.loads(line)
                out[str(rec["uid"])] = str(rec["rationale"])
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise EgoGapDataError(f"{path}:{n}: expected {{'uid', 'rationale'}}; {exc}") from None
    return out


def export_ms_swift(
    items: list[Item],
    out: str | Path,
    images: str | Path | None = None,
    style: str = "default",
    test_fraction: float = 0.2,
    seed: int = 0,
    rationales: dict[str, str] | None = None,
) -> dict[str, object]:
    """Writes out/train.jsonl and out/test.jsonl; returns counts and per-item problems (missing images)."""
    out = Path(out)
    lines: dict[str, list[str]] = {"train": [], "test": []}
    problems = []
    for item in items:
        try:
            img = str(image_path(item, images)) if images else relative_name(item)
        except EgoGapDataError as exc:
            problems.append(str(exc))
            continue
        rec = swift_record(item, img, style, (rationales or {}).get(item.uid))
        lines[split_of(item, test_fraction, seed)].append(json.dumps(rec, ensure_ascii=False))
    for split, body in lines.items():
        atomic_write(out / f"{split}.jsonl", ("\n".join(body) + "\n" if body else "").encode())
    return {"train": len(lines["train"]), "test": len(lines["test"]), "problems": problems}


def export_bundles(
    bundles: str | Path,
    out: str | Path,
    images: str | Path | None = None,
    style: str = "default",
    test_fraction: float = 0.2,
    seed: int = 0,
    rationales: str | Path | None = None,
) -> dict[str, Any]:
    """`egogap export --to ms-swift` from a bundles file (see export_ms_swift)."""
    from avstack.tasks.egogap.data import load_bundles

    return export_ms_swift(load_bundles(bundles), out, images, style, test_fraction, seed, load_rationales(rationales))
