"""The `avstack` command line: each command parses its options and calls one library function.

Errors a user can cause (bad data, a bad option, a full disk, a wrong key) end the command with
one line naming what was expected and what was found; never a traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Egocentric clips -> model inputs -> scores.")
ecog_app = typer.Typer(no_args_is_help=True, help="EcoG-Bench helpers.")
app.add_typer(ecog_app, name="ecog")
egogap_app = typer.Typer(no_args_is_help=True, help="EgoGapBench helpers: prompts, export.")
app.add_typer(egogap_app, name="egogap")


def _print_version(value: bool) -> None:
    if value:
        from avstack import __version__

        typer.echo(f"avstack {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Egocentric clips -> model inputs -> scores."""


T = TypeVar("T")
ALIGN_HELP = "What times the words: auto (= acoustic: phone HMMs for English, else self), self, none, or a model name"
QUESTIONS_HELP = "videoqa: the questions file (JSONL/CSV; Charades-STA .txt, QVHighlights .jsonl, Video-MME table)"
QFORMAT_HELP = "videoqa: auto, generic, charades, qvhighlights or videomme"
DROP_HELP = "Anchor to drop: frame_ts, word_ts, asr, frames (repeatable)"


def progress(items: Iterable[T], total: int, label: str = "clips") -> Iterable[T]:
    """A progress bar on stderr (quiet when stderr is not a terminal); for clip records it also
    counts the failed and the cached ones."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    cols = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    failed = cached = 0
    with Progress(*cols, transient=False, disable=not sys.stderr.isatty()) as bar:
        task = bar.add_task(label, total=total)
        for item in items:
            yield item
            failed += int(bool(getattr(item, "error", None)))
            cached += int(bool(getattr(item, "cache_hit", False)))
            note = f" ({failed} failed, {cached} cached)" if hasattr(item, "cache_hit") else ""
            bar.update(task, advance=1, description=label + note)


def fail(message: str, code: int = 2) -> NoReturn:
    from avstack.secrets import scrub

    typer.echo(f"error: {scrub(message)}", err=True)
    raise typer.Exit(code)


@contextmanager
def user_errors() -> Iterator[None]:
    """Errors from bad input, options, back-ends or the disk: one line, exit 2 (Ctrl-C: 130)."""
    from avstack.runners import FatalError

    try:
        yield
    except FatalError as exc:
        fail(
            f"the back-end refused the run: {exc}; nothing was recorded for the clips it refused, so a rerun asks again"
        )
    except (ValueError, ImportError, OSError, KeyError) as exc:  # DataError and OutputError are among these
        fail(str(exc) if not isinstance(exc, KeyError) else f"missing field {exc}")
    except KeyboardInterrupt:
        fail("interrupted; what was finished is kept and a rerun goes on from there", 130)


def _backend_options(base_url: str | None, temperature: float, max_tokens: int, timeout: float) -> dict[str, Any]:
    opts: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens, "timeout": timeout}
    if base_url:
        opts["base_url"] = base_url
    return opts


def _defaults() -> dict[str, Any]:
    from avstack.runners import DEFAULTS

    return DEFAULTS


@app.command()
def prepare(
    data_root: Annotated[Path, typer.Argument(help="EcoG layout (指令1..指令6 folders) or a plain folder of videos")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder (manifest.jsonl, frames/, audio/)")],
    anchors: Annotated[str, typer.Option(help="'full' or a comma list of frames,audio,asr")] = "full",
    fps: Annotated[float, typer.Option(help="Frames per second to sample (the paper uses 2)")] = 2.0,
    max_frames: Annotated[int | None, typer.Option(help="Cap on sampled frames (uniform subsample)")] = None,
    max_side: Annotated[int | None, typer.Option(help="Shrink frames to this longest side in px")] = None,
    max_pixels: Annotated[
        int | None, typer.Option(help="Refuse clips whose frames have more pixels (default: 8K, 7680x4320)")
    ] = None,
    jpeg_quality: Annotated[int, typer.Option(help="JPEG quality 1-100")] = 90,
    workers: Annotated[int | None, typer.Option(help="Worker processes (default: CPU count)")] = None,
    threads: Annotated[
        int, typer.Option(help="Decoder threads per worker (0: chosen for the job; see prepare.json)")
    ] = 0,
    asr_threads: Annotated[
        int,
        typer.Option(help="CPU threads of one transcription; fixed (not the cores), so words never move with them"),
    ] = 1,
    asr_model: Annotated[
        str, typer.Option(help="faster-whisper model name or folder (tiny.en, base bundled)")
    ] = "tiny.en",
    lang: Annotated[str, typer.Option(help="ASR language: auto, en, zh, ...")] = "auto",
    device: Annotated[str, typer.Option(help="ASR device: auto, cpu, cuda")] = "auto",
    refine_words: Annotated[
        bool, typer.Option(help="Snap ASR word edges to speech-energy edges (measured: benchmarks/asr_timing.py)")
    ] = True,
    aligner: Annotated[str, typer.Option(help=ALIGN_HELP)] = "auto",
    fillers: Annotated[
        bool, typer.Option(help="Report the fillers the acoustic aligner finds (um, uh, er) as words too")
    ] = False,
    decode: Annotated[str, typer.Option(help="auto, selective or sequential (identical frames)")] = "auto",
    asr_mode: Annotated[
        str,
        typer.Option(
            help=(
                "auto (batched on a GPU, else single), single, batched, or packed "
                "(several short clips per Whisper window: faster on a CPU, shared context)"
            )
        ),
    ] = "auto",
    executor: Annotated[
        str, typer.Option(help="local (processes here) or ray (a Ray cluster; pip install 'avstack[ray]')")
    ] = "local",
    ray_address: Annotated[
        str | None, typer.Option(help="Ray cluster address (default RAY_ADDRESS; else a local Ray is started)")
    ] = None,
    audio_track: Annotated[
        int | None, typer.Option(help="Audio track to hear (0 = first; default: the one marked default, or the first)")
    ] = None,
    include: Annotated[
        list[str] | None, typer.Option(help="Also take files matching this glob as videos (repeatable): '*.dat'")
    ] = None,
) -> None:
    """Decode clips, sample frames at true times, extract audio and word-level ASR; write a manifest."""
    from avstack.api import prepare as api_prepare
    from avstack.preparation import DEFAULT_MAX_PIXELS

    with user_errors():
        report = api_prepare(
            data_root,
            out,
            anchors=anchors,
            fps=fps,
            asr_model=asr_model,
            lang=None if lang == "auto" else lang,
            asr_mode=asr_mode,
            workers=workers,
            executor=executor,
            ray_address=ray_address,
            include=tuple(include or ()),
            progress=progress,
            max_frames=max_frames,
            max_side=max_side,
            max_pixels=max_pixels or DEFAULT_MAX_PIXELS,
            jpeg_quality=jpeg_quality,
            asr_device=device,
            asr_refine=refine_words,
            asr_aligner=aligner,
            asr_fillers=fillers,
            decode=decode,
            threads=threads,
            asr_threads=asr_threads,
            audio_track=audio_track,
        )
    n, bad = report.count, report.failed
    typer.echo(f"prepared {n - len(bad)}/{n} clips into {out} ({report.cache_hits} from cache)")
    for name in report.skipped[:20]:
        typer.echo(f"  skipped {name}: not a video by its name (--include GLOB to take it)", err=True)
    if len(report.skipped) > 20:
        typer.echo(f"  ... and {len(report.skipped) - 20} more skipped files", err=True)
    for rec in bad:
        err = rec.error or {}
        typer.echo(f"  FAILED {rec.clip_id}: {err.get('type')}: {err.get('message')}", err=True)
    if bad:
        raise typer.Exit(1)


@app.command()
def transcribe(
    paths: Annotated[list[Path], typer.Argument(help="Video or audio files")],
    model: Annotated[str, typer.Option(help="faster-whisper model name or folder")] = "tiny.en",
    lang: Annotated[str, typer.Option(help="auto, en, zh, ...")] = "auto",
    device: Annotated[str, typer.Option(help="auto, cpu, cuda")] = "auto",
    refine: Annotated[bool, typer.Option(help="Snap word edges to speech-energy edges")] = True,
    aligner: Annotated[str, typer.Option(help=ALIGN_HELP)] = "auto",
    fillers: Annotated[bool, typer.Option(help="Report the fillers found (um, uh, er) as words too")] = False,
) -> None:
    """Print word-level ASR JSON (EcoG annotations shape), one line per file."""
    from avstack.asr import AsrSettings, transcribe_file

    settings = AsrSettings(model=model, device=device, language=lang, refine=refine, aligner=aligner, fillers=fillers)
    failed = 0
    for path in paths:
        try:
            result: dict[str, Any] = {"path": str(path)} | transcribe_file(path, settings).to_ecog()
        except Exception as exc:  # one bad file never stops the others
            failed += 1
            result = {"path": str(path), "error": {"type": type(exc).__name__, "message": str(exc)}}
        typer.echo(json.dumps(result, ensure_ascii=False))
    if failed:
        raise typer.Exit(1)


@app.command()
def synth(
    out: Annotated[Path, typer.Argument(help="Folder to write an EcoG-layout sample set into")],
    lang: Annotated[str, typer.Option(help="en or zh")] = "en",
    small: Annotated[bool, typer.Option(help="Small clips (the bundled demo size)")] = True,
) -> None:
    """Generate synthetic EcoG-layout clips with known frame and word timing."""
    from avstack.sample_data import make_sample_set

    with user_errors():
        clips = make_sample_set(out, lang=lang, small=small)
    typer.echo(f"wrote {len(clips)} clips to {out}")


def _print(outcome: Any) -> None:
    typer.echo(outcome.summary)
    for note in outcome.notes:
        typer.echo(note, err=True)


@app.command()
def score(
    task: Annotated[str, typer.Option(help="ecog, egogap or videoqa")] = "ecog",
    gt: Annotated[Path | None, typer.Option(help="Ground truth JSONL (avstack ecog gt) or a reference .json")] = None,
    bundles: Annotated[Path | None, typer.Option(help="EgoGap *.bundles.jsonl (for --task egogap)")] = None,
    questions: Annotated[Path | None, typer.Option(help=QUESTIONS_HELP)] = None,
    pred: Annotated[Path | None, typer.Option(help="Predictions JSONL (or predictions.jsonl of a run)")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the full result as JSON here")] = None,
) -> None:
    """Score predictions with the benchmark's own metric definitions."""
    from avstack.io import atomic_write
    from avstack.tasks import get_task

    truth = {"egogap": bundles, "videoqa": questions}.get(task, gt)
    if truth is None or pred is None:
        need = {"egogap": "--bundles", "videoqa": "--questions"}.get(task, "--gt")
        fail(f"{need} and --pred are required for --task {task}")
    with user_errors():
        outcome = get_task(task).score(truth, pred)
    _print(outcome)
    if json_out:
        with user_errors():
            atomic_write(json_out, json.dumps(outcome.result, ensure_ascii=False, indent=1).encode())
    if outcome.failed:
        raise typer.Exit(1)


