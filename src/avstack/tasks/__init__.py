"""Benchmarks as tasks. Each `tasks/<name>/` package provides a `TASK` (see `Task`) in its
`task` module; this registry names them. The core (every other part of avstack but the front
door, avstack.api) never imports from here: tasks build on the core, not the other way round.

To add a benchmark: write `tasks/<name>/` with a `task.py` whose `TASK` fills in `Task`, and add
one line to `REGISTRY`.

May import: any part of avstack but the front door.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from avstack.errors import UsageError
from avstack.options import STACKS, flag_of, given, option
from avstack.prompting.budget import FPS_FLAG, MAX_FRAMES_FLAG, one_budget

if TYPE_CHECKING:  # the registry stays light to import: the command line reads StackChoice from it
    from avstack.analysis.tables import Report
    from avstack.preparation.discover import Layout
    from avstack.runs.sending.engine import Asking
    from avstack.runs.sending.runners import Backend

TS_HELP = "How frame times are told: ms, seconds, mmss, qwen, index, overlay"
WORDS_HELP = "How word times are told: json, srt, inline"
LAYOUT_HELP = (
    "Where what a clip's stacks share goes: benchmark (its own order) or shared-first (the frames with their tags "
    "before the instruction and the ASR block, so a provider's prompt cache serves them)"
)
DEFAULT_TASK = "ecog"  # the task a command runs when --task is not given (and a run.json without one)
REGISTRY: dict[str, str] = {  # task name -> module holding its TASK
    "ecog": "avstack.tasks.ecog.task",
    "egogap": "avstack.tasks.egogap.task",
    "videoqa": "avstack.tasks.videoqa.task",
}
# the folder layouts `prepare` recognises, by module and name: importing a layout must not import
# its whole task (a frames job's driver would load OpenCV, numpy and the back-ends for nothing);
# tests/test_layering.py holds this equal to the tasks' own `layouts`
LAYOUTS: tuple[tuple[str, str], ...] = (("avstack.tasks.ecog.layout", "ecog_layout"),)
# each task's own inputs record, by module and name, for the same reason: the command line is built
# from their declarations, and its start must not import the tasks (tests/test_layering.py holds
# this equal to the tasks' own `inputs`)
INPUTS: tuple[tuple[str, str], ...] = (
    ("avstack.tasks.ecog.inputs", "EcogInputs"),
    ("avstack.tasks.egogap.inputs", "EgogapInputs"),
    ("avstack.tasks.videoqa.inputs", "VideoqaInputs"),
)


def flag_names(names: Sequence[str]) -> str:
    """Fields of StackChoice or of a task's inputs as the flags that set them (each declared once,
    beside its field: avstack.options)."""
    return ", ".join(flag_of(StackChoice, n) for n in names)


def refuse_flags(task: str, given: Sequence[str], takes: Sequence[str]) -> None:
    """An option a task has no use for is an error naming it, never ignored."""
    extra = [n for n in given if n not in takes]
    if extra:
        raise UsageError(f"--task {task} takes no {flag_names(extra)}")


def needs_prepared(task: str, prepared: Path | None) -> Path:
    if prepared is None:
        raise UsageError(f"--task {task} needs the PREPARED folder (written by `avstack prepare`)")
    return Path(prepared)


@dataclass(frozen=True)
class StackChoice:
    """The one input stack a `run` asks for, as the command line gave it (EcoG and videoqa make a
    stack of anchors of it; EgoGap takes only its variant, its conditions being its own inputs);
    a task refuses, naming them, the fields it has no use for."""

    variant: str = option(
        "full",
        "ecog, videoqa: full, video, text, omni, video_asr, sound (videoqa: subtitled, silent, concat, "
        "interleave); egogap: image, vflip, ...",
        panel=STACKS,
    )
    drop: tuple[str, ...] = option(
        (), "Anchor to drop: frame_ts, word_ts, asr, frames (repeatable)", panel=STACKS, many=True
    )
    ts_format: str = option("ms", TS_HELP, panel=STACKS)
    word_ts_format: str = option("json", WORDS_HELP, panel=STACKS)
    # EcoG, videoqa: where what a clip's stacks share goes
    layout: str = option("benchmark", LAYOUT_HELP, panel=STACKS)
    # a prompting.budget.FrameBudget (--fps, --max-frames); None: every frame
    budget: Any = option(None, flags=(FPS_FLAG, MAX_FRAMES_FLAG), parse=one_budget)
    # videoqa: all of a video's questions in one request (--pack)
    packed: bool = option(
        False, "videoqa: all of a video's questions in one request, each answer parsed back", panel=STACKS, name="pack"
    )

    def given(self) -> list[str]:
        """The fields set away from their defaults (the variant apart; an unbounded budget is none)."""
        unbounded = self.budget is not None and self.budget.unbounded
        return [n for n in given(self) if n != "variant" and not (n == "budget" and unbounded)]

    def anchors(self, task: str, packs: bool = False) -> Any:
        """The input stack of anchors this choice names (EcoG, videoqa; `packs`: the task packs)."""
        from avstack.prompting.budget import FrameBudget
        from avstack.prompting.stacks import make_stack

        if self.packed and not packs:
            raise UsageError(f"--task {task} takes no --pack")
        s = (self.variant, self.drop, self.ts_format, self.word_ts_format, self.layout)
        return make_stack(*s, self.budget or FrameBudget(), self.packed)


@dataclass(frozen=True)
class RunJob:
    """What `avstack run` asks of a task, as records it reads whole: who answers and how (the
    engine's Asking: the back-end, already made, its name, the settings, the progress), where the
    run goes, and the prepared folder, the task's own inputs and the stack choice, which the task
    reads (and refuses what it cannot use)."""

    asking: Asking
    out: Path
    prepared: Path | None = None
    inputs: Any = None  # the task's own inputs record (Task.inputs)
    stack: StackChoice = StackChoice()

    @property
    def model(self) -> str:
        """The back-end as the command named it (--model): the run's label."""
        return str(self.asking.backend_id)


@dataclass(frozen=True)
class Outcome:
    """What a command prints: the summary (stdout), notes (stderr), and whether it failed."""

    summary: str
    notes: tuple[str, ...] = ()
    failed: bool = False
    result: object = None


@dataclass(frozen=True)
class Task:
    """What a benchmark provides."""

    name: str
    description: str
    baselines: Mapping[str, Callable[[str], Backend]]  # offline back-ends by name (oracle, chance, ...)
    layouts: Sequence[Layout]  # data-root layouts `prepare` recognises for it
    run: Callable[[RunJob], Outcome]  # run a model and score it
    score: Callable[[Path, Path], Outcome]  # (ground truth file, predictions file) -> scores
    report: Callable[[list[Path], Path, str | None], Report]  # run folders (first = baseline), out, cluster
    # the task as the ablation engine sees it (avstack.runs.ablation.arms.AblationTask), for a prepared
    # folder and the task's inputs; None: the task has no ablation
    ablation: Callable[[Path | None, Any], Any] | None = None
    # `avstack stacks`: each item's rendered request under one stack into a JSONL file, in a format
    # (openai, gemini, hf, neutral) with media as paths or inline; returns how many; None: none
    write_requests: Callable[[Path, Any, Path, Any, str, str], int] | None = None
    truth: str = "gt"  # what `avstack score` reads the truth from: gt, bundles or questions (its flag)
    # the task's own options, a frozen dataclass whose fields are named as their flags (EcoG: asr,
    # coord_order, prompt); what a command offers and the task does not declare is refused
    inputs: type = type(None)
    # the one stack a run sends (StackChoice, the task's inputs) -> a stack: the run and its plan
    # both make it here
    run_stack: Callable[[StackChoice, Any], Any] | None = None
    # `avstack export --task`: (prepared, inputs, stack, runs.exports.ExportOptions) -> the path written
    export: Callable[[Path | None, Any, Any, Any], Path] | None = None
    # `avstack view`: (the first folder, the run folders, out) -> the site's index
    view: Callable[[Path, list[Path], Path], Path] | None = None


def too_many_missing(missing: int, total: int) -> str | None:
    """A score where more than half the items have no prediction measures the ids, not the model."""
    if total and missing * 2 > total:
        return (
            f"{missing} of {total} items have no prediction: the predictions name other ids "
            "(EcoG runs and `ecog gt` use the folder-relative clip id, e.g. 指令3/clip.mp4)"
        )
    return None


def failed_items(failed: int, total: int, causes: Mapping[str, int] | None = None) -> tuple[str, ...]:
    """The note a run prints when some of its items got no answer (a request failed, an input could
    not be read): a failed item is no zero of the model's, and the command exits non-zero."""
    if not failed:
        return ()
    why = "; ".join(f"{n}x {c}" for c, n in (causes or {}).items())
    return (
        f"error: {failed} of {total} items failed{': ' + why if why else ''}; they have no answer, and their"
        " zeros are not the model's. Ask only those again: rerun the same command with --retry-failed",
    )


def get_task(name: str) -> Task:
    if name not in REGISTRY:
        raise UsageError(f"task must be one of {', '.join(REGISTRY)}; found {name!r}")
    task: Task = importlib.import_module(REGISTRY[name]).TASK
    return task


def all_tasks() -> list[Task]:
    return [get_task(n) for n in REGISTRY]


def task_of_run(meta: Mapping[str, object]) -> Task:
    """The task a run folder's run.json belongs to (runs from before the field say EcoG)."""
    return get_task(str(meta.get("task") or DEFAULT_TASK))


def task_inputs(task: Task, offered: Mapping[str, object], defaults: Mapping[str, object]) -> object:
    """The task's own inputs record (Task.inputs) from the task options a command offered: one set
    away from its default that the task does not declare is refused, by flag."""
    declared = [f.name for f in fields(task.inputs)] if is_dataclass(task.inputs) else []
    given = [n for n, v in offered.items() if n not in declared and v != defaults.get(n)]
    refuse_flags(task.name, given, declared)
    return task.inputs(**{n: v for n, v in offered.items() if n in declared})


def task_input_records() -> list[type]:
    """Every registered task's own inputs record (Task.inputs), each declaring its flags; the
    tasks themselves are not imported."""
    return [getattr(importlib.import_module(module), name) for module, name in INPUTS]


def input_names() -> list[str]:
    """Every registered task's own options, by name (their flags), each once."""
    names = [f.name for task in all_tasks() if is_dataclass(task.inputs) for f in fields(task.inputs)]
    return list(dict.fromkeys(names))


def backend_for(task: str, spec: str, **options: Any) -> Backend:
    """A back-end for a task's requests: the task's own baselines, or a model back-end."""
    from avstack.runs.sending.runners import make_backend

    return make_backend(spec, get_task(task).baselines, **options)


def all_layouts() -> list[Layout]:
    return [getattr(importlib.import_module(module), name) for module, name in LAYOUTS]
