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
egogap_app = typer.Typer(no_args_is_help=True, help="EgoGapBench helpers: prompts, export.")
app.add_typer(egogap_app, name="egogap")

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
    threads: Annotated[
        int, typer.Option(help="Decoder and ASR threads per worker (0: all cores for one worker, a share for several)")
    ] = 0,
    asr_model: Annotated[
        str, typer.Option(help="faster-whisper model name or folder (tiny.en, base bundled)")
    ] = "tiny.en",
    lang: Annotated[str, typer.Option(help="ASR language: auto, en, zh, ...")] = "auto",
    device: Annotated[str, typer.Option(help="ASR device: auto, cpu, cuda")] = "auto",
    refine_words: Annotated[
        bool, typer.Option(help="Snap ASR word edges to speech-energy edges (measured: benchmarks/asr_timing.py)")
    ] = True,
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
            asr_refine=refine_words,
            decode=decode,
            asr_mode=asr_mode,
            threads=threads,
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
    refine: Annotated[bool, typer.Option(help="Snap word edges to speech-energy edges")] = True,
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
    bundles: Annotated[Path | None, typer.Option(help="EgoGap *.bundles.jsonl (for --task egogap)")] = None,
    pred: Annotated[Path | None, typer.Option(help="Predictions JSONL (or predictions.jsonl of a run)")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the full result as JSON here")] = None,
) -> None:
    """Score predictions with the benchmark's own metric definitions."""
    if task == "egogap":
        result = _score_egogap(bundles, pred)
    elif task == "ecog":
        result = _score_ecog(gt, pred)
    else:
        fail(f"--task must be ecog or egogap; found {task!r}")
        return
    if json_out:
        json_out.write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8")


def _score_ecog(gt: Path | None, pred: Path | None) -> dict[str, Any]:
    if gt is None or pred is None:
        fail("--gt and --pred are required for --task ecog")
        raise AssertionError
    from avstack.report import summary_table
    from avstack.tasks.ecog import load_gt
    from avstack.tasks.ecog import score as ecog_score
    from avstack.tasks.ecog.data import DataError, load_records

    try:
        clips, gt_errors = load_gt(gt)
        preds = [p for p in load_records(pred, "predictions") if isinstance(p, dict)]
    except (DataError, OSError, json.JSONDecodeError) as exc:
        fail(str(exc))
        raise AssertionError from exc
    result = ecog_score(clips, preds, gt_errors).to_json()
    typer.echo(summary_table(result))
    for problem in gt_errors:
        typer.echo(f"  GT ERROR {problem}", err=True)
    return result


def _score_egogap(bundles: Path | None, pred: Path | None) -> dict[str, Any]:
    if bundles is None or pred is None:
        fail("--bundles and --pred are required for --task egogap")
        raise AssertionError
    from avstack.run import read_predictions
    from avstack.tasks.egogap import load_bundles
    from avstack.tasks.egogap import score as egogap_score
    from avstack.tasks.egogap.report import score_rows

    try:
        result = egogap_score(load_bundles(bundles), read_predictions(pred))
    except (ValueError, OSError) as exc:  # EgoGapDataError is a ValueError
        fail(str(exc))
        raise AssertionError from exc
    from avstack.report import markdown_table

    typer.echo(markdown_table(*score_rows([(pred.name, bundles.name, result)])))
    c = result["counts"]
    typer.echo(f"items {c['items']}, missing {c['missing_predictions']}, unparsed {c['unparsed']}")
    return result


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


@app.command("export")
def export_cmd(
    prepared: Annotated[Path, typer.Argument(help="A folder written by `avstack prepare`")],
    to: Annotated[str, typer.Option("--to", help="openai-batch, jsonl or hf")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder")],
    variant: Annotated[str, typer.Option(help="full, video or text")] = "full",
    drop: Annotated[list[str], typer.Option(help="Anchor to drop: frame_ts, word_ts, asr, frames")] = [],  # noqa: B006
    asr: Annotated[str | None, typer.Option(help="whisper or source")] = None,
    coord_order: Annotated[str, typer.Option(help="xy or yx")] = "xy",
    model: Annotated[str, typer.Option(help="Model named in openai-batch request bodies")] = "gpt-4o",
) -> None:
    """Precomputed inputs for other harnesses (see README: loading snippets)."""
    from avstack.export import export
    from avstack.run import RunSettings

    stack = _stack(variant, drop)
    try:
        path = export(prepared, out, to, stack, RunSettings(coord_order=coord_order, asr_source=asr), model)
    except (ValueError, ImportError, FileNotFoundError) as exc:
        fail(str(exc))
        return
    typer.echo(f"wrote {path} ({stack.name})")


def _backend_options(base_url: str | None, temperature: float, max_tokens: int, timeout: float) -> dict[str, Any]:
    opts: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens, "timeout": timeout}
    if base_url:
        opts["base_url"] = base_url
    return opts


