"""Running models over EgoGap items with the shared engine (retries, cache, resumable results)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from avstack.io import read_json_file, read_predictions, write_json_atomic, write_per_item
from avstack.runs.sending.engine import Asking, WorkItem, run_items
from avstack.tasks.egogap.data import EgoGapDataError, Item, load_bundles
from avstack.tasks.egogap.inputs import EgogapInputs
from avstack.tasks.egogap.parse import parse_letter
from avstack.tasks.egogap.prompt import PROMPT_VERSION
from avstack.tasks.egogap.scoring import score
from avstack.tasks.egogap.stack import EgoGapStack, present, request_for


def image_cache() -> Path:
    """Where an image variant's pictures go (content-addressed: source bytes + variant), one place
    for the plan, the runs and the exports, so a planned request names the picture sent."""
    return Path(os.environ.get("AVSTACK_CACHE", Path.home() / ".cache" / "avstack")) / "egogap-images"


def work_items(items: list[Item], stack: EgoGapStack, images: Path | None) -> list[WorkItem]:
    """One work item per presented item; a missing image is that item's recorded error."""
    cache = image_cache()
    out = []
    for item in present(items, stack):
        record = {"labels": {let: lab for let, _, lab in item.options}, "kind": item.kind}
        truth = {"correct_letter": item.correct_letter}
        try:
            out.append(WorkItem(item.uid, request_for(item, stack, images, cache), truth, record))
        except (EgoGapDataError, ValueError, OSError) as exc:
            out.append(WorkItem(item.uid, None, truth, record, error=f"input: {exc}"))
    return out


def _parse(text: str, item: WorkItem) -> tuple[dict[str, object], str | None]:
    letter, error = parse_letter(text, sorted(item.record["labels"]))
    return ({"answer": letter} if letter else {}), error


def run_egogap(
    inputs: EgogapInputs,
    stack: EgoGapStack,
    out: str | Path,
    asking: Asking,
    only: set[str] | None = None,
    loaded: list[Item] | None = None,
) -> Path:
    """Answer every item of the inputs' bundles (or those in `only`, by uid; a later call with more
    resumes the same folder) with `asking`'s back-end; `loaded`: the bundles' items read already
    (an ablation reads them once)."""
    out, bundles, images = Path(out), inputs.bundles_file(), inputs.images
    items = loaded if loaded is not None else load_bundles(bundles)
    items = [it for it in items if only is None or it.uid in only]
    meta = {
        "task": "egogap",
        "stack": stack.name,
        "style": stack.style,
        "variant": stack.image,
        "options": stack.options,
        "shuffle_seed": stack.shuffle_seed,
        "prompt_version": PROMPT_VERSION,
        "bundles": str(Path(bundles).resolve()),
        "images": str(Path(images).resolve()) if images else None,
    }
    work = work_items(items, stack, Path(images) if images else None)
    return run_items(work, out, _parse, meta, asking, "uid")


def score_egogap_run(run_dir: str | Path, only: set[str] | None = None) -> dict[str, Any]:
    """Score a run folder against its bundles (recorded in run.json): every item, or those in
    `only`; writes score.json and per_item.csv."""
    run_dir = Path(run_dir)
    meta = read_json_file(run_dir / "run.json", dict)
    items = [it for it in load_bundles(meta["bundles"]) if only is None or it.uid in only]
    result = score(items, read_predictions(run_dir / "predictions.jsonl"))
    write_json_atomic(run_dir / "score.json", result)
    from avstack.tasks.egogap.report import per_item

    write_per_item(run_dir / "per_item.csv", per_item(result))
    return result
