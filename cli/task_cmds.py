"""Benchmark helpers and views (docs: ecog.md, egogap.md, viewer.md): ecog gt, egogap prompts and
export, prompts check, view."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

import avstack.api as door

from .common import app, ecog_app, egogap_app, ended, print_done, prompts_app


@ecog_app.command("gt")
def ecog_gt(
    data_root: Annotated[Path, typer.Argument(help="EcoG data root")],
    lang: Annotated[str | None, typer.Option(help="Language of this root (en, zh)")] = None,
    manifest: Annotated[Path | None, typer.Option(help="A prepared folder: take clip sizes from it")] = None,
) -> None:
    """Write normalized ground truth, one JSON line per clip, to stdout."""
    with ended():
        print_done(door.ecog_ground_truth(data_root, lang=lang, prepared=manifest))


@egogap_app.command("prompts")
def egogap_prompts(
    bundles: Annotated[Path, typer.Argument(help="*.bundles.jsonl")],
    style: Annotated[str, typer.Option(help="default, egoplan or exclusion")] = "default",
    options: Annotated[str, typer.Option(help="all, n3 or swap_motor")] = "all",
    shuffle_seed: Annotated[int | None, typer.Option(help="Shuffle and re-letter options (key follows)")] = None,
) -> None:
    """Print one JSON line per item: uid, image, prompt, correct_letter."""
    with ended():
        print_done(door.egogap_prompts(bundles, style=style, options=options, shuffle_seed=shuffle_seed))


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
    args = dict(locals())  # first: every option, and nothing else
    with ended():
        print_done(door.egogap_export(**args))


@prompts_app.command("check")
def prompts_check(
    folder: Annotated[Path, typer.Argument(help="A folder with system.j2 and user.j2 (or en/, zh/ of them)")],
) -> None:
    """Render one clip of the sample set with the templates; report unknown variables, missing
    parts and where the frames go."""
    with ended():
        print_done(door.check_prompts(folder))


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
    with ended():
        print_done(door.view(prepared, list(runs or []), out=out, serve=serve, port=port))
