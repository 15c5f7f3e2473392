"""What every command shares: the Typer apps, progress bars, the options shared by several
commands, and the one mapping of errors to exit codes: the door's error root (AvstackError) ends a
command in one line naming what was expected and what was found; anything else is a bug and keeps
its traceback. cli/ imports nothing of avstack but the door (avstack.api)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer

import avstack.api as door

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Egocentric clips -> model inputs -> scores.")


ecog_app = typer.Typer(no_args_is_help=True, help="EcoG-Bench helpers.")


app.add_typer(ecog_app, name="ecog")


egogap_app = typer.Typer(no_args_is_help=True, help="EgoGapBench helpers: prompts, export.")


app.add_typer(egogap_app, name="egogap")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"avstack {door.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Egocentric clips -> model inputs -> scores."""


T = TypeVar("T")


ALIGN_HELP = (
    "What times the words: auto (= acoustic: phone HMMs for English and Mandarin, else self), self, none, "
    "or a model name"
)


QUESTIONS_HELP = "videoqa: the questions file (JSONL/CSV; Charades-STA .txt, QVHighlights .jsonl, Video-MME table)"


QFORMAT_HELP = "videoqa: auto, generic, charades, qvhighlights or videomme"


DROP_HELP = "Anchor to drop: frame_ts, word_ts, asr, frames (repeatable)"


LONG_ASR_S = 60.0  # a clip whose ASR gets a progress line of its own


