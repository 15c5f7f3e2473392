"""`avstack view`: the site of the task the folders belong to."""

from __future__ import annotations

from pathlib import Path

from avstack.io import read_json_file


def build_view(first: str | Path, runs: list[str | Path], out: str | Path) -> Path:
    """EcoG: `first` is the prepared folder and `runs` its runs. EgoGap: every folder is a run."""
    first = Path(first)
    if (
        runs
        and (Path(runs[0]) / "run.json").is_file()
        and read_json_file(Path(runs[0]) / "run.json", dict).get("task") == "videoqa"
    ):
        from avstack.tasks.videoqa.view import build_site as videoqa_site

        return videoqa_site(first, [Path(r) for r in runs], out)
    if (first / "run.json").is_file() and read_json_file(first / "run.json", dict).get("task") == "egogap":
        from avstack.tasks.egogap.view import build_site as egogap_site

        return egogap_site([first, *map(Path, runs)], out)
    from avstack.tasks.ecog.view import build_site

    return build_site(first, runs, out)
