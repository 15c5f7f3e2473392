"""`prepare --executor ray`: the same stage functions on a Ray cluster, scheduled by Ray Data.

One row per clip job (`ray.data.from_items`, one block each so clips spread over the nodes);
`Dataset.map(prepare_row, num_cpus=1)` runs `prepare_clip` (decode, JPEG, audio, and on a CPU
cluster ASR per clip) as Ray tasks, which Ray retries when a worker process or node dies. Where
the cluster has GPUs and ASR is batched, the map decodes only and an actor pool that loads
Whisper once per actor transcribes batches of clips (`map_batches` with a callable class,
`num_gpus`, `concurrency`). Records stream back to the driver as they finish.

The output folder must be storage every node sees (NFS, a mounted bucket, ...): checked first,
each node writing and reading probe files. Files are written atomically into the same
content-addressed cache as the local executor, so two nodes never trust each other's
half-written files and a rerun after any crash is a cache hit for everything already done.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from avstack.errors import MissingPackage
from avstack.io import OutputError, Progress
from avstack.manifest import ClipRecord
from avstack.preparation.discover import ClipJob
from avstack.preparation.executors.local import MAX_CRASHES, AttemptLog, crash_message
from avstack.preparation.settings import PrepareSettings
from avstack.preparation.stages import asr_stage, crashed_record, no_audio_asr, prepare_clip


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise MissingPackage("--executor ray needs Ray: pip install 'avstack[ray]'") from None
    return ray


def connect(address: str | None) -> Any:
    """Join the cluster at `address` (default RAY_ADDRESS), else start a local Ray."""
    ray = _ray()
    if not ray.is_initialized():
        address = address or os.environ.get("RAY_ADDRESS")
        ray.init(address=address, log_to_driver=False, include_dashboard=False, configure_logging=False)
    return ray


def check_shared_storage(out: Path) -> None:
    """Every alive node writes a probe into `out` and reads every other node's: refuse, naming the
    node, when one cannot (the folder is not shared storage)."""
    ray = _ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = [n for n in ray.nodes() if n.get("Alive")]
    probe_dir = out / ".probe" / uuid.uuid4().hex  # made by the nodes themselves

    @ray.remote(num_cpus=0)
    def write(folder: str, name: str) -> bool:
        try:
            Path(folder).mkdir(parents=True, exist_ok=True)
            (Path(folder) / name).write_text(name)
            return True
        except OSError:
            return False

    @ray.remote(num_cpus=0)
    def read(folder: str, names: list[str]) -> list[str]:
        return [n for n in names if not (Path(folder) / n).is_file()]

    def on(node: dict[str, Any]) -> Any:
        return NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)

    names = [n["NodeID"] for n in nodes]
    wrote = ray.get([write.options(scheduling_strategy=on(n)).remote(str(probe_dir), n["NodeID"]) for n in nodes])
    unseen = ray.get([read.options(scheduling_strategy=on(n)).remote(str(probe_dir), names) for n in nodes])
    for node, ok, missing in zip(nodes, wrote, unseen):
        where = f"node {node.get('NodeManagerAddress')} ({node['NodeID'][:12]})"
        if not ok:
            raise OutputError(f"{where} cannot write into {out}: the output folder must be storage every node reaches")
        if missing:
            raise OutputError(f"{where} cannot see files other nodes wrote into {out}: it is not shared storage")
    shutil.rmtree(out / ".probe", ignore_errors=True)


def _prepare_row(
    row: dict[str, Any], settings: bytes, out: str, attempts: str, keep_job: bool = False
) -> dict[str, object]:
    """One clip on a Ray worker: the same `prepare_clip` as the local executor. Ray retries the task
    when its worker dies; the clip's attempt log turns a clip that keeps killing workers into its
    `error` record instead of a retry loop. The job travels on only when a later stage (the GPU
    ASR actors) needs it."""
    job: ClipJob = pickle.loads(row["job"])
    log = AttemptLog(Path(attempts), job.clip_id)
    deaths = log.deaths()
    if len(deaths) >= MAX_CRASHES:
        rec = crashed_record(job, crash_message(deaths))
    else:
        rec = log.run(lambda: prepare_clip(job, pickle.loads(settings), Path(out)))
    out_row = {
        "clip_id": rec.clip_id,
        "record": json.dumps(rec.to_json(), ensure_ascii=False),
        "cache_hit": rec.cache_hit,
    }
    return out_row | ({"job": row["job"]} if keep_job else {})


class AsrActor:
    """Loads Whisper once per actor (a GPU each) and transcribes batches of prepared clips."""

    def __init__(self, settings: bytes, out: str):
        self.s: PrepareSettings = pickle.loads(settings)
        self.out = Path(out)

    def __call__(self, batch: dict[str, Any]) -> dict[str, object]:
        records = []
        for rec_json, job_bytes in zip(batch["record"], batch["job"]):
            rec = ClipRecord.from_json(json.loads(rec_json))
            if rec.ok:
                job = pickle.loads(job_bytes)
                try:
                    asr = asr_stage(job, rec.audio, self.s, self.out) if rec.audio else no_audio_asr(self.s)
                    rec = replace(rec, asr=asr)
                except Exception as exc:  # that clip's error; the batch goes on
                    rec = rec.failed(exc)
            records.append(json.dumps(rec.to_json(), ensure_ascii=False))
        return {"clip_id": batch["clip_id"], "record": records, "cache_hit": batch["cache_hit"]}


def run_ray(
    jobs: list[ClipJob],
    s: PrepareSettings,
    out: Path,
    address: str | None = None,
    progress: Progress | None = None,
    asr_on_gpu: bool = False,
) -> Iterator[ClipRecord]:
    """Clip records as the cluster finishes them (any order)."""
    ray = connect(address)
    check_shared_storage(out)
    gpus = cluster_gpus(address) if asr_on_gpu else 0
    # one decoder thread per one-CPU task unless asked otherwise
    stage = replace(s, threads=s.threads or 1, anchors=_media_only(s) if gpus else s.anchors)
    items = [{"clip_id": j.clip_id, "job": pickle.dumps(j)} for j in jobs]
    attempts = out / ".attempts" / uuid.uuid4().hex
    ds = ray.data.from_items(items, override_num_blocks=max(1, len(items)))
    ds = ds.map(
        _prepare_row,
        fn_kwargs={"settings": pickle.dumps(stage), "out": str(out), "attempts": str(attempts), "keep_job": bool(gpus)},
        # named parameters only (Ray 2.60 deprecates a function of remote args and loose ones,
        # Ray 2.64 removes them). A task whose worker or node dies is retried by Ray Data (its map
        # tasks retry system failures without end); the clip's attempt log, written before each
        # try, ends that: the attempt after the last allowed death records the clip's error
        num_cpus=1,
    )
    if gpus:
        ds = ds.map_batches(
            AsrActor,
            fn_constructor_kwargs={"settings": pickle.dumps(s), "out": str(out)},
            batch_size=s.asr_batch,
            num_gpus=1,
            concurrency=gpus,
        )
    rows = (
        replace(ClipRecord.from_json(json.loads(r["record"])), cache_hit=bool(r["cache_hit"])) for r in ds.iter_rows()
    )
    wrap = progress or (lambda it, n: it)
    try:
        yield from wrap(rows, len(jobs))
    finally:
        shutil.rmtree(attempts, ignore_errors=True)


def cluster_gpus(address: str | None = None) -> int:
    """GPUs in the cluster at `address` (joined or started here)."""
    return int(connect(address).cluster_resources().get("GPU", 0))


def _media_only(s: PrepareSettings) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*(a for a in s.anchors if a != "asr"), "audio"]))
