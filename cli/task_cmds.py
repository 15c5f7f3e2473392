"""Benchmark helpers and views (docs: ecog.md, egogap.md, viewer.md): ecog gt, egogap prompts and
export, prompts check, view."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from .common import app, ecog_app, egogap_app, fail, prompts_app, user_errors


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
    from avstack.front import view as build_view
    from avstack.site.pages import serve as serve_site

    with user_errors():
        typer.echo(build_view(prepared, list(runs or []), out=out).summary)
    if serve:
        with user_errors():
            serve_site(out, port)
