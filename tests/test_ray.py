"""`prepare --executor ray` on a real local multi-node Ray cluster (`ray.cluster_utils.Cluster`, two
nodes with one CPU each): the same manifest as the local executor, a killed worker retried, a
killed driver resumed from the cache, storage checked on every node."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import LAYOUTS, SAMPLES

from avstack import media
from avstack.manifest import load_manifest
from avstack.preparation.driver import prepare
from avstack.preparation.settings import PrepareSettings

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'avstack[ray]')")
# Ray's own deprecations are errors here: an API Ray's next releases remove fails now, not then
pytestmark = pytest.mark.filterwarnings("error::ray.util.annotations.RayDeprecationWarning")


@pytest.fixture(scope="module")
def poison_root(tmp_path_factory):
    """The sample set again, one clip of which kills any worker that decodes it (test hook)."""
    root = tmp_path_factory.mktemp("poison") / "root"
    shutil.copytree(SAMPLES, root)
    return root


@pytest.fixture(scope="module")
def cluster(poison_root):
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    c.add_node(num_cpus=1)
    hook = {"AVSTACK_TEST_SEGFAULT": str((poison_root / "指令2" / "l2_pick.mp4").resolve())}
    ray.init(address=c.address, log_to_driver=False, include_dashboard=False, runtime_env={"env_vars": hook})
    c.wait_for_nodes()
    yield c
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    """The sample set plus one corrupt clip (a bad clip must be recorded the same way)."""
    root = tmp_path_factory.mktemp("data") / "root"
    shutil.copytree(SAMPLES, root)
    (root / "指令2" / "l2_portrait.mp4").write_bytes(b"\x00\x00\x00 not a video at all" * 50)
    # a clip cut short (a camera that lost power; index first, so what is left plays): its frames
    # are the file's, on one decoder thread or many
    clip = root / "指令5" / "l4_place_pick.mp4"
    _remux_faststart(clip, tmp_path_factory.mktemp("whole") / "faststart.mp4")
    data = (tmp_path_factory.getbasetemp() / "whole0" / "faststart.mp4").read_bytes()
    clip.write_bytes(data[: len(data) * 17 // 20])
    return root


def _remux_faststart(src: Path, dst: Path) -> None:
    import av

    with av.open(str(src)) as i, av.open(str(dst), "w", options={"movflags": "faststart"}) as o:
        streams = {s.index: o.add_stream_from_template(s) for s in i.streams if s.type in ("video", "audio")}
        for packet in i.demux(*[i.streams[k] for k in streams]):
            if packet.dts is not None:
                packet.stream = streams[packet.stream.index]
                o.mux(packet)


def _records(folder: Path) -> dict[str, dict]:
    return {r.clip_id: r.to_json() for r in load_manifest(folder)}


@pytest.mark.parametrize("mode", ["single", "batched", "packed"])
def test_ray_manifest_equals_the_local_one(cluster, data_root, tmp_path, mode):
    s = PrepareSettings(lang="en", asr_mode=mode)
    local = prepare(data_root, tmp_path / "local", s, workers=2, layouts=LAYOUTS)
    remote = prepare(data_root, tmp_path / "ray", s, layouts=LAYOUTS, executor="ray")
    assert remote.count == local.count == 7 and len(remote.failed) == len(local.failed) == 1
    # byte for byte: clip records, frame pts, ASR words and probabilities, the bad clip's error
    assert (tmp_path / "ray" / "manifest.jsonl").read_bytes() == (tmp_path / "local" / "manifest.jsonl").read_bytes()
    a, b = _records(tmp_path / "local"), _records(tmp_path / "ray")
    assert sum(len(r["asr"]["words"]) for r in a.values() if r["asr"]) >= 10
    assert b["指令2/l2_portrait.mp4"]["error"]["type"] == "MediaError"
    cut = data_root / "指令5" / "l4_place_pick.mp4"
    player = media.sample_frames(cut, decode="sequential", threads=1, thread_type="NONE")
    assert b["指令5/l4_place_pick.mp4"]["last_frame"]["pts_ms"] == player.last.pts_ms  # the last frame shown
    assert b["指令5/l4_place_pick.mp4"]["damage"]  # and what the cut took, the same in both
    for rec in b.values():  # the JPEG bytes too
        for f in rec["frames"]:
            assert (tmp_path / "ray" / f["path"]).read_bytes() == (tmp_path / "local" / f["path"]).read_bytes()
    assert json.loads((tmp_path / "ray" / "prepare.json").read_text())["executor"] == "ray"


def _ray_task_pids() -> list[int]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [int(line.split()[0]) for line in out.splitlines() if "ray::Map(_prepare_row)" in line]


def test_a_killed_worker_is_retried_and_nothing_is_duplicated(cluster, tmp_path):
    result: dict = {}

    def go():
        result["report"] = prepare(
            SAMPLES, tmp_path / "out", PrepareSettings(lang="en"), layouts=LAYOUTS, executor="ray"
        )

    thread = threading.Thread(target=go)
    thread.start()
    killed = None
    deadline = time.time() + 120
    while thread.is_alive() and time.time() < deadline and killed is None:
        pids = _ray_task_pids()
        if pids:
            killed = pids[0]
            os.kill(killed, signal.SIGKILL)
        time.sleep(0.02)
    thread.join(300)
    assert killed is not None, "no Ray task process was seen running"
    report = result["report"]
    assert report.count == 7 and not report.failed
    lines = (tmp_path / "out" / "manifest.jsonl").read_text().splitlines()
    ids = [json.loads(x)["clip_id"] for x in lines]
    assert len(ids) == len(set(ids)) == 7


def test_a_killed_driver_reruns_from_the_cache(cluster, tmp_path):
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-c",
        "from avstack_cli.app import main; main()",
        "prepare",
        str(SAMPLES),
        "--out",
        str(out),
        "--lang",
        "en",
        "--executor",
        "ray",
        "--ray-address",
        cluster.address,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    index = out / "cache" / "frames"
    while time.time() < deadline and len(list(index.glob("*.json"))) < 3 and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = len(list(index.glob("*.json")))
    assert done >= 3 and not (out / "manifest.jsonl").exists()
    time.sleep(1.0)  # the killed driver's tasks are cancelled by Ray
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    hits = int(res.stdout.split("(")[1].split()[0])
    assert hits >= done and "prepared 7/7" in res.stdout


def test_storage_every_node_cannot_write_is_refused_naming_the_node(cluster, tmp_path):
    from avstack.preparation.executors.ray import check_shared_storage

    mnt = tmp_path / "ro"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,ro", "tmpfs", str(mnt)]).returncode:
        pytest.skip("needs root and tmpfs to make a folder no node can write")
    try:
        refusal = r"node [0-9.]+ \([0-9a-f]{12}\) cannot write into .*storage every node reaches"
        with pytest.raises(OSError, match=refusal):
            check_shared_storage(mnt / "out")
    finally:
        subprocess.run(["umount", "-l", str(mnt)])
    check_shared_storage(tmp_path / "shared")  # a folder every node sees passes


def test_ray_workers_write_the_export_shards(cluster, tmp_path):
    from avstack.prompting.stacks import make_stack
    from avstack.runs.exports.rows import ExportOptions
    from avstack.tasks.ecog.export import export

    prep = tmp_path / "prep"
    prepare(SAMPLES, prep, PrepareSettings(anchors=("frames",)), workers=1, layouts=LAYOUTS)
    local = export(prep, make_stack("full"), ExportOptions("jsonl", tmp_path / "local", shard_size=3))
    remote = export(prep, make_stack("full"), ExportOptions("jsonl", tmp_path / "ray", shard_size=3, executor="ray"))
    assert remote.read_bytes() == local.read_bytes() and len(local.read_text().splitlines()) == 7


def test_ray_workers_write_every_tasks_export(cluster, tmp_path):
    """One writer for every task (#76): EgoGap's rows, sharded, written by Ray Data workers, are the
    bytes the local writer gives (JSONL and the batch file)."""
    from test_egogap import _bundles

    import avstack

    bundles = _bundles(tmp_path / "b.jsonl")
    for to, name in (("jsonl", "data.jsonl"), ("openai-batch", "batch.jsonl")):
        made = {}
        for executor in ("local", "ray"):
            out = tmp_path / f"{to}-{executor}"
            opts = {"to": to, "out": out, "shard_size": 3, "executor": executor}
            done = avstack.export(task="egogap", bundles=bundles, variant="text", **opts)
            made[executor] = done.path.read_bytes()
            assert done.path == out / name and not list(out.glob(".export-*"))  # published whole
        assert made["ray"] == made["local"] and len(made["local"].splitlines()) == 8


def test_a_clip_that_kills_every_worker_is_recorded_and_the_job_finishes(cluster, poison_root, tmp_path):
    report = prepare(
        poison_root, tmp_path / "out", PrepareSettings(anchors=("frames",)), layouts=LAYOUTS, executor="ray"
    )
    recs = _records(tmp_path / "out")
    assert report.count == len(recs) == 7 and [r.clip_id for r in report.failed] == ["指令2/l2_pick.mp4"]
    err = recs["指令2/l2_pick.mp4"]["error"]
    assert err["type"] == "WorkerCrash" and "2 times" in err["message"] and "Segmentation fault" in err["message"]
    assert all(r["frames"] for cid, r in recs.items() if cid != "指令2/l2_pick.mp4")
    assert not list((tmp_path / "out" / ".attempts").glob("*/*"))  # attempt logs cleaned up