@app.command("run")
def run_cmd(
    model: Annotated[str, typer.Option(help="oracle, chance, deixis, openai:M, gemini:M, hf:M, replay:FILE")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Run folder (predictions.jsonl, run.json)")],
    prepared: Annotated[Path | None, typer.Argument(help="A folder written by `avstack prepare` (ecog)")] = None,
    task: Annotated[str, typer.Option(help="ecog or egogap")] = "ecog",
    variant: Annotated[
        str, typer.Option(help="ecog: full, video, text; egogap: image, vflip, hflip, gray, downscale, text")
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
    temperature: Annotated[float, typer.Option()] = 0.0,
    max_tokens: Annotated[int, typer.Option()] = 2048,
    timeout: Annotated[float, typer.Option(help="Seconds per request")] = 120.0,
) -> None:
    """Run a model over prepared clips (ecog) or bundles (egogap); resumable; then score."""
    from avstack.run import RunSettings
    from avstack.runners import make_backend

    try:
        backend = make_backend(model, **_backend_options(base_url, temperature, max_tokens, timeout))
    except (ValueError, ImportError) as exc:
        fail(str(exc))
        return
    settings = RunSettings(concurrency=concurrency, retries=retries, coord_order=coord_order, asr_source=asr)
    if task == "egogap":
        if bundles is None:
            fail("--task egogap needs --bundles B.jsonl (and --images DIR unless --variant text)")
            return
        _run_egogap(bundles, images, backend, model, out, settings, style, variant, options, shuffle_seed, max_side)
        return
    if task != "ecog":
        fail(f"--task must be ecog or egogap; found {task!r}")
    if prepared is None:
        fail("--task ecog needs the PREPARED folder argument")
        return
    from avstack.report import summary_table
    from avstack.run import run, score_run

    stack = _stack(variant, drop)
    run(prepared, backend, stack, out, settings, backend_id=model, progress=progress)
    typer.echo(summary_table(score_run(prepared, out)))


def _run_egogap(
    bundles: Path,
    images: Path | None,
    backend: Any,
    model: str,
    out: Path,
    settings: Any,
    style: str,
    variant: str,
    options: str,
    shuffle_seed: int | None,
    max_side: int,
) -> None:
    from avstack.report import markdown_table
    from avstack.tasks.egogap import EgoGapDataError
    from avstack.tasks.egogap.report import score_rows
    from avstack.tasks.egogap.runs import run_egogap, score_egogap_run
    from avstack.tasks.egogap.stack import EgoGapStack

    try:
        stack = EgoGapStack(style, "image" if variant == "full" else variant, options, shuffle_seed, max_side)
        run_egogap(bundles, backend, stack, out, images, settings, model, progress=progress)
    except (ValueError, EgoGapDataError, OSError) as exc:
        fail(str(exc))
        return
    result = score_egogap_run(out)
    typer.echo(markdown_table(*score_rows([(model, stack.name, result)])))
    failed = [i for i in result["items"] if i["error"] and i["error"].startswith("input")]
    if failed:
        typer.echo(f"{len(failed)} items had input errors (see predictions.jsonl), e.g. {failed[0]['error']}", err=True)


@egogap_app.command("prompts")
def egogap_prompts(
    bundles: Annotated[Path, typer.Argument(help="*.bundles.jsonl")],
    style: Annotated[str, typer.Option(help="default, egoplan or exclusion")] = "default",
    options: Annotated[str, typer.Option(help="all, n3 or swap_motor")] = "all",
    shuffle_seed: Annotated[int | None, typer.Option(help="Shuffle and re-letter options (key follows)")] = None,
) -> None:
    """Print one JSON line per item: uid, image, prompt, correct_letter."""
    from avstack.tasks.egogap import EgoGapDataError, build_prompt, load_bundles
    from avstack.tasks.egogap.stack import EgoGapStack, present

    try:
        items = present(load_bundles(bundles), EgoGapStack(style, "image", options, shuffle_seed))
    except (ValueError, EgoGapDataError, OSError) as exc:
        fail(str(exc))
        return
    for item in items:
        line = {"uid": item.uid, "image": item.file_name, "prompt": build_prompt(item, style)}
        typer.echo(json.dumps(line | {"correct_letter": item.correct_letter}, ensure_ascii=False))


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
    from avstack.tasks.egogap import EgoGapDataError, load_bundles
    from avstack.tasks.egogap.export import export_ms_swift, load_rationales

    if to != "ms-swift":
        fail(f"--to must be ms-swift; found {to!r}")
    try:
        res = export_ms_swift(
            load_bundles(bundles), out, images, style, test_fraction, seed, load_rationales(rationales)
        )
    except (ValueError, EgoGapDataError, OSError) as exc:
        fail(str(exc))
        return
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
    """EcoG: Δ table, bottlenecks, calibration, size/scene/language. EgoGap: scores with CIs, rank agreement."""
    tasks = {json.loads((r / "run.json").read_text()).get("task", "ecog") for r in runs}
    if len(tasks) > 1:
        fail(f"runs of one task per report; found {', '.join(sorted(tasks))}")
    if tasks == {"egogap"}:
        from avstack.tasks.egogap.report import load_egogap_run, write_egogap_report
        from avstack.tasks.egogap.runs import score_egogap_run

        for r in runs:
            score_egogap_run(r)
        typer.echo(write_egogap_report([load_egogap_run(r) for r in runs], out).split("## Published")[0])
    else:
        from avstack.ablate import load_run
        from avstack.report import write_report

        text = write_report([load_run(r) for r in runs], out)
        typer.echo(text.split("## Failure")[0])
    typer.echo(f"report: {out / 'report.md'}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
