"""Video-question runs: each question joined with its prepared clip, run through the engine under
one stack, scored with the field's definitions (score.json, per_item.csv)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from avstack.io import DataError, read_json_file, read_predictions, write_json_atomic, write_per_item
from avstack.manifest import ClipRecord, Prepared, data_root_of, opened
from avstack.prompting.stacks import Stack
from avstack.runs.sending.engine import Asking, WorkItem, run_items
from avstack.tasks.videoqa.data import Item, load_questions
from avstack.tasks.videoqa.inputs import VideoqaInputs
from avstack.tasks.videoqa.longform import submissions
from avstack.tasks.videoqa.packing import pack_groups, pack_id, pack_truth, parse_pack, unpacked
from avstack.tasks.videoqa.parse import parse_answer
from avstack.tasks.videoqa.prompt import PROMPT_VERSION, build_packed_request, build_request, prompt_set
from avstack.tasks.videoqa.score import score


def joined(
    prepared: str | Path | Prepared, questions: str | Path, fmt: str = "auto"
) -> tuple[list[tuple[Item, ClipRecord | None]], list[str]]:
    """Each question with the prepared record of its video (None when that video was not prepared
    or failed), and the questions file's row errors."""
    p = opened(prepared)
    items, errors = load_questions(questions, fmt, p.data_root)
    records = {r.video: r for r in p.records}
    if items and not any(it.video in records for it in items):
        raise DataError(
            f"none of the {len(items)} questions of {questions} names a video prepared in {prepared} "
            f"(e.g. {items[0].video!r}; prepared: {next(iter(records), 'none')!r}): video paths are relative to the "
            "data root given to prepare"
        )
    return [(it, records.get(it.video)) for it in items], errors


def work_items(
    pairs: list[tuple[Item, ClipRecord | None]], stack: Stack, prepared: Prepared, inputs: VideoqaInputs
) -> list[WorkItem]:
    root, folder = prepared.data_root, str(prepared.path.resolve())
    out = []
    for item, rec in pairs:
        record = {"kind": item.kind}
        if rec is None or not rec.ok:
            why = "the video was not prepared" if rec is None else f"the video failed to prepare ({rec.error})"
            out.append(WorkItem(item.id, None, item.truth(), record, error=f"input: {why}"))
            continue
        if item.spans and rec.duration_ms is not None and max(b for _, b in item.spans) * 1000 > rec.duration_ms + 500:
            out.append(
                WorkItem(
                    item.id,
                    None,
                    item.truth(),
                    record,
                    error=f"input: {item.source}: span {list(item.spans[0])} s lies outside the clip "
                    f"({rec.duration_ms} ms)",
                )
            )
            continue
        try:
            req = build_request(rec, item, stack, folder, root, inputs)
        except (DataError, ValueError) as exc:
            out.append(WorkItem(item.id, None, item.truth(), record, error=f"input: {exc}"))
            continue
        out.append(WorkItem(item.id, req, item.truth(), record))
    return out


def packed_work_items(
    pairs: list[tuple[Item, ClipRecord | None]], stack: Stack, prepared: Prepared, inputs: VideoqaInputs
) -> tuple[list[WorkItem], dict[str, list[Item]]]:
    """One work item per pack (packing.pack_groups), and each pack's questions by its id; a pack of
    one is asked as a single question would be (its own template), under the pack's id."""
    root, folder = prepared.data_root, str(prepared.path.resolve())
    work, members = [], {}
    for group in pack_groups(pairs):
        items = [it for it, _ in group]
        pid = pack_id(items)
        members[pid] = items
        if len(group) == 1:
            (single,) = work_items(group, stack, prepared, inputs)
            work.append(WorkItem(pid, single.request, pack_truth(items), {"pack": pid}, single.error))
            continue
        rec = group[0][1]
        assert rec is not None  # pack_groups packs only prepared videos
        try:
            req = build_packed_request(rec, items, stack, folder, root, pid, inputs)
        except (DataError, ValueError) as exc:
            work.append(WorkItem(pid, None, pack_truth(items), {"pack": pid}, error=f"input: {exc}"))
            continue
        work.append(WorkItem(pid, req, pack_truth(items), {"pack": pid}))
    return work, members