def progress(items: Iterable[T], total: int, label: str = "clips") -> Iterable[T]:
    """A progress bar on stderr (quiet when stderr is not a terminal); for clip records it also
    counts the failed and the cached ones."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    cols = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    failed = cached = 0
    with Progress(*cols, transient=False, disable=not sys.stderr.isatty()) as bar:
        task = bar.add_task(label, total=total)
        asr: list[Any] = []  # the line of a long clip's ASR, while one is being transcribed

        def heard(done_s: float, total_s: float) -> None:
            # a clip of a minute or more: its ASR advances on a line of its own, seconds of audio
            if total_s < LONG_ASR_S:
                return
            if not asr:
                asr.append(bar.add_task("  ASR of a long clip (s of audio)", total=round(total_s)))
            bar.update(asr[0], completed=round(done_s), total=round(total_s))

        with door.asr_progress(heard):
            for item in items:
                yield item
                if asr:
                    bar.remove_task(asr.pop())
                failed += int(bool(getattr(item, "error", None)))
                cached += int(bool(getattr(item, "cache_hit", False)))
                note = f" ({failed} failed, {cached} cached)" if hasattr(item, "cache_hit") else ""
                bar.update(task, advance=1, description=label + note)


def fail(message: str, code: int = 2) -> NoReturn:
    typer.echo(f"error: {door.scrub(message)}", err=True)
    raise typer.Exit(code)


# what the commands' back-end options default to: BackendOptions' own defaults
BACKEND = door.BackendOptions()


# the topics options are grouped by in --help (typer's help panels)
TASK, STACKS, MODEL, SEND, PLAN, ROUNDS, OUTPUT = (
    "Task and its inputs",
    "Input stacks",
    "Model",
    "Sending",
    "Plan and cost",
    "Rounds and statistics",
    "Output",
)

# options the commands share, declared once
BatchOption = Annotated[
    bool,
    typer.Option(
        "--batch", help="Send through the provider's batch API (about half the price; resumable)", rich_help_panel=SEND
    ),
]
BatchPollOption = Annotated[float, typer.Option(help="--batch: seconds between polls", rich_help_panel=SEND)]
RetryFailedOption = Annotated[
    bool,
    typer.Option(
        "--retry-failed",
        help="Ask again the items whose request failed (refused, 4xx, no answer)",
        rich_help_panel=SEND,
    ),
]
TemperatureOption = Annotated[
    float, typer.Option(help="Sampling temperature (recorded, part of the answer key)", rich_help_panel=MODEL)
]
MaxTokensOption = Annotated[
    int, typer.Option(help="Longest answer in tokens (recorded, part of the answer key)", rich_help_panel=MODEL)
]
JsonModeOption = Annotated[
    bool,
    typer.Option(
        "--json-mode/--no-json-mode",
        help="Ask for a JSON answer (response_format json_object, Gemini's JSON MIME type); off to send the "
        "request as a harness without it does (recorded, part of the answer key)",
        rich_help_panel=MODEL,
    ),
]
BaseUrlOption = Annotated[
    str | None, typer.Option(help="OpenAI-compatible server (or OPENAI_BASE_URL)", rich_help_panel=MODEL)
]
TimeoutOption = Annotated[float, typer.Option(help="Seconds per request", rich_help_panel=SEND)]
FpsOption = Annotated[
    str | None,
    typer.Option(
        "--fps",
        help="Frame budget at stack time: at most this many frames a second, picked from the prepared ones "
        "uniformly in time, each at its true pts (ablate: a comma list is an axis)",
        rich_help_panel=STACKS,
    ),
]
MaxFramesOption = Annotated[
    str | None,
    typer.Option(
        "--max-frames",
        help="Frame budget at stack time: at most this many frames, spread evenly in time over the prepared "
        "ones, first and last kept (ablate: a comma list such as 8,32,128 is an axis)",
        rich_help_panel=STACKS,
    ),
]
FitLimitsOption = Annotated[
    bool,
    typer.Option(
        "--fit-limits",
        help="Where a stack would go over the provider's limits (images, bytes, pixels, context), lower its "
        "frame budget to the largest that fits, and record it (else the plan refuses it, naming the limit)",
        rich_help_panel=PLAN,
    ),
]
ProvidersOption = Annotated[
    Path | None,
    typer.Option(
        help="A providers file of your own (JSON, as runs/providers.json): each model family's prompt-cache "
        "rule and request limits (images, bytes, pixels, audio seconds, context tokens)",
        rich_help_panel=PLAN,
    ),
]
ImageRuleOption = Annotated[
    str | None,
    typer.Option(
        help="The image-token rule the plan counts by (default: by the model's name): openai-tiles, "
        "openai-patches, gemini, qwen2-vl, qwen2-vl-llama.cpp, qwen3-vl, internvl, llava-onevision, gemma3, claude",
        rich_help_panel=PLAN,
    ),
]
MaxCostOption = Annotated[
    float | None,
    typer.Option(help="Refuse to start when the plan may cost more (USD, online prices)", rich_help_panel=PLAN),
]
PricesOption = Annotated[
    Path | None, typer.Option(help="A price table of your own (JSON, as runs/prices.json)", rich_help_panel=PLAN)
]


AUDIO_AS_HELP = "OpenAI-compatible servers: how a sound is sent: input_audio (OpenAI, vLLM) or audio_url (vLLM)"
TS_HELP = "How frame times are told: ms, seconds, mmss, qwen, index, overlay"


WORDS_HELP = "How word times are told: json, srt, inline"


LAYOUT_HELP = (
    "Where what a clip's stacks share goes: benchmark (its own order) or shared-first (the frames with "
    "their tags before the instruction and the ASR block, so a provider's prompt cache serves them)"
)


PROMPT_HELP = "A folder of prompt templates (system.j2, user.j2; see README); default: the shipped ones"


prompts_app = typer.Typer(no_args_is_help=True, help="Prompt templates: check a folder of your own.")


app.add_typer(prompts_app, name="prompts")


# each task's own options (tasks/<name>/task.py: its inputs record); the task refuses, by flag,
# those it does not declare
AsrSourceOption = Annotated[
    str | None,
    typer.Option(help="ecog: whose words, whisper (ours) or source (annotations); default ours", rich_help_panel=TASK),
]
CoordOrderOption = Annotated[str, typer.Option(help="ecog: xy or yx", rich_help_panel=TASK)]
PromptOption = Annotated[Path | None, typer.Option(help=PROMPT_HELP, rich_help_panel=TASK)]
QuestionsOption = Annotated[Path | None, typer.Option(help=QUESTIONS_HELP, rich_help_panel=TASK)]
QFormatOption = Annotated[str, typer.Option(help=QFORMAT_HELP, rich_help_panel=TASK)]
BundlesOption = Annotated[Path | None, typer.Option(help="egogap: the *.bundles.jsonl file", rich_help_panel=TASK)]
ImagesOption = Annotated[
    Path | None, typer.Option(help="egogap: the image folder (COCO train2017, wikimedia)", rich_help_panel=TASK)
]
StyleOption = Annotated[
    str, typer.Option(help="egogap: the prompt style, default, egoplan or exclusion", rich_help_panel=TASK)
]
OptionsOption = Annotated[
    str, typer.Option(help="egogap: the options, all, n3 (drop off-vantage) or swap_motor", rich_help_panel=TASK)
]
ShuffleOption = Annotated[
    int | None, typer.Option(help="egogap: shuffle and re-letter the options with this seed", rich_help_panel=TASK)
]
MaxSideOption = Annotated[
    int, typer.Option(help="egogap: the downscale variant's longest side in px", rich_help_panel=TASK)
]
WordsOption = Annotated[str, typer.Option(help=WORDS_HELP, rich_help_panel=STACKS)]
AudioAsOption = Annotated[str, typer.Option(help=AUDIO_AS_HELP, rich_help_panel=MODEL)]
AUDIO_FORMAT_HELP = (
    "OpenAI-compatible servers: a sound's WAV samples: auto (as prepared, IEEE float32, where the server "
    "decodes it: llama.cpp, vLLM; else 16-bit PCM), prepared or pcm16"
)
AudioFormatOption = Annotated[str, typer.Option(help=AUDIO_FORMAT_HELP, rich_help_panel=MODEL)]


def records_of(options: dict[str, Any]) -> dict[str, Any]:
    """A command's options as the library call takes them: the back-end's and the plan's gathered
    into their records (avstack.api.BackendOptions, Costing), by their fields' names."""
    from dataclasses import fields

    args = dict(options)
    for name, record in (("backend", door.BackendOptions), ("costing", door.Costing)):
        args[name] = record(**{f.name: args.pop(f.name) for f in fields(record) if f.name in args})
    return args


