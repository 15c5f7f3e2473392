"""Benchmark helpers and views (docs: ecog.md, egogap.md, viewer.md): ecog gt, egogap prompts and
export, prompts check, view."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

import avstack.api as door

from .common import app, ecog_app, egogap_app, ended, print_done, prompts_app
from .declared import argument, takes

BUNDLES = "*.bundles.jsonl"


@ecog_app.command("gt")
@takes([argument("data_root", Path, "EcoG data root")], options=door.GroundTruthOptions)
def ecog_gt(**given: Any) -> None:
    """Write normalized ground truth, one JSON line per clip, to stdout."""
    with ended():
        print_done(door.ecog_ground_truth(**given))


@egogap_app.command("prompts")
@takes([argument("bundles", Path, BUNDLES)], prompting=door.EgoGapPrompting)
def egogap_prompts(**given: Any) -> None:
    """Print one JSON line per item: uid, image, prompt, correct_letter."""
    with ended():
        print_done(door.egogap_prompts(**given))


@egogap_app.command("export")
@takes([argument("bundles", Path, BUNDLES)], exporting=door.EgoGapExporting)
def egogap_export(**given: Any) -> None:
    """Write fine-tuning data with an image-level train/test split."""
    with ended():
        print_done(door.egogap_export(**given))


@prompts_app.command("check")
def prompts_check(
    folder: Annotated[Path, typer.Argument(help="A folder with system.j2 and user.j2 (or en/, zh/ of them)")],
) -> None:
    """Render one clip of the sample set with the templates; report unknown variables, missing
    parts and where the frames go."""
    with ended():
        print_done(door.check_prompts(folder))


@app.command()
@takes(
    [
        argument("prepared", Path, "A prepared folder (EcoG), or an EgoGap run folder"),
        argument("runs", list[Path] | None, "Run folders to show (the first is the baseline)", default=None),
    ],
    viewing=door.Viewing,
)
def view(**given: Any) -> None:
    """A static, offline site: every clip on its true time axis with every stack's answer on it."""
    with ended():
        print_done(door.view(**given))
