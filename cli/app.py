"""The `avstack` command line: thin wrappers over the library functions."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Egocentric clips -> model inputs -> scores.")
ecog_app = typer.Typer(no_args_is_help=True, help="EcoG-Bench helpers.")
app.add_typer(ecog_app, name="ecog")

T = TypeVar("T")


def progress(items: Iterable[T], total: int, label: str = "clips") -> Iterable[T]:
    """A progress bar on stderr (quiet when stderr is not a terminal)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    cols = (TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*cols, transient=False, disable=not sys.stderr.isatty()) as bar:
        task = bar.add_task(label, total=total)
        for item in items:
            yield item
            bar.advance(task)


def fail(message: str, code: int = 2) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


@app.command()
def prepare(
    data_root: Annotated[Path, typer.Argument(help="EcoG layout (指令1..指令6 folders) or a plain folder of videos")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder (manifest.jsonl, frames/, audio/)")],
    anchors: Annotated[str, typer.Option(help="'full' or a comma list of frames,audio,asr")] = "full",
    fps: Annotated[float, typer.Option(help="Frames per second to sample (the paper uses 2)")] = 2.0,
    max_frames: Annotated[int | None, typer.Option(help="Cap on sampled frames (uniform subsample)")] = None,
    max_side: Annotated[int | None, typer.Option(help="Shrink frames to this longest side in px")] = None,
    jpeg_quality: Annotated[int, typer.Option(help="JPEG quality 1-100")] = 90,
    workers: Annotated[int | None, typer.Option(help="Worker processes (default: CPU count)")] = None,
    asr_model: Annotated[
        str, typer.Option(help="faster-whisper model name or folder (tiny.en, base bundled)")
    ] = "tiny.en",
    lang: Annotated[str, typer.Option(help="ASR language: auto, en, zh, ...")] = "auto",
    device: Annotated[str, typer.Option(help="ASR device: auto, cpu, cuda")] = "auto",
) -> None:
    """Decode clips, sample frames at true times, extract audio and word-level ASR; write a manifest."""
    from avstack.prepare import PrepareSettings, parse_anchors
    from avstack.prepare import prepare as run_prepare

    try:
        settings = PrepareSettings(
            anchors=parse_anchors(anchors),
            fps=fps,
            max_frames=max_frames,
            max_side=max_side,
            jpeg_quality=jpeg_quality,
            asr_model=asr_model,
            asr_device=device,
            lang=None if lang == "auto" else lang,
        )
        report = run_prepare(data_root, out, settings, workers, progress)
    except (ValueError, FileNotFoundError) as exc:
        fail(str(exc))
        return
    n, bad = len(report.records), report.failed
    typer.echo(f"prepared {n - len(bad)}/{n} clips into {out} ({report.cache_hits} from cache)")
    for rec in bad:
        typer.echo(f"  FAILED {rec['clip_id']}: {rec['error']['type']}: {rec['error']['message']}", err=True)
    if bad:
        raise typer.Exit(1)


@app.command()
def transcribe(
    paths: Annotated[list[Path], typer.Argument(help="Video or audio files")],
    model: Annotated[str, typer.Option(help="faster-whisper model name or folder")] = "tiny.en",
    lang: Annotated[str, typer.Option(help="auto, en, zh, ...")] = "auto",
    device: Annotated[str, typer.Option(help="auto, cpu, cuda")] = "auto",
    refine: Annotated[bool, typer.Option(help="Snap word edges to speech-energy edges")] = False,
) -> None:
    """Print word-level ASR JSON (EcoG annotations shape), one line per file."""
    from avstack.asr import AsrSettings, transcribe_file

    settings = AsrSettings(model=model, device=device, language=lang, refine=refine)
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

    clips = make_sample_set(out, lang=lang, small=small)
    typer.echo(f"wrote {len(clips)} clips to {out}")


@app.command()
def score(
    task: Annotated[str, typer.Option(help="ecog or egogap")] = "ecog",
    gt: Annotated[Path | None, typer.Option(help="Ground truth JSONL (avstack ecog gt) or a reference .json")] = None,
    pred: Annotated[Path | None, typer.Option(help="Predictions JSONL (or predictions.jsonl of a run)")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the full result as JSON here")] = None,
) -> None:
    """Score predictions with the benchmark's own metric definitions."""
    if task != "ecog":
        fail(f"--task {task!r}: only 'ecog' is available in this version")
    if gt is None or pred is None:
        fail("--gt and --pred are required for --task ecog")
        return
    from avstack.report import summary_table
    from avstack.tasks.ecog import load_gt
    from avstack.tasks.ecog import score as ecog_score
    from avstack.tasks.ecog.data import DataError, load_records

    try:
        clips, gt_errors = load_gt(gt)
        preds = [p for p in load_records(pred, "predictions") if isinstance(p, dict)]
    except (DataError, OSError, json.JSONDecodeError) as exc:
        fail(str(exc))
        return
    result = ecog_score(clips, preds, gt_errors).to_json()
    typer.echo(summary_table(result))
    for problem in gt_errors:
        typer.echo(f"  GT ERROR {problem}", err=True)
    if json_out:
        json_out.write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8")


@ecog_app.command("gt")
def ecog_gt(
    data_root: Annotated[Path, typer.Argument(help="EcoG data root")],
    lang: Annotated[str | None, typer.Option(help="Language of this root (en, zh)")] = None,
    manifest: Annotated[Path | None, typer.Option(help="A prepared folder: take clip sizes from it")] = None,
) -> None:
    """Write normalized ground truth, one JSON line per clip, to stdout."""
    from avstack.tasks.ecog.gt import ground_truth

    records, errors = ground_truth(data_root, lang=lang, prepared=manifest)
    for rec in records:
        typer.echo(json.dumps(rec.to_json(), ensure_ascii=False))
    for err in errors:
        typer.echo(f"error: {err}", err=True)
    if errors:
        raise typer.Exit(1)


def _stack(variant: str, drop: list[str]) -> Any:
    from avstack.stacks import make_stack

    try:
        return make_stack(variant, drop)
    except ValueError as exc:
        fail(str(exc))


@app.command()
def stacks(
    prepared: Annotated[Path, typer.Argument(help="A folder written by `avstack prepare`")],
    out: Annotated[Path, typer.Option("--out", "-o", help="JSONL file, one request per clip")],
    variant: Annotated[str, typer.Option(help="full, video or text")] = "full",
    drop: Annotated[list[str], typer.Option(help="Anchor to drop: frame_ts, word_ts, asr, frames")] = [],  # noqa: B006
    asr: Annotated[str | None, typer.Option(help="whisper (ours) or source (annotations); default ours")] = None,
    fmt: Annotated[str, typer.Option("--format", help="openai, gemini, hf or neutral")] = "openai",
    coord_order: Annotated[str, typer.Option(help="xy or yx")] = "xy",
    media_mode: Annotated[str, typer.Option("--media", help="path or data (inline base64)")] = "path",
) -> None:
    """Write the rendered request of every clip under one input stack."""
    from avstack.messages import render
    from avstack.run import RunSettings, requests_for

    stack = _stack(variant, drop)
    reqs = requests_for(prepared, stack, RunSettings(coord_order=coord_order, asr_source=asr))
    with open(out, "w", encoding="utf-8") as fh:
        for rec, req in reqs:
            line = {
                "clip_id": rec["clip_id"],
                "stack": stack.name,
                "anchors": sorted(stack.anchors),
                "format": fmt,
                "request": render(req, fmt, media_mode),
            }
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")
    typer.echo(f"wrote {len(reqs)} requests ({stack.name}, {fmt}) to {out}")


def _backend_options(base_url: str | None, temperature: float, max_tokens: int, timeout: float) -> dict[str, Any]:
    opts: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens, "timeout": timeout}
    if base_url:
        opts["base_url"] = base_url
    return opts


@app.command("run")
def run_cmd(
    prepared: Annotated[Path, typer.Argument(help="A folder written by `avstack prepare`")],
    model: Annotated[str, typer.Option(help="oracle, chance, deixis, openai:MODEL, replay:FILE")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Run folder (predictions.jsonl, run.json)")],
    task: Annotated[str, typer.Option(help="ecog")] = "ecog",
    variant: Annotated[str, typer.Option(help="full, video or text")] = "full",
    drop: Annotated[list[str], typer.Option(help="Anchor to drop")] = [],  # noqa: B006
    asr: Annotated[str | None, typer.Option(help="whisper or source")] = None,
    coord_order: Annotated[str, typer.Option(help="xy or yx")] = "xy",
    concurrency: Annotated[int, typer.Option(help="Requests in flight")] = 4,
    retries: Annotated[int, typer.Option(help="Retries on 429/5xx/timeouts")] = 5,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server (or OPENAI_BASE_URL)")] = None,
    temperature: Annotated[float, typer.Option()] = 0.0,
    max_tokens: Annotated[int, typer.Option()] = 2048,
    timeout: Annotated[float, typer.Option(help="Seconds per request")] = 120.0,
) -> None:
    """Run a model over prepared clips; resumable; then score."""
    from avstack.report import summary_table
    from avstack.run import RunSettings, run, score_run
    from avstack.runners import make_backend

    if task != "ecog":
        fail(f"--task {task!r}: only 'ecog' runs in this version")
    stack = _stack(variant, drop)
    try:
        backend = make_backend(model, **_backend_options(base_url, temperature, max_tokens, timeout))
    except (ValueError, ImportError) as exc:
        fail(str(exc))
        return
    settings = RunSettings(concurrency=concurrency, retries=retries, coord_order=coord_order, asr_source=asr)
    run(prepared, backend, stack, out, settings, backend_id=model, progress=progress)
    typer.echo(summary_table(score_run(prepared, out)))


@app.command()
def ablate(
    prepared: Annotated[Path, typer.Argument(help="A folder written by `avstack prepare`")],
    model: Annotated[str, typer.Option(help="oracle, chance, deixis, openai:MODEL, replay:FILE")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for one run per stack and the report")],
    drop: Annotated[list[str], typer.Option(help="Anchor to drop (repeatable)")] = [],  # noqa: B006
    variants: Annotated[str, typer.Option(help="Comma list of extra variants: video,text")] = "",
    concurrency: Annotated[int, typer.Option()] = 4,
    base_url: Annotated[str | None, typer.Option()] = None,
) -> None:
    """Run full and each --drop (and --variants), score each, write the Δ table and report."""
    from avstack.ablate import ablate as run_ablate
    from avstack.run import RunSettings

    try:
        path = run_ablate(
            prepared,
            model,
            out,
            drop,
            [v for v in variants.split(",") if v],
            RunSettings(concurrency=concurrency),
            _backend_options(base_url, 0.0, 2048, 120.0),
        )
    except (ValueError, ImportError, FileNotFoundError) as exc:
        fail(str(exc))
        return
    text = path.read_text(encoding="utf-8")
    typer.echo(text.split("## Failure")[0])
    typer.echo(f"full report: {path}")


@app.command()
def report(
    runs: Annotated[list[Path], typer.Argument(help="Run folders; the first is the baseline")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Report folder")] = Path("report"),
) -> None:
    """Δ table, bottlenecks, temporal calibration, size/scene/language tables and plots."""
    from avstack.ablate import load_run
    from avstack.report import write_report

    text = write_report([load_run(r) for r in runs], out)
    typer.echo(text.split("## Failure")[0])
    typer.echo(f"report: {out / 'report.md'}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