def shown(done: Any) -> None:
    """What a command did: its summary, then its notes and any arm whose input departed (stderr)."""
    if done.summary:
        typer.echo(done.summary)
    for note in done.notes:
        typer.echo(note, err=True)
    for arm, said in done.departed.items():
        typer.echo(f"{arm}: input departs from the plan: {said}", err=True)


@contextmanager
def ended() -> Iterator[None]:
    """A library call's ending as a command's: the door's errors (AvstackError) end in one line
    and exit with their code; a command that ran and failed (CommandFailed) shows what it wrote
    first, naming the stacks whose requests failed and the command that asks only those again.
    Ctrl-C: 130. Any other exception is a bug: its traceback is kept."""
    import shlex

    try:
        yield
    except door.CommandFailed as exc:
        if exc.done is None:
            fail(str(exc), exc.code)
        shown(exc.done)
        for stack, f in exc.done.failed.items():
            causes = "; ".join(f"{n}x {c}" for c, n in f["causes"].items())
            typer.echo(f"{stack}: {f['request_failures']} of {f['clips']} requests failed: {causes}", err=True)
        if exc.done.failed:
            again = [a for a in sys.argv[1:] if a != "--retry-failed"]
            command = " ".join(shlex.quote(a) for a in ["avstack", *again, "--retry-failed"])
            fail(f"{exc}; ask only those items again: {command}", exc.code)
        if str(exc) not in exc.done.notes:
            fail(str(exc), exc.code)
        raise typer.Exit(exc.code) from None
    except door.AvstackError as exc:
        fail(str(exc), exc.code)
    except KeyboardInterrupt:
        fail("interrupted; what was finished is kept and a rerun goes on from there", 130)