@ecog_app.command("gt")
def ecog_gt(
    data_root: Annotated[Path, typer.Argument(help="EcoG data root")],
    lang: Annotated[str | None, typer.Option(help="Language of this root (en, zh)")] = None,
    manifest: Annotated[Path | None, typer.Option(help="A prepared folder: take clip sizes from it")] = None,
) -> None:
    """Write normalized ground truth, one JSON line per clip, to stdout."""
    from avstack.tasks.ecog.gt import ground_truth

    with user_errors():
        records, errors = ground_truth(data_root, lang=lang, prepared=manifest)
    for rec in records:
        typer.echo(json.dumps(rec.to_json(), ensure_ascii=False))
    for err in errors:
        typer.echo(f"error: {err}", err=True)
    if errors:
        raise typer.Exit(1)


TS_HELP = "How frame times are told: ms, seconds, mmss, qwen, index, overlay"
WORDS_HELP = "How word times are told: json, srt, inline"
PROMPT_HELP = "A folder of prompt templates (system.j2, user.j2; see README); default: the shipped ones"


def _ecog_inputs(
    variant: str,
    drop: list[str],
    asr: str | None,
    coord_order: str,
    ts_format: str = "ms",
    word_ts_format: str = "json",
    prompt: Path | None = None,
) -> tuple[Any, Any]:
    from avstack.stacks import make_stack
    from avstack.tasks.ecog.prompt import EcogOptions

    with user_errors():
        return make_stack(variant, drop, ts_format, word_ts_format), EcogOptions(coord_order, asr, prompt_dir=prompt)


