"""The benchmarks' helpers through the door: EcoG's ground truth (`avstack ecog gt`), EgoGap's
prompts and fine-tuning export (`avstack egogap prompts|export`), and the check of a folder of
prompt templates (`avstack prompts check`). Each returns what its command prints (Done) and
raises CommandFailed (code 1) where items were left out, after writing what it could."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass
from pathlib import Path

from avstack.api.failures import CommandFailed, speaks_flags
from avstack.api.options import Done
from avstack.errors import UsageError
from avstack.options import fold_all, option, same_as
from avstack.tasks.egogap.inputs import EgogapInputs

PathLike = str | Path


@dataclass(frozen=True)
class GroundTruthOptions:
    """`avstack ecog gt`: the root's language, and a prepared folder to take clip sizes from."""

    lang: str | None = option(None, "Language of this root (en, zh)")
    prepared: Path | None = option(None, "A prepared folder: take clip sizes from it", name="manifest")


@dataclass(frozen=True)
class EgoGapPrompting:
    """How `avstack egogap prompts` presents the items: the prompt style, which options, and a
    seed that shuffles and re-letters them."""

    style: str = same_as(EgogapInputs, "style")
    options: str = same_as(EgogapInputs, "options")
    shuffle_seed: int | None = same_as(EgogapInputs, "shuffle_seed")


@dataclass(frozen=True)
class EgoGapExporting:
    """`avstack egogap export`: where the fine-tuning data goes, in which format, and how the
    images are split between train and test."""

    out: Path = option(MISSING, "Folder for train.jsonl and test.jsonl", short="-o")
    to: str = option("ms-swift", "ms-swift")
    images: Path | None = option(None, "Image folder: write absolute paths and check they exist")
    style: str = same_as(EgogapInputs, "style")
    test_fraction: float = option(0.2, "Share of IMAGES held out for test")
    seed: int = option(0, "Split seed")
    rationales: Path | None = option(None, "JSONL of {uid, rationale} for the answers")


def _jsonl(rows: Sequence[Mapping[str, object]]) -> str:
    return "\n".join(json.dumps(r, ensure_ascii=False) for r in rows)


@speaks_flags
def ecog_ground_truth(data_root: PathLike, options: GroundTruthOptions | None = None, **keywords: object) -> Done:
    """EcoG's normalized ground truth, one JSON line per clip (`Done.summary`); a clip that cannot
    be used is a note naming it, and the others are kept. `options` (GroundTruthOptions: lang,
    prepared) or its fields by keyword."""
    from avstack.tasks.ecog.gt import ground_truth

    o = fold_all("ecog gt", GroundTruthOptions, keywords, options)
    records, errors = ground_truth(data_root, lang=o.lang, prepared=Path(o.prepared) if o.prepared else None)
    done = Done(_jsonl([r.to_json() for r in records]), None, tuple(f"error: {e}" for e in errors))
    if errors:
        raise CommandFailed(done.notes[0], 1, done)
    return done


@speaks_flags
def egogap_prompts(bundles: PathLike, prompting: EgoGapPrompting | None = None, **keywords: object) -> Done:
    """EgoGap's items as presented, one JSON line each: uid, image, prompt, correct_letter.
    `prompting` (EgoGapPrompting: style, options, shuffle_seed) or its fields by keyword."""
    from avstack.tasks.egogap.stack import EgoGapStack, prompt_lines

    p = fold_all("egogap prompts", EgoGapPrompting, keywords, prompting)
    return Done(_jsonl(prompt_lines(bundles, EgoGapStack(p.style, "image", p.options, p.shuffle_seed))))


@speaks_flags
def egogap_export(bundles: PathLike, exporting: EgoGapExporting | None = None, **keywords: object) -> Done:
    """EgoGap fine-tuning data (ms-swift's train.jsonl and test.jsonl) with an image-level split:
    `exporting` (EgoGapExporting: out, to, images, style, test_fraction, seed, rationales) or its
    fields by keyword (`out` is required)."""
    from avstack.tasks.egogap.export import export_bundles

    e = fold_all("egogap export", EgoGapExporting, keywords, exporting)
    if e.to != "ms-swift":
        raise UsageError(f"--to must be ms-swift; found {e.to!r}")
    res = export_bundles(bundles, e.out, e.images, e.style, e.test_fraction, e.seed, e.rationales)
    summary = f"wrote {res['train']} train and {res['test']} test items to {e.out}"
    done = Done(summary, Path(e.out), tuple(f"  SKIPPED {p}" for p in res["problems"]))
    if res["problems"]:
        raise CommandFailed(done.notes[0], 1, done)
    return done


@speaks_flags
def check_prompts(folder: PathLike) -> Done:
    """One clip of the sample set rendered with a folder's templates: unknown variables, missing
    parts and where the frames go (`Done.summary`); CommandFailed where the templates fall short."""
    from avstack.tasks.ecog.prompt_check import check_prompts as check

    said, ok = check(folder)
    done = Done(said, Path(folder))
    if not ok:
        raise CommandFailed(f"the templates in {folder} fall short (see above)", 1, done)
    return done
