"""`avstack.export` and `avstack.view`: precomputed inputs for other harnesses, and the offline
site, for every registered task (each task's own `export` and `view`; no branch on its name)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from avstack.api.commands import PathLike, chosen_task
from avstack.api.failures import speaks_flags
from avstack.api.options import Done
from avstack.errors import UsageError
from avstack.options import fold, fold_all, option
from avstack.runs.exports.rows import ExportOptions
from avstack.tasks import DEFAULT_TASK, StackChoice


@speaks_flags
def export(
    prepared: PathLike | None = None,
    *,
    task: str = DEFAULT_TASK,
    stack: StackChoice | None = None,
    exporting: ExportOptions | None = None,
    **keywords: object,
) -> Done:
    """Every item of a task under one stack, as `avstack run` would send it, for another harness:
    `to` jsonl, openai-batch, hf (Parquet, images embedded) or lmms-eval (a task folder whose hooks
    are the task's own parser and scorer); `features` for any prepared folder. Where and how it is
    written is one record (ExportOptions: to, out, model, max_tokens, shard_size, executor,
    ray_address), the stack another (StackChoice), or their fields by keyword; the task's own
    options by keyword, as for `run` (videoqa: questions; EgoGap: bundles, images, ...)."""
    choice, opts = fold(StackChoice, keywords, stack), fold(ExportOptions, keywords, exporting)
    opts = replace(opts, out=Path(opts.out))
    if opts.to == "features":
        from avstack.features import export_features

        if prepared is None:
            raise UsageError("--to features needs the PREPARED folder")
        path = export_features(prepared, opts.out)
        return Done(f"wrote {path} (and {path.with_suffix('.parquet').name} when datasets is installed)", path)
    chosen, inputs = chosen_task(task, keywords)
    if chosen.export is None or chosen.run_stack is None:
        raise UsageError(f"--task {task} has no export")
    made = chosen.run_stack(choice, inputs)
    path = chosen.export(Path(prepared) if prepared is not None else None, inputs, made, opts)
    return Done(f"wrote {path} ({made.name})", path)


@dataclass(frozen=True)
class Viewing:
    """Where `avstack view` writes the site, and whether (and on which port) it serves it."""

    out: Path = option(Path("site"), "Site folder (open index.html, no server needed)", short="-o")
    serve: bool = option(False, "Also serve the site on 127.0.0.1", switch=True)
    port: int = option(8000, "Port for --serve")


@speaks_flags
def view(
    prepared: PathLike, runs: Sequence[PathLike] | None = (), viewing: Viewing | None = None, **keywords: object
) -> Done:
    """The static, offline site of the folders' task: `prepared` is the prepared folder (EcoG,
    videoqa) or a run folder (EgoGap, whose folders are all runs); `runs` the run folders to show,
    the first the baseline. The task is the one the runs' run.json names (EcoG without runs).
    `viewing` (Viewing: out, serve, port) or its fields by keyword; `serve`: then serve the site
    on 127.0.0.1:`port` until interrupted."""
    from avstack.io import read_json_file
    from avstack.tasks import task_of_run

    how = fold_all("view", Viewing, keywords, viewing)
    out = Path(how.out)
    first, folders = Path(prepared), [Path(r) for r in runs or ()]
    named = next((f / "run.json" for f in [*folders, first] if (f / "run.json").is_file()), None)
    chosen = task_of_run(read_json_file(named, dict) if named else {})
    if chosen.view is None:
        raise UsageError(f"--task {chosen.name} has no view")
    index = chosen.view(first, folders, out)
    if how.serve:
        from avstack.site.pages import serve as serve_site

        print(f"site: {index}", flush=True)  # said before the server blocks
        serve_site(out, how.port)
    return Done(f"site: {index}", index)