@app.command()
def stacks(
    prepared: Annotated[Path, typer.Argument(help="A folder written by `avstack prepare`")],
    out: Annotated[Path, typer.Option("--out", "-o", help="JSONL file, one request per clip")],
    variant: Annotated[str, typer.Option(help="full, video or text")] = "full",
    drop: Annotated[list[str], typer.Option(help=DROP_HELP)] = [],  # noqa: B006
    asr: Annotated[str | None, typer.Option(help="whisper (ours) or source (annotations); default ours")] = None,
    fmt: Annotated[str, typer.Option("--format", help="openai, gemini, hf or neutral")] = "openai",
    coord_order: Annotated[str, typer.Option(help="xy or yx")] = "xy",
    media_mode: Annotated[str, typer.Option("--media", help="path or data (inline base64)")] = "path",
    ts_format: Annotated[str, typer.Option(help=TS_HELP)] = "ms",
    word_ts_format: Annotated[str, typer.Option(help=WORDS_HELP)] = "json",
    prompt: Annotated[Path | None, typer.Option(help=PROMPT_HELP)] = None,
    task: Annotated[str, typer.Option(help="ecog, or videoqa (with --questions)")] = "ecog",
    questions: Annotated[Path | None, typer.Option(help=QUESTIONS_HELP)] = None,
    questions_format: Annotated[str, typer.Option(help=QFORMAT_HELP)] = "auto",
) -> None:
    """Write the rendered request of every clip (videoqa: every question) under one input stack."""
    from avstack.tasks.ecog.export import write_stacks

    if task == "videoqa":
        from avstack.stacks import make_stack
        from avstack.tasks.videoqa.runs import write_requests

        if questions is None:
            fail("--task videoqa needs --questions FILE")
        with user_errors():
            stack = make_stack(variant, drop, ts_format, word_ts_format)
            n = write_requests(prepared, questions, out, stack, fmt, media_mode, questions_format, prompt)
        typer.echo(f"wrote {n} requests ({stack.name}, {fmt}) to {out}")
        return
    stack, options = _ecog_inputs(variant, drop, asr, coord_order, ts_format, word_ts_format, prompt)
    with user_errors():
        n = write_stacks(prepared, out, stack, options, fmt, media_mode)
    typer.echo(f"wrote {n} requests ({stack.name}, {fmt}) to {out}")


