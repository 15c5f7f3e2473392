"""EcoG runs: the requests of a prepared folder under one stack, run through the engine, scored."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from avstack.errors import UsageError
from avstack.io import DataError, read_json_file, read_predictions, write_json_atomic, write_per_item
from avstack.manifest import ClipRecord, Prepared, opened
from avstack.prompting.messages import Request
from avstack.prompting.stacks import Stack
from avstack.runs.sending.engine import Asking, WorkItem, run_items
from avstack.tasks.ecog.data import GtClip
from avstack.tasks.ecog.inputs import EcogInputs
from avstack.tasks.ecog.parse import parse_answer
from avstack.tasks.ecog.prompt import PROMPT_VERSION, build_request, prompt_set
from avstack.tasks.ecog.scoring import EcogResult, score


def usable(record: ClipRecord) -> bool:
    return record.ok and bool(record.eval_gt) and bool(record.width) and bool(record.height)


def gt_of(record: ClipRecord) -> GtClip:
    """Ground truth of a prepared clip, keyed by clip_id (unique across folders)."""
    return GtClip(
        video_name=record.clip_id,
        task_template=record.task_template or "",
        width=record.width or 0,
        height=record.height or 0,
        eval_gt=record.eval_gt or {},
        lang=record.lang,
        scene=record.scene,
    )


def requests_for(
    prepared: str | Path | Prepared, stack: Stack, options: EcogInputs = EcogInputs()
) -> tuple[list[tuple[ClipRecord, Request]], list[tuple[ClipRecord, str]]]:
    """The request of every usable clip, and the clips whose record cannot make one (a frame path
    that leaves the prepared folder, ...) with the reason: a manifest is input too."""
    p = opened(prepared)
    root, folder, records = p.data_root, str(p.path.resolve()), p.records
    pairs, problems = [], []
    require_ground_truth(p.path, records)
    for r in records:
        if usable(r):
            req, why = request_or_problem(r, stack, folder, options, root)
            pairs += [(r, req)] if req is not None else []
            problems += [(r, why)] if why is not None else []
    return pairs, problems


NO_ECOG = (
    "{prepared}: none of its {n} clips carries EcoG-Bench ground truth (eval_gt), so there is nothing to ask "
    "or score; a plain folder of videos needs its questions: --task videoqa --questions FILE (or export its "
    "frames and words with `avstack export {prepared} --to features`)"
)


def require_ground_truth(prepared: str | Path, records: Iterable[ClipRecord]) -> None:
    """No silent zero: a prepared folder without one EcoG clip is refused, saying what to supply.
    Stops at the first usable record, so a streamed manifest is read no further than needed."""
    seen = 0
    for r in records:
        if usable(r):
            return
        seen += 1
    raise DataError(NO_ECOG.format(prepared=prepared, n=seen))


def request_or_problem(
    record: ClipRecord, stack: Stack, folder: str, options: EcogInputs, data_root: str | None
) -> tuple[Request | None, str | None]:
    """A clip's request, or why its record cannot make one (a frame path that leaves the folder, ...)."""
    try:
        return build_request(record, stack, folder, options, data_root), None
    except (DataError, ValueError) as exc:
        return None, str(exc)


def prompt_record(options: EcogInputs) -> dict[str, Any]:
    """Which templates made the requests: the folder (or "builtin") and their content hash."""
    folder = str(Path(options.prompt).resolve()) if options.prompt else "builtin"
    return {"templates": folder, "sha256": prompt_set(str(options.prompt) if options.prompt else None).sha256}


def prompt_of(run_dir: str | Path) -> str:
    meta = read_json_file(Path(run_dir) / "run.json", dict)
    prompt = meta.get("prompt") if isinstance(meta.get("prompt"), dict) else {}
    return str(prompt.get("sha256") or "(not recorded)")


def truth_of(record: ClipRecord) -> dict[str, object]:
    return {"eval_gt": record.eval_gt, "width": record.width, "height": record.height}


def run(
    prepared: str | Path | Prepared,
    stack: Stack,
    out: str | Path,
    asking: Asking,
    options: EcogInputs = EcogInputs(),
    only: set[str] | None = None,
) -> Path:
    """Answer every usable EcoG clip of a prepared folder (or those in `only`, by clip id; a later
    call with more resumes the same folder) with `asking`'s back-end; returns the predictions file."""
    prepared = opened(prepared)
    meta = {
        "task": "ecog",
        **stack.to_meta(),
        "prompt_version": PROMPT_VERSION,
        "prepared": str(prepared.path.resolve()),
        "coord_order": options.coord_order,
        "asr_source": options.asr or "default",
        "prompt": prompt_record(options),
    }
    pairs, problems = requests_for(prepared, stack, options)
    if only is not None:
        pairs, problems = [p for p in pairs if p[0].clip_id in only], [p for p in problems if p[0].clip_id in only]
    items = [WorkItem(r.clip_id, q, truth_of(r)) for r, q in pairs]
    items += [WorkItem(r.clip_id, None, truth_of(r), error=f"input: {why}") for r, why in problems]

    def parse(text: str, item: WorkItem) -> tuple[dict[str, object], str | None]:
        return parse_answer(text, options.coord_order)

    return run_items(items, out, parse, meta, asking, "video_name")


def score_and_write(
    run_dir: str | Path, prepared: str | Path | Prepared | None = None, only: set[str] | None = None
) -> tuple[str, EcogResult, dict[str, Any]]:
    """Score a run folder once against its prepared folder (recorded in run.json unless given),
    over every usable clip or those in `only`; writes score.json; returns (label, result, score JSON)."""
    run_dir = Path(run_dir)
    meta = read_json_file(run_dir / "run.json", dict)
    prepared = prepared if prepared is not None else meta.get("prepared")
    if not isinstance(prepared, (str, Path, Prepared)):
        raise UsageError(f"{run_dir / 'run.json'}: no 'prepared' folder recorded")
    clips = [gt_of(r) for r in opened(prepared) if usable(r) and (only is None or r.clip_id in only)]
    result = score(clips, read_predictions(run_dir / "predictions.jsonl"))
    js = result.to_json()
    write_json_atomic(run_dir / "score.json", js)
    write_per_item(run_dir / "per_item.csv", result.per_item())
    return f"{meta.get('backend')} {meta.get('stack')}", result, js


def score_run(prepared: str | Path, run_dir: str | Path) -> dict[str, object]:
    """The score JSON of a run (also written to RUN_DIR/score.json)."""
    return score_and_write(run_dir, prepared)[2]


def load_run(run_dir: str | Path) -> tuple[str, EcogResult, dict[str, object]]:
    """(label, result, score json) of a finished run folder, scored once."""
    return score_and_write(run_dir)
