"""Benchmarks as tasks. Each `tasks/<name>/` package provides a `TASK` (see `Task`) in its
`task` module; this registry names them. The core (every other part of avstack but the front
door, api.py) never imports from here: tasks build on the core, not the other way round.

To add a benchmark: write `tasks/<name>/` with a `task.py` whose `TASK` fills in `Task`, and add
one line to `REGISTRY`.

May import: any part of avstack but the front door.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from avstack.analysis.tables import Report
from avstack.io import Progress
from avstack.preparation.discover import Layout
from avstack.runs.engine import RunSettings
from avstack.runs.runners import Backend, make_backend

REGISTRY: dict[str, str] = {  # task name -> module holding its TASK
    "ecog": "avstack.tasks.ecog.task",
    "egogap": "avstack.tasks.egogap.task",
    "videoqa": "avstack.tasks.videoqa.task",
}
# the folder layouts `prepare` recognises, by module and name: importing a layout must not import
# its whole task (a frames job's driver would load OpenCV, numpy and the back-ends for nothing);
# tests/test_layering.py holds this equal to the tasks' own `layouts`
LAYOUTS: tuple[tuple[str, str], ...] = (("avstack.tasks.ecog.layout", "ecog_layout"),)


@dataclass(frozen=True)
class TaskInputs:
    """What a task reads beside the prepared folder, as the command line gave it; a task refuses
    what it does not take (naming it), never ignores it."""

    questions: Path | None = None
    questions_format: str = "auto"
    prompt: Path | None = None
    asr: str | None = None  # EcoG: whose words (whisper, or the annotations' source)
    coord_order: str = "xy"  # EcoG: the order of a point's coordinates in answers
    bundles: Path | None = None  # EgoGap: the *.bundles.jsonl file
    images: Path | None = None  # EgoGap: the image folder
    style: str = "default"  # EgoGap: the prompt style

    def given(self) -> list[str]:
        """The inputs set away from their defaults, by their flag names."""
        wanted = {
            "questions": self.questions is not None,
            "asr": self.asr is not None,
            "coord_order": self.coord_order != "xy",
            "bundles": self.bundles is not None,
            "images": self.images is not None,
            "style": self.style != "default",
        }
        return [name for name, on in wanted.items() if on]


def needs_prepared(task: str, prepared: Path | None) -> Path:
    if prepared is None:
        raise ValueError(f"--task {task} needs the PREPARED folder (written by `avstack prepare`)")
    return Path(prepared)


def refuse_inputs(task: str, inputs: TaskInputs, takes: Sequence[str]) -> None:
    refuse_flags(task, inputs.given(), takes)


def refuse_flags(task: str, given: Sequence[str], takes: Sequence[str]) -> None:
    """An option a task has no use for is an error naming it, never ignored."""
    extra = [n for n in given if n not in takes]
    said = {"frame_budget": "fps/--max-frames"}  # one option, two flags
    if extra:
        raise ValueError(f"--task {task} takes no {', '.join('--' + said.get(n, n.replace('_', '-')) for n in extra)}")


@dataclass(frozen=True)
class StackChoice:
    """The one stack a `run` asks for, as the command line gave it: each task makes its own stack
    of it (EcoG and videoqa an input stack of anchors, EgoGap a condition) and refuses, naming
    them, the fields it has no use for."""

    variant: str = "full"
    drop: tuple[str, ...] = ()
    ts_format: str = "ms"
    word_ts_format: str = "json"
    options: str = "all"  # EgoGap: all, n3, swap_motor
    shuffle_seed: int | None = None  # EgoGap: the options shuffled and re-lettered
    max_side: int = 512  # EgoGap: the downscale variant's longest side
    layout: str = "benchmark"  # EcoG, videoqa: where what a clip's stacks share goes
    budget: Any = None  # EcoG, videoqa: a prompting.budget.FrameBudget (--fps, --max-frames); None: every frame
    packed: bool = False  # videoqa: all of a video's questions in one request (--pack)

    def given(self) -> list[str]:
        """The fields set away from their defaults, by their flag names (the variant apart)."""
        wanted = {
            "drop": bool(self.drop),
            "ts_format": self.ts_format != "ms",
            "word_ts_format": self.word_ts_format != "json",
            "options": self.options != "all",
            "shuffle_seed": self.shuffle_seed is not None,
            "max_side": self.max_side != 512,
            "layout": self.layout != "benchmark",
            "frame_budget": self.budget is not None and not self.budget.unbounded,
            "pack": self.packed,
        }
        return [name for name, on in wanted.items() if on]

    def anchors(self, task: str, more: tuple[str, ...] = ()) -> Any:
        """The input stack of anchors this choice names (EcoG, videoqa; `more`: the task's own flags)."""
        from avstack.prompting.budget import FrameBudget
        from avstack.prompting.stacks import make_stack

        refuse_flags(task, self.given(), ("drop", "ts_format", "word_ts_format", "layout", "frame_budget", *more))
        budget = self.budget or FrameBudget()
        s = (self.variant, self.drop, self.ts_format, self.word_ts_format, self.layout)
        return make_stack(*s, budget, self.packed)


@dataclass(frozen=True)
class RunJob:
    """What `avstack run` asks of a task: the engine's part is common; the prepared folder, the
    task's inputs and the stack are typed records the task reads (and refuses what it cannot use)."""

    model: str
    out: Path
    settings: RunSettings
    backend_options: Mapping[str, Any]
    prepared: Path | None = None
    inputs: TaskInputs = TaskInputs()
    stack: StackChoice = StackChoice()
    progress: Progress | None = None


@dataclass(frozen=True)
class Outcome:
    """What a command prints: the summary (stdout), notes (stderr), and whether it failed."""

    summary: str
    notes: tuple[str, ...] = ()
    failed: bool = False
    result: Any = None


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
    # the task as the ablation engine sees it (avstack.runs.ablation.AblationTask), for a prepared
    # folder and the task's inputs; None: the task has no ablation
    ablation: Callable[[Path | None, TaskInputs], Any] | None = None
    # `avstack stacks`: each item's rendered request under one stack into a JSONL file, in a format
    # (openai, gemini, hf, neutral) with media as paths or inline; returns how many; None: none
    write_requests: Callable[[Path, TaskInputs, Path, Any, str, str], int] | None = None
    truth: str = "gt"  # what `avstack score` reads the truth from: gt, bundles or questions (its flag)


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
        raise ValueError(f"task must be one of {', '.join(REGISTRY)}; found {name!r}")
    task: Task = importlib.import_module(REGISTRY[name]).TASK
    return task


def all_tasks() -> list[Task]:
    return [get_task(n) for n in REGISTRY]


def task_of_run(meta: Mapping[str, Any]) -> Task:
    """The task a run folder's run.json belongs to (runs from before the field say EcoG)."""
    return get_task(str(meta.get("task") or "ecog"))


def backend_for(task: str, spec: str, **options: Any) -> Backend:
    """A back-end for a task's requests: the task's own baselines, or a model back-end."""
    return make_backend(spec, get_task(task).baselines, **options)


def all_layouts() -> list[Layout]:
    return [getattr(importlib.import_module(module), name) for module, name in LAYOUTS]
