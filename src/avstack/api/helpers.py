"""The benchmarks' helpers through the door: EcoG's ground truth (`avstack ecog gt`), EgoGap's
prompts and fine-tuning export (`avstack egogap prompts|export`), and the check of a folder of
prompt templates (`avstack prompts check`). Each returns what its command prints (Done) and
raises CommandFailed (code 1) where items were left out, after writing what it could."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from avstack.api.failures import CommandFailed, speaks_flags
from avstack.api.options import Done
from avstack.errors import UsageError

PathLike = str | Path


def _jsonl(rows: Sequence[Mapping[str, object]]) -> str:
    return "\n".join(json.dumps(r, ensure_ascii=False) for r in rows)


@speaks_flags
def ecog_ground_truth(data_root: PathLike, *, lang: str | None = None, prepared: PathLike | None = None) -> Done:
    """EcoG's normalized ground truth, one JSON line per clip (`Done.summary`); a clip that cannot
    be used is a note naming it, and the others are kept."""
    from avstack.tasks.ecog.gt import ground_truth

    records, errors = ground_truth(data_root, lang=lang, prepared=Path(prepared) if prepared else None)
    done = Done(_jsonl([r.to_json() for r in records]), None, tuple(f"error: {e}" for e in errors))
    if errors:
        raise CommandFailed(done.notes[0], 1, done)
    return done


@speaks_flags
def egogap_prompts(
    bundles: PathLike, *, style: str = "default", options: str = "all", shuffle_seed: int | None = None
) -> Done:
    """EgoGap's items as presented, one JSON line each: uid, image, prompt, correct_letter."""
    from avstack.tasks.egogap.stack import EgoGapStack, prompt_lines

    return Done(_jsonl(prompt_lines(bundles, EgoGapStack(style, "image", options, shuffle_seed))))


@speaks_flags
def egogap_export(
    bundles: PathLike,
    *,
    out: PathLike,
    to: str = "ms-swift",
    images: PathLike | None = None,
    style: str = "default",
    test_fraction: float = 0.2,
    seed: int = 0,
    rationales: PathLike | None = None,
) -> Done:
    """EgoGap fine-tuning data (ms-swift's train.jsonl and test.jsonl) with an image-level split."""
    from avstack.tasks.egogap.export import export_bundles

    if to != "ms-swift":
        raise UsageError(f"--to must be ms-swift; found {to!r}")
    res = export_bundles(bundles, out, images, style, test_fraction, seed, rationales)
    summary = f"wrote {res['train']} train and {res['test']} test items to {out}"
    done = Done(summary, Path(out), tuple(f"  SKIPPED {p}" for p in res["problems"]))
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