@app.command("export")
def export_cmd(
    prepared: Annotated[Path, typer.Argument(help="A folder written by `avstack prepare`")],
    to: Annotated[str, typer.Option("--to", help="openai-batch, jsonl, hf, lmms-eval (a task folder), or features")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder")],
    variant: Annotated[str, typer.Option(help="full, video or text")] = "full",
    drop: Annotated[list[str], typer.Option(help=DROP_HELP)] = [],  # noqa: B006
    asr: Annotated[str | None, typer.Option(help="whisper or source")] = None,
    coord_order: Annotated[str, typer.Option(help="xy or yx")] = "xy",
    model: Annotated[str, typer.Option(help="Model named in openai-batch request bodies")] = "gpt-4o",
    ts_format: Annotated[str, typer.Option(help=TS_HELP)] = "ms",
    word_ts_format: Annotated[str, typer.Option(help=WORDS_HELP)] = "json",
    prompt: Annotated[Path | None, typer.Option(help=PROMPT_HELP)] = None,
    shard_size: Annotated[int, typer.Option(help="Clips per shard (per Parquet file for hf)")] = 1000,
    executor: Annotated[str, typer.Option(help="local, or ray (shards written by Ray Data workers)")] = "local",
    ray_address: Annotated[str | None, typer.Option(help="Ray cluster address (default RAY_ADDRESS)")] = None,
) -> None:
    """Precomputed inputs for other harnesses (see the docs: loaders); --to features for any prepared folder."""
    from avstack.tasks.ecog.export import export

    if to == "features":
        from avstack.features import export_features

        with user_errors():
            path = export_features(prepared, out)
        typer.echo(f"wrote {path} (and {path.with_suffix('.parquet').name} when datasets is installed)")
        return
    stack, options = _ecog_inputs(variant, drop, asr, coord_order, ts_format, word_ts_format, prompt)
    with user_errors():
        path = export(
            prepared, out, to, stack, options, model, shard_size=shard_size, executor=executor, ray_address=ray_address
        )
    typer.echo(f"wrote {path} ({stack.name})")


@app.command("run")
def run_cmd(
    model: Annotated[str, typer.Option(help="oracle, chance, deixis, openai:M, gemini:M, hf:M, replay:FILE")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Run folder (predictions.jsonl, run.json)")],
    prepared: Annotated[Path | None, typer.Argument(help="A folder written by `avstack prepare` (ecog)")] = None,
    task: Annotated[str, typer.Option(help="ecog, egogap or videoqa")] = "ecog",
    variant: Annotated[
        str,
        typer.Option(help="ecog, videoqa: full, video, text (videoqa: subtitled); egogap: image, vflip, hflip, ..."),
    ] = "full",
    drop: Annotated[list[str], typer.Option(help="Anchor to drop (ecog)")] = [],  # noqa: B006
    asr: Annotated[str | None, typer.Option(help="whisper or source (ecog)")] = None,
    coord_order: Annotated[str, typer.Option(help="xy or yx (ecog)")] = "xy",
    bundles: Annotated[Path | None, typer.Option(help="EgoGap *.bundles.jsonl")] = None,
    images: Annotated[Path | None, typer.Option(help="EgoGap image folder (COCO train2017, wikimedia)")] = None,
    style: Annotated[str, typer.Option(help="EgoGap prompt style: default, egoplan, exclusion")] = "default",
    options: Annotated[str, typer.Option(help="EgoGap options: all, n3 (drop off-vantage), swap_motor")] = "all",
    shuffle_seed: Annotated[int | None, typer.Option(help="EgoGap: shuffle and re-letter options")] = None,
    max_side: Annotated[int, typer.Option(help="EgoGap downscale variant: longest side in px")] = 512,
    concurrency: Annotated[int, typer.Option(help="Requests in flight")] = 4,
    retries: Annotated[int, typer.Option(help="Retries on 429/5xx/timeouts")] = 5,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server (or OPENAI_BASE_URL)")] = None,
    temperature: Annotated[float, typer.Option()] = _defaults()["temperature"],
    max_tokens: Annotated[int, typer.Option()] = _defaults()["max_tokens"],
    timeout: Annotated[float, typer.Option(help="Seconds per request")] = _defaults()["timeout"],
    ts_format: Annotated[str, typer.Option(help=TS_HELP + " (ecog)")] = "ms",
    word_ts_format: Annotated[str, typer.Option(help=WORDS_HELP + " (ecog)")] = "json",
    prompt: Annotated[Path | None, typer.Option(help=PROMPT_HELP + " (ecog)")] = None,
    questions: Annotated[Path | None, typer.Option(help=QUESTIONS_HELP)] = None,
    questions_format: Annotated[str, typer.Option(help=QFORMAT_HELP)] = "auto",
) -> None:
    """Run a model over prepared clips (ecog, videoqa) or bundles (egogap); resumable; then score."""
    from avstack.run import RunSettings
    from avstack.tasks import RunJob, get_task

    args = {
        "prepared": prepared,
        "variant": variant,
        "drop": drop,
        "asr": asr,
        "coord_order": coord_order,
        "bundles": bundles,
        "images": images,
        "style": style,
        "options": options,
        "shuffle_seed": shuffle_seed,
        "max_side": max_side,
        "ts_format": ts_format,
        "word_ts_format": word_ts_format,
        "prompt": prompt,
        "questions": questions,
        "questions_format": questions_format,
    }
    with user_errors():
        job = RunJob(
            model,
            out,
            RunSettings(concurrency=concurrency, retries=retries),
            _backend_options(base_url, temperature, max_tokens, timeout),
            args,
            progress,
        )
        outcome = get_task(task).run(job)
    _print(outcome)
    if outcome.failed:
        raise typer.Exit(1)


@egogap_app.command("prompts")
def egogap_prompts(
    bundles: Annotated[Path, typer.Argument(help="*.bundles.jsonl")],
    style: Annotated[str, typer.Option(help="default, egoplan or exclusion")] = "default",
    options: Annotated[str, typer.Option(help="all, n3 or swap_motor")] = "all",
    shuffle_seed: Annotated[int | None, typer.Option(help="Shuffle and re-letter options (key follows)")] = None,
) -> None:
    """Print one JSON line per item: uid, image, prompt, correct_letter."""
    from avstack.tasks.egogap.stack import EgoGapStack, prompt_lines

    with user_errors():
        lines = prompt_lines(bundles, EgoGapStack(style, "image", options, shuffle_seed))
    for line in lines:
        typer.echo(json.dumps(line, ensure_ascii=False))


@egogap_app.command("export")
def egogap_export(
    bundles: Annotated[Path, typer.Argument(help="*.bundles.jsonl")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for train.jsonl and test.jsonl")],
    to: Annotated[str, typer.Option("--to", help="ms-swift")] = "ms-swift",
    images: Annotated[Path | None, typer.Option(help="Image folder: write absolute paths and check they exist")] = None,
    style: Annotated[str, typer.Option(help="default, egoplan or exclusion")] = "default",
    test_fraction: Annotated[float, typer.Option(help="Share of IMAGES held out for test")] = 0.2,
    seed: Annotated[int, typer.Option(help="Split seed")] = 0,
    rationales: Annotated[Path | None, typer.Option(help="JSONL of {uid, rationale} for the answers")] = None,
) -> None:
    """Write fine-tuning data with an image-level train/test split."""
    from avstack.tasks.egogap.export import export_bundles

    if to != "ms-swift":
        fail(f"--to must be ms-swift; found {to!r}")
    with user_errors():
        res = export_bundles(bundles, out, images, style, test_fraction, seed, rationales)
    typer.echo(f"wrote {res['train']} train and {res['test']} test items to {out}")
    for problem in res["problems"]:
        typer.echo(f"  SKIPPED {problem}", err=True)
    if res["problems"]:
        raise typer.Exit(1)


@app.command()
def ablate(
    prepared: Annotated[Path, typer.Argument(help="A folder written by `avstack prepare`")],
    model: Annotated[str, typer.Option(help="oracle, chance, deixis, openai:MODEL, replay:FILE")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for one run per stack and the report")],
    drop: Annotated[list[str], typer.Option(help="Anchor to drop (repeatable)")] = [],  # noqa: B006
    variants: Annotated[str, typer.Option(help="Comma list of extra variants: video,text")] = "",
    concurrency: Annotated[int, typer.Option()] = 4,
    base_url: Annotated[str | None, typer.Option()] = None,
    subsets: Annotated[
        bool, typer.Option(help="Run every subset of the --drop cues and report each cue's Shapley value")
    ] = False,
    cluster: Annotated[
        str | None, typer.Option(help="Bootstrap whole clusters: scene, task_template, level or lang")
    ] = None,
    ts_format: Annotated[
        str, typer.Option(help="Comma list of frame-time formats to compare, e.g. ms,index,overlay")
    ] = "ms",
    word_ts_format: Annotated[str, typer.Option(help=WORDS_HELP)] = "json",
    prompt: Annotated[Path | None, typer.Option(help=PROMPT_HELP)] = None,
    task: Annotated[str, typer.Option(help="ecog, or videoqa (with --questions)")] = "ecog",
    questions: Annotated[Path | None, typer.Option(help=QUESTIONS_HELP)] = None,
    questions_format: Annotated[str, typer.Option(help=QFORMAT_HELP)] = "auto",
    variant: Annotated[str, typer.Option(help="videoqa: the baseline stack, full or subtitled")] = "full",
) -> None:
    """Run full and each --drop (and --variants), score each, write the Δ table (paired CIs, p-values) and report."""
    from avstack.run import RunSettings
    from avstack.tasks.ecog.ablate import ablate as run_ablate
    from avstack.tasks.ecog.prompt import EcogOptions

    d = _defaults()
    if task == "videoqa":
        from avstack.tasks.videoqa.ablate import ablate as qa_ablate

        if questions is None:
            fail("--task videoqa needs --questions FILE")
        with user_errors():
            report = qa_ablate(
                prepared,
                questions,
                model,
                out,
                drop,
                variant,
                RunSettings(concurrency=concurrency),
                _backend_options(base_url, d["temperature"], d["max_tokens"], d["timeout"]),
                questions_format,
                prompt,
                subsets,
                ts_format.split(",")[0],
            )
        typer.echo(report.summary)
        typer.echo(f"full report: {report.path}")
        return
    with user_errors():
        report = run_ablate(
            prepared,
            model,
            out,
            drop,
            [v for v in variants.split(",") if v],
            RunSettings(concurrency=concurrency),
            _backend_options(base_url, d["temperature"], d["max_tokens"], d["timeout"]),
            options=EcogOptions(prompt_dir=prompt),
            subsets=subsets,
            cluster=cluster,
            ts_formats=[f.strip() for f in ts_format.split(",") if f.strip()],
            word_ts_format=word_ts_format,
        )
    typer.echo(report.summary)
    typer.echo(f"full report: {report.path}")


@app.command()
def report(
    runs: Annotated[list[Path], typer.Argument(help="Run folders; the first is the baseline")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Report folder")] = Path("report"),
    cluster: Annotated[
        str | None, typer.Option(help="Bootstrap whole clusters (EcoG: scene, task_template, level, lang)")
    ] = None,
) -> None:
    """EcoG: Δ table, bottlenecks, calibration, size/scene/language. EgoGap: scores with CIs, rank agreement."""
    from avstack.io import read_json_file
    from avstack.tasks import task_of_run

    with user_errors():
        tasks = {task_of_run(read_json_file(r / "run.json", dict)).name for r in runs}
        if len(tasks) > 1:
            fail(f"runs of one task per report; found {', '.join(sorted(tasks))}")
        written = task_of_run({"task": tasks.pop()}).report(runs, out, cluster)
    typer.echo(written.summary)
    typer.echo(f"report: {written.path}")


prompts_app = typer.Typer(no_args_is_help=True, help="Prompt templates: check a folder of your own.")
app.add_typer(prompts_app, name="prompts")


@prompts_app.command("check")
def prompts_check(
    folder: Annotated[Path, typer.Argument(help="A folder with system.j2 and user.j2 (or en/, zh/ of them)")],
) -> None:
    """Render one clip of the sample set with the templates; report unknown variables, missing
    parts and where the frames go."""
    from avstack.tasks.ecog.prompt_check import check_prompts

    with user_errors():
        report, ok = check_prompts(folder)
    typer.echo(report)
    if not ok:
        raise typer.Exit(1)


@app.command()
def view(
    prepared: Annotated[Path, typer.Argument(help="A prepared folder (EcoG), or an EgoGap run folder")],
    runs: Annotated[list[Path] | None, typer.Argument(help="Run folders to show (the first is the baseline)")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Site folder (open index.html, no server needed)")] = Path(
        "site"
    ),
    serve: Annotated[bool, typer.Option(help="Also serve the site on 127.0.0.1")] = False,
    port: Annotated[int, typer.Option(help="Port for --serve")] = 8000,
) -> None:
    """A static, offline site: every clip on its true time axis with every stack's answer on it."""
    from avstack.site import serve as serve_site
    from avstack.tasks.view import build_view

    with user_errors():
        index = build_view(prepared, list(runs or []), out)
    typer.echo(f"site: {index}")
    if serve:
        with user_errors():
            serve_site(out, port)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
