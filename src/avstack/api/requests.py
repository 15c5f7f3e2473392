"""Stacks and the requests they make, through the door: `stack` (an input stack), `render` (one
EcoG clip's request for an API) and `write_stacks` (`avstack stacks`: every item's request)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from avstack.api.failures import speaks_flags
from avstack.api.options import Done
from avstack.manifest import ClipRecord, Prepared
from avstack.options import fold, option
from avstack.tasks import DEFAULT_TASK, StackChoice

if TYPE_CHECKING:
    from avstack.prompting.stacks import Stack

PathLike = str | Path


def stack(
    variant: str = "full", drop: Sequence[str] = (), *, ts_format: str = "ms", word_ts_format: str = "json"
) -> Stack:
    """An input stack: `full` (frames + frame timestamps + word-timed ASR), `video` or `text`, less
    the cues in `drop` (frame_ts, word_ts, asr, frames), with frame times told as `ts_format` (ms,
    seconds, mmss, qwen, index, overlay) and word times as `word_ts_format` (json, srt, inline)."""
    from avstack.prompting.stacks import make_stack

    return make_stack(variant, drop, ts_format, word_ts_format)


def render(
    prepared: PathLike | Prepared,
    record: ClipRecord,
    stack: Stack,
    *,
    format: str = "openai",
    media_mode: str = "path",
    coord_order: str = "xy",
    prompt_dir: PathLike | None = None,
) -> object:
    """One EcoG clip's request under `stack`, rendered for an API: `openai` (chat messages), `gemini`
    (contents), `hf` (chat template messages) or `neutral` (avstack's own request JSON). Images are
    file paths (`media_mode="path"`) or inline data URLs (`"data"`)."""
    from avstack.manifest import data_root_of
    from avstack.prompting.messages import Request
    from avstack.prompting.messages import render as render_request
    from avstack.tasks.ecog.inputs import EcogInputs
    from avstack.tasks.ecog.prompt import build_request

    folder = Path(prepared.path if isinstance(prepared, Prepared) else prepared).resolve()
    options = EcogInputs(coord_order=coord_order, prompt=Path(prompt_dir) if prompt_dir else None)
    req: Request = build_request(record, stack, str(folder), options, data_root_of(folder))
    return req.to_neutral() if format == "neutral" else render_request(req, format, media_mode)


@dataclass(frozen=True)
class Rendering:
    """How `avstack stacks` writes each request: for which API, with media as paths or inline."""

    format: str = option("openai", "openai, gemini, hf or neutral")
    media_mode: str = option("path", "path or data (inline base64)", name="media")


@speaks_flags
def write_stacks(
    prepared: PathLike,
    *,
    out: PathLike,
    task: str = DEFAULT_TASK,
    stack: StackChoice | None = None,
    rendering: Rendering | None = None,
    **keywords: object,
) -> Done:
    """`avstack stacks`: the rendered request of every item of a task (EcoG: every clip; videoqa:
    every question) under one input stack, one JSON line each, into `out`. The stack (StackChoice)
    and the rendering (Rendering: format, media) are records, or their fields by keyword; the
    task's own options by keyword, as for `run` (EcoG: asr, coord_order, prompt; videoqa: ...)."""
    from avstack.api.commands import chosen_task
    from avstack.errors import UsageError

    choice, how = fold(StackChoice, keywords, stack), fold(Rendering, keywords, rendering)
    chosen, inputs = chosen_task(task, keywords)
    if chosen.write_requests is None or chosen.run_stack is None:
        raise UsageError(f"--task {task} has no requests over a prepared folder to write")
    made = chosen.run_stack(choice, inputs)
    n = chosen.write_requests(Path(prepared), inputs, Path(out), made, how.format, how.media_mode)
    return Done(f"wrote {n} requests ({made.name}, {how.format}) to {out}", Path(out))