def run(
    prepared: str | Path | Prepared,
    inputs: VideoqaInputs,
    stack: Stack,
    out: str | Path,
    asking: Asking,
    only: set[str] | None = None,
    joined_pairs: tuple[list[tuple[Item, ClipRecord | None]], list[str]] | None = None,
) -> tuple[Path, list[str]]:
    """Answer every question (or those in `only`, by id; a later call with more resumes the same
    folder) with `asking`'s back-end; returns the predictions file and the questions file's row
    errors. `joined_pairs`: the questions joined with their clips already (`joined`), as an
    ablation holds them for its stacks."""
    prepared = opened(prepared)
    questions, prompt_dir = inputs.questions_file(), inputs.prompt
    pairs, errors = joined_pairs or joined(prepared, questions, inputs.questions_format)
    if only is not None:
        pairs = [(it, rec) for it, rec in pairs if it.id in only]
    by_id = {it.id: it for it, _ in pairs}
    meta = {
        "task": "videoqa",
        **stack.to_meta(),
        "prompt_version": PROMPT_VERSION,
        "prepared": str(prepared.path.resolve()),
        "questions": str(questions.resolve()),
        "questions_format": inputs.questions_format,
        "asr_source": inputs.asr or "default",
        "prompt": {
            "templates": str(prompt_dir or "builtin"),
            "sha256": prompt_set(str(prompt_dir) if prompt_dir else None).sha256,
        },
    }

    if stack.packed:
        return run_packed(pairs, stack, prepared, inputs, Path(out), meta, asking), errors

    def parse(text: str, item: WorkItem) -> tuple[dict[str, object], str | None]:
        return parse_answer(text, by_id[item.id])

    work = work_items(pairs, stack, prepared, inputs)
    return run_items(work, out, parse, meta, asking, "id"), errors


def run_packed(
    pairs: list[tuple[Item, ClipRecord | None]],
    stack: Stack,
    prepared: Prepared,
    inputs: VideoqaInputs,
    out: Path,
    meta: dict[str, object],
    asking: Asking,
) -> Path:
    """Ask the packs into out/packs/ (resumable), then write each question's line from its pack's
    into out/predictions.jsonl, and the run's run.json beside it."""
    from avstack.io import write_jsonl_atomic

    work, members = packed_work_items(pairs, stack, prepared, inputs)

    def parse(text: str, item: WorkItem) -> tuple[dict[str, object], str | None]:
        items = members[item.id]
        return parse_pack(text, items) if len(items) > 1 else _single(text, items[0])

    packs = run_items(work, out / "packs", parse, meta | {"packed": True}, asking, "pack")
    lines = [line for pack in read_predictions(packs) if str(pack.get("pack")) in members
             for line in unpacked(pack, members[str(pack["pack"])])]  # fmt: skip
    write_json_atomic(out / "run.json", read_json_file(out / "packs" / "run.json", dict))
    write_jsonl_atomic(out / "predictions.jsonl", lines)
    return out / "predictions.jsonl"


def _single(text: str, item: Item) -> tuple[dict[str, object], str | None]:
    """A pack of one, parsed as its question and kept in the pack's shape."""
    pred, err = parse_answer(text, item)
    return {"answers": {item.id: {"prediction": pred, "parse_error": err}}}, None


def score_run(run_dir: str | Path, only: set[str] | None = None) -> dict[str, Any]:
    """Score a run folder against its questions (recorded in run.json; all, or those in `only`);
    writes score.json and per_item.csv; returns the score JSON."""
    run_dir = Path(run_dir)
    meta = read_json_file(run_dir / "run.json", dict)
    questions, prepared = meta.get("questions"), meta.get("prepared")
    if not isinstance(questions, str) or not isinstance(prepared, str):
        raise DataError(f"{run_dir / 'run.json'}: not a videoqa run (no questions or prepared folder recorded)")
    items, _ = load_questions(questions, str(meta.get("questions_format") or "auto"), data_root_of(prepared))
    items = [it for it in items if only is None or it.id in only]
    predictions = read_predictions(run_dir / "predictions.jsonl")
    result = score(items, predictions)
    write_per_item(run_dir / "per_item.csv", result["per_item"])
    for name, content in submissions(items, predictions).items():  # what the benchmark's own server takes
        write_json_atomic(run_dir / name, content)
    js = {k: v for k, v in result.items() if k != "per_item"} | {
        "backend": meta.get("backend"),
        "stack": meta.get("stack"),
    }
    write_json_atomic(run_dir / "score.json", js)
    return result


def write_requests(
    prepared: str | Path, inputs: VideoqaInputs, out: str | Path, stack: Stack, fmt: str = "openai", media: str = "path"
) -> int:
    """The rendered request of every question under one stack, one JSON line each; a question whose
    request cannot be made is refused, named."""
    from avstack.io import write_jsonl_atomic
    from avstack.prompting.messages import render

    pairs, errors = joined(prepared, inputs.questions_file(), inputs.questions_format)
    items = work_items(pairs, stack, opened(prepared), inputs)
    bad = [f"{w.id}: {w.error}" for w in items if w.request is None] + errors
    if bad:
        raise DataError(f"{len(bad)} questions cannot be rendered: " + "; ".join(bad[:3]))
    lines = [
        {
            "id": w.id,
            "kind": w.record.get("kind"),
            "stack": stack.name,
            "format": fmt,
            "request": render(w.request, fmt, media),
        }
        for w in items
        if w.request is not None
    ]
    write_jsonl_atomic(out, lines)
    return len(lines)
