"""Hostile but realistic input, one test (or more) per class of failure: secrets echoed by servers,
HTTP errors that are no answers, huge masks and frames, paths that leave their folder, killed
workers, full and read-only disks, bad encodings and shapes, clip ids, determinism, small things."""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import zlib
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from avstack_cli.app import app
from conftest import LAYOUTS, SAMPLES
from fake_http import JsonHandler
from typer.testing import CliRunner

from avstack.manifest import load_manifest
from avstack.preparation.driver import prepare
from avstack.preparation.settings import PrepareSettings
from avstack.prompting.stacks import make_stack
from avstack.runs.sending.engine import Asking, RunSettings
from avstack.runs.sending.runners import FatalError
from avstack.synthetic import synth
from avstack.tasks import backend_for
from avstack.tasks.ecog.runs import run

SECRET = "sk-live-ECHOED-key-0123456789abcdef"


def _texts(folder: Path) -> str:
    return "".join(f.read_text(errors="ignore") for f in folder.rglob("*") if f.is_file())


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The real console script in a fresh process (exit code, stdout and stderr as a user sees them)."""
    code = "from avstack_cli.app import main; main()"
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=full_env)


# --------------------------------------------------------------------------- a server that echoes the key


class EchoServer(JsonHandler):
    """Chat-completions; per clip (found by its marker) a way of echoing the Authorization header."""

    mode: dict = {}
    default = "ok"
    calls: list = []
    answers: dict = {}

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        auth = str(self.headers.get("Authorization"))
        user = body["messages"][-1]["content"][0]["text"]
        clip = next((c for c in self.answers if c in user), None)
        self.calls.append(clip)
        kind = self.mode.get(clip, self.default)
        if kind == "401":
            self.send_json(401, {"error": {"message": f"invalid key {auth}", "headers": {"authorization": auth}}})
        elif kind == "404":
            self.send_json(404, {"error": f"model not found (you sent {auth})"})
        elif kind == "500":
            self.send_json(500, {"error": f"boom for {auth}"})
        elif kind == "content":
            self.send_json(200, _completion(f"I saw {auth} and {self.answers[clip]}"))
        elif kind == "usage":
            self.send_json(200, _completion(self.answers[clip], {"prompt_tokens": 1, "note": auth}))
        else:
            self.send_json(200, _completion(self.answers[clip]))


def _completion(text: str, usage: dict | None = None) -> dict:
    return {"choices": [{"message": {"role": "assistant", "content": text}}], "usage": usage or {"prompt_tokens": 1}}


@pytest.fixture()
def echo_server(prepared, tmp_path):
    from test_run import _with_markers

    from avstack.tasks.ecog.baselines import Oracle

    prep = _with_markers(prepared, tmp_path)
    EchoServer.answers = {
        r.clip_id: Oracle().answer(None, {"eval_gt": r.eval_gt, "width": r.width, "height": r.height}).text
        for r in load_manifest(prep)
    }
    EchoServer.mode, EchoServer.default, EchoServer.calls = {}, "ok", []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), EchoServer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield prep, f"http://127.0.0.1:{httpd.server_port}/v1"
    httpd.shutdown()


def test_1_an_echoed_key_reaches_no_file_and_no_console(echo_server, tmp_path):
    prep, url = echo_server
    clips = sorted(EchoServer.answers)
    EchoServer.mode = {clips[0]: "500", clips[1]: "content", clips[2]: "usage"}
    env = {"OPENAI_API_KEY": SECRET}
    out = tmp_path / "run"
    res = _cli("run", str(prep), "--model", "openai:m", "--base-url", url, "--out", str(out), "--retries", "1", env=env)
    assert res.returncode == 1 and "1 of 7 items failed" in res.stderr, res.stderr  # the 500 clip: a failed item
    assert SECRET not in res.stdout + res.stderr
    preds = {p["video_name"]: p for p in map(json.loads, (out / "predictions.jsonl").read_text().splitlines())}
    assert "boom for Bearer ***" in preds[clips[0]]["error"]  # the echo is kept, the key is not
    assert preds[clips[1]]["raw"].startswith("I saw Bearer ***") and preds[clips[2]]["usage"]["note"] == "Bearer ***"
    assert SECRET not in _texts(out)
    # the ablation cache too (no 500 there: ablate's default retries would back off for a minute)
    EchoServer.mode = {clips[1]: "content", clips[2]: "usage"}
    abl = tmp_path / "abl"
    res = _cli(
        "ablate", str(prep), "--model", "openai:m", "--base-url", url, "--out", str(abl), "--drop", "word_ts", env=env
    )
    assert res.returncode == 0 and SECRET not in res.stdout + res.stderr + _texts(abl)
    # a 401 whose body echoes the key: the console line is scrubbed too
    EchoServer.default, EchoServer.mode = "401", {}
    res = _cli("run", str(prep), "--model", "openai:m", "--base-url", url, "--out", str(tmp_path / "r401"), env=env)
    assert res.returncode == 2 and "HTTP 401" in res.stderr and SECRET not in res.stdout + res.stderr
    assert "Traceback" not in res.stderr


def test_2_unauthorized_stops_early_records_nothing_and_a_rerun_asks_again(echo_server, tmp_path):
    prep, url = echo_server
    EchoServer.default = "401"
    out, cache = tmp_path / "run", tmp_path / "cache"
    backend = backend_for("ecog", "openai:m", base_url=url, api_key="bad-key-123456")
    with pytest.raises(FatalError, match="HTTP 401"):
        run(prep, make_stack("full"), out, Asking(backend, None, cache, RunSettings(concurrency=2)))
    assert len(EchoServer.calls) <= 3  # stopped after the clips in flight, not after all 7
    assert (out / "predictions.jsonl").read_text() == "" and not list(cache.glob("*.json"))
    # a wrong URL / unknown model is the same kind of error
    EchoServer.default = "404"
    with pytest.raises(FatalError, match="HTTP 404"):
        run(prep, make_stack("full"), out, Asking(backend, None, cache, RunSettings(concurrency=1)))
    # a run written by an older version that stored the 401 as an answer is asked again
    (out / "predictions.jsonl").write_text(
        json.dumps({"video_name": sorted(EchoServer.answers)[0], "raw": None, "error": "RuntimeError: HTTP 401: no"})
        + "\n"
    )
    EchoServer.default, EchoServer.calls = "ok", []
    run(prep, make_stack("full"), out, Asking(backend, None, cache, RunSettings(concurrency=2)))
    assert len(EchoServer.calls) == 7
    preds = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(preds) == 7 and all(p["error"] is None for p in preds)


# --------------------------------------------------------------------------- huge masks and frames


def _png_declaring(width: int, height: int) -> bytes:
    """A real, valid grayscale PNG of width x height zeros (compresses to a few MB)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    comp = zlib.compressobj(1)
    row = b"\x00" * (width + 1)
    body = b"".join(comp.compress(row) for _ in range(height)) + comp.flush()
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", body) + chunk(b"IEND", b"")


def _peak_rss_mb(*args: str) -> tuple[subprocess.CompletedProcess, float]:
    code = (
        "import re, sys\nfrom avstack_cli.app import main\nsys.argv = ['avstack', *sys.argv[1:]]\n"
        "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\nelse:\n    code = 0\n"
        # VmHWM: this process's own peak (ru_maxrss would carry the forking parent's over exec)
        "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)\n"
        "print('MAXRSS', hwm, file=sys.stderr)\nsys.exit(code)"
    )
    res = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    rss = next(int(x.split()[1]) for x in res.stderr.splitlines() if x.startswith("MAXRSS")) / 1024
    return res, rss


def test_3_a_mask_declaring_a_huge_size_is_refused_before_decoding(sample_root, tmp_path):
    import base64

    root = tmp_path / "data"
    shutil.copytree(sample_root / "指令2", root / "指令2")
    gt = json.loads((root / "指令2" / "eval_gt.json").read_text())
    name = next(iter(gt))
    huge = _png_declaring(20000, 20000)  # 400 MB once decoded
    gt[name]["answer"][0]["mask"]["mask_base64"] = base64.b64encode(huge).decode()
    (root / "指令2" / "eval_gt.json").write_text(json.dumps(gt))
    res, rss = _peak_rss_mb("ecog", "gt", str(root))
    assert res.returncode == 1 and "20000x20000" in res.stderr and f"指令2/{name}" in res.stderr
    assert "answer[0] ('A')" in res.stderr  # names the clip and the referent
    assert rss < 300, rss  # decoding would have cost 400 MB
    # the same ground truth as a scoring file: that clip is a GT error, the others are scored
    gt_file = tmp_path / "gt.jsonl"
    gt_file.write_text(res.stdout)
    lines = [json.loads(x) for x in res.stdout.splitlines()]
    lines[0]["eval_gt"]["answer"][0]["mask"]["mask_base64"] = base64.b64encode(huge).decode()
    gt_file.write_text("".join(json.dumps(x) + "\n" for x in lines))
    (tmp_path / "p.jsonl").write_text("".join(json.dumps({"video_name": x["video_name"]}) + "\n" for x in lines))
    res, rss = _peak_rss_mb("score", "--gt", str(gt_file), "--pred", str(tmp_path / "p.jsonl"))
    assert res.returncode == 0 and "GT ERROR" in res.stderr and "20000x20000" in res.stderr and rss < 300, rss
    # prepare records it as that clip's data error, the other clip goes on
    report = prepare(root, tmp_path / "out", PrepareSettings(anchors=("frames",)), workers=1, layouts=LAYOUTS)
    bad = {r.clip_id: r.error for r in report.records if r.error}
    assert list(bad) == [f"指令2/{name}"] and "20000x20000" in bad[f"指令2/{name}"]["message"]


def test_3_decoded_masks_are_kept_in_a_byte_budget():
    import numpy as np

    from avstack.tasks.ecog.metrics import _MaskCache

    cache = _MaskCache(10_000)
    for i in range(50):
        cache.get(str(i), lambda: np.zeros(1000, np.uint8))
    assert cache.used <= 10_000 and len(cache.items) == 10


def test_4_frames_over_the_pixel_limit_are_refused_with_a_clear_error(tmp_path):
    root = tmp_path / "v"
    root.mkdir()
    synth.write_clip(root / "big.mp4", synth.ClipSpec(duration_s=0.5, width=640, height=360))
    synth.write_clip(root / "small.mp4", synth.ClipSpec(duration_s=0.5, width=160, height=96))
    out = tmp_path / "out"
    res = CliRunner().invoke(
        app, ["prepare", str(root), "--out", str(out), "--anchors", "frames", "--max-pixels", "100000"]
    )
    assert res.exit_code == 1
    assert "FAILED big.mp4" in res.output and "640x360 px exceed the limit of 100000 px" in res.output
    recs = {r.clip_id: r for r in load_manifest(out)}
    assert recs["small.mp4"].ok and not recs["big.mp4"].frames
    assert not any((out / "frames").glob("*/")) or all(  # the refused clip left no frames behind
        f.parent.name in {Path(fr.path).parent.name for fr in recs["small.mp4"].frames}
        for f in (out / "frames").rglob("*.jpg")
    )


def test_4_max_side_shrinks_in_the_decoder(tmp_path):
    from avstack import media

    path = tmp_path / "c.mp4"
    synth.write_clip(path, synth.ClipSpec(duration_s=0.5, width=640, height=360))
    sample = media.sample_frames(path, fps=2, max_side=320)
    assert all(f.image.shape[:2] == (180, 320) for f in sample.frames)
    assert [synth.read_index(f.image, scale=0.5) for f in sample.frames] == [f.index for f in sample.frames]


# --------------------------------------------------------------------------- paths read from files


def test_5_manifest_paths_that_leave_the_prepared_folder_are_refused(prepared, tmp_path):
    dst = tmp_path / "prep"
    shutil.copytree(prepared, dst)
    recs = [r.to_json() for r in load_manifest(dst)]
    recs[0]["frames"][0]["path"] = "../../../../etc/passwd"
    recs[1]["frames"][1]["path"] = "/etc/passwd"
    (dst / "manifest.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs))
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", str(dst), "--model", "oracle", "--out", str(out)])
    assert res.exit_code == 1 and "2 of 7 items failed" in res.output and "escapes" in res.output, res.output
    preds = {p["video_name"]: p for p in map(json.loads, (out / "predictions.jsonl").read_text().splitlines())}
    assert "escapes" in preds[recs[0]["clip_id"]]["error"] and "escapes" in preds[recs[1]["clip_id"]]["error"]
    assert sum(p["error"] is None for p in preds.values()) == 5  # the others go on
    res = CliRunner().invoke(app, ["export", str(dst), "--to", "openai-batch", "--out", str(tmp_path / "exp")])
    assert res.exit_code == 2 and recs[0]["clip_id"] in res.output and not (tmp_path / "exp" / "batch.jsonl").exists()
    assert "root:" not in _texts(tmp_path)  # /etc/passwd was never read into an output


def test_5_egogap_export_refuses_a_climbing_image_name(tmp_path):
    from test_egogap import _bundles

    bundles = _bundles(tmp_path / "b.jsonl")
    lines = [json.loads(x) for x in bundles.read_text().splitlines()]
    lines[0]["file_name"] = "../../../etc/passwd"
    bundles.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "sft"
    res = CliRunner().invoke(app, ["egogap", "export", str(bundles), "--out", str(out)])
    assert res.exit_code == 1 and "must be relative" in res.output
    written = (out / "train.jsonl").read_text() + (out / "test.jsonl").read_text()
    assert "passwd" not in written and written.count("\n") == 6  # the other 3 images' 6 items


# --------------------------------------------------------------------------- killed prepare


def _children(pid: int) -> set[int]:
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            out.add(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to see the process tree")
def test_6_workers_die_with_a_killed_prepare(tmp_path):
    root = tmp_path / "v"
    root.mkdir()
    for i in range(6):
        synth.write_clip(root / f"c{i}.mp4", synth.ClipSpec(duration_s=4.0, width=640, height=360))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from avstack_cli.app import main; main()",
            "prepare",
            str(root),
            "--out",
            str(tmp_path / "out"),
            "--anchors",
            "frames",
            "--fps",
            "30",
            "--workers",
            "2",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 60
    while time.time() < deadline and len(_children(proc.pid)) < 2:
        time.sleep(0.05)
    kids = _children(proc.pid)
    assert len(kids) >= 2, "the workers never started"
    time.sleep(0.5)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 10
    while time.time() < deadline and any(_alive(k) for k in kids):
        time.sleep(0.1)
    assert not any(_alive(k) for k in kids)
    before = sorted(p.name for p in (tmp_path / "out").rglob("*"))
    time.sleep(1.0)
    assert sorted(p.name for p in (tmp_path / "out").rglob("*")) == before  # nobody writes on


# --------------------------------------------------------------------------- full and read-only disks


@pytest.fixture()
def tiny_disk(tmp_path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(mnt)]).returncode:
        pytest.skip("needs root and tmpfs to make a small disk")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)])


def test_7_a_full_disk_is_one_line_and_nothing_written_is_half(prepared, tiny_disk):
    out = tiny_disk / "run"
    res = _cli(
        "ablate", str(prepared), "--model", "chance", "--drop", "word_ts", "--drop", "frame_ts", "--out", str(out)
    )
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr and "No space left on device" in res.stderr
    assert str(tiny_disk) in res.stderr and len(res.stderr.strip().splitlines()) == 1
    for pred in out.rglob("predictions.jsonl"):
        lines = pred.read_text().splitlines()
        assert all(json.loads(x)["video_name"] for x in lines)  # every line whole


def test_7_a_read_only_folder_is_one_line_in_every_command(prepared, tiny_disk, sample_root):
    subprocess.run(["mount", "-o", "remount,ro", str(tiny_disk)], check=True)
    for args in (
        ["prepare", str(sample_root), "--out", str(tiny_disk / "p"), "--anchors", "frames"],
        ["run", str(prepared), "--model", "oracle", "--out", str(tiny_disk / "r")],
        ["stacks", str(prepared), "--out", str(tiny_disk / "s.jsonl")],
        ["export", str(prepared), "--to", "jsonl", "--out", str(tiny_disk / "e")],
        ["report", str(prepared.parent / "nope"), "--out", str(tiny_disk / "rep")],
    ):
        res = _cli(*args)
        assert res.returncode != 0 and "Traceback" not in res.stderr, (args, res.stderr)
        assert res.stderr.startswith("error: ") and len(res.stderr.strip().splitlines()) == 1, (args, res.stderr)
    res = _cli("prepare", str(sample_root), "--out", str(tiny_disk / "p"), "--anchors", "frames")
    assert "Read-only file system" in res.stderr


# --------------------------------------------------------------------------- encodings and shapes


def test_8_non_utf8_annotations_fail_their_folder_only(sample_root, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(sample_root, root)
    ann = root / "指令2" / "annotations.json"
    ann.write_bytes(ann.read_bytes().replace(b"Office", b"Caf\xe9"))  # a Latin-1 byte in UTF-8 text
    report = prepare(root, tmp_path / "out", PrepareSettings(anchors=("frames",)), workers=1, layouts=LAYOUTS)
    bad = [r for r in report.records if r.error]
    assert len(bad) == 1 and "not UTF-8" in bad[0].error["message"] and "指令2" in bad[0].error["message"]
    assert sum(r.ok for r in report.records) == 5
    res = CliRunner().invoke(app, ["ecog", "gt", str(root)])
    assert (
        res.exit_code == 1
        and "not UTF-8" in res.stderr
        and res.exception is None
        or isinstance(res.exception, SystemExit)
    )


@pytest.mark.parametrize(
    ("where", "change", "field"),
    [
        ("gt", lambda g: g["answer"].__setitem__(0, "A"), "answer[0] must be an object"),
        ("gt", lambda g: g.__setitem__("object_choices", "A. cup"), "object_choices must be a list"),
        ("gt", lambda g: g["answer"][0].__setitem__("points", [[float("nan"), 3]]), "finite numbers"),
        ("gt", lambda g: g["answer"][0].__setitem__("stroke_end_time", float("inf")), "stroke_end_time"),
        ("ann", lambda a: a.__setitem__("scene", 7), "'scene' must be a string"),
    ],
)
def test_8_ground_truth_of_the_wrong_shape_is_that_clips_data_error(sample_root, tmp_path, where, change, field):
    root = tmp_path / "data"
    shutil.copytree(sample_root, root)
    folder = root / "指令3"
    if where == "gt":
        gt = json.loads((folder / "eval_gt.json").read_text())
        change(next(iter(gt.values())))
        (folder / "eval_gt.json").write_text(json.dumps(gt))
    else:
        ann = json.loads((folder / "annotations.json").read_text())
        change(ann[0])
        (folder / "annotations.json").write_text(json.dumps(ann))
    out = tmp_path / "out"
    report = prepare(root, out, PrepareSettings(anchors=("frames",)), workers=1, layouts=LAYOUTS)
    bad = [r for r in report.records if r.error]
    assert len(bad) == 1 and field in bad[0].error["message"] and bad[0].clip_id.startswith("指令3/")
    res = CliRunner().invoke(app, ["run", str(out), "--model", "oracle", "--out", str(tmp_path / "r")])
    assert res.exit_code == 0 and "| overall | 6 | 100.0" in res.output  # the others run and score
    res = CliRunner().invoke(app, ["report", str(tmp_path / "r"), "--out", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output


def test_8_lines_of_the_wrong_type_name_file_and_line(prepared, tmp_path):
    pred = tmp_path / "p.jsonl"
    pred.write_text('{"video_name": "x"}\n[1]\n')
    gt = tmp_path / "gt.jsonl"
    gt.write_text(CliRunner().invoke(app, ["ecog", "gt", str(SAMPLES)]).stdout)
    res = CliRunner().invoke(app, ["score", "--gt", str(gt), "--pred", str(pred)])
    assert res.exit_code == 2 and f"{pred}:2: expected a JSON object" in res.output
    bundles = tmp_path / "b.jsonl"
    bundles.write_text(json.dumps({"image_id": 1, "file_name": "a.jpg", "mcq_items": [1]}) + "\n")
    res = CliRunner().invoke(app, ["egogap", "prompts", str(bundles)])
    assert res.exit_code == 2 and f"{bundles}:1: mcq_items[0] must be an object" in res.output
    # a run whose last line was cut: report names the line
    out = tmp_path / "run"
    CliRunner().invoke(app, ["run", str(prepared), "--model", "oracle", "--out", str(out)])
    text = (out / "predictions.jsonl").read_text()
    (out / "predictions.jsonl").write_text(text[: text.rstrip("\n").rfind("\n") + 30])
    res = CliRunner().invoke(app, ["report", str(out), "--out", str(tmp_path / "rep")])
    assert res.exit_code == 2 and "predictions.jsonl:7: not JSON" in res.output


# --------------------------------------------------------------------------- one clip id


def test_9_ecog_gt_and_runs_name_clips_alike(prepared, tmp_path):
    out = tmp_path / "run"
    CliRunner().invoke(app, ["run", str(prepared), "--model", "deixis", "--out", str(out)])
    gt = tmp_path / "gt.jsonl"
    res = CliRunner().invoke(app, ["ecog", "gt", str(SAMPLES), "--manifest", str(prepared)])
    gt.write_text(res.stdout)
    res = CliRunner().invoke(
        app, ["score", "--gt", str(gt), "--pred", str(out / "predictions.jsonl"), "--json", str(tmp_path / "s.json")]
    )
    assert res.exit_code == 0, res.output
    ours = json.loads((out / "score.json").read_text())
    theirs = json.loads((tmp_path / "s.json").read_text())
    assert theirs["counts"]["missing_predictions"] == 0 and theirs["per_clip"] == ours["per_clip"]
    # predictions named by bare file name (another harness): more than half missing -> exit 1
    bare = tmp_path / "bare.jsonl"
    bare.write_text(
        "".join(
            json.dumps(dict(json.loads(x), video_name=Path(json.loads(x)["video_name"]).name)) + "\n"
            for x in (out / "predictions.jsonl").read_text().splitlines()
        )
    )
    res = CliRunner().invoke(app, ["score", "--gt", str(gt), "--pred", str(bare)])
    assert res.exit_code == 1 and "7 of 7 items have no prediction" in res.output


# --------------------------------------------------------------------------- determinism


def test_10_two_clean_prepares_write_identical_manifests(sample_root, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(sample_root / "指令2", root / "指令2")
    shutil.copytree(sample_root / "指令3", root / "指令3")
    settings = PrepareSettings(anchors=("frames", "audio"))
    prepare(root, tmp_path / "a", settings, workers=1, layouts=LAYOUTS)
    prepare(root, tmp_path / "b", settings, workers=1, layouts=LAYOUTS)
    a, b = (tmp_path / "a" / "manifest.jsonl").read_bytes(), (tmp_path / "b" / "manifest.jsonl").read_bytes()
    assert a == b and b'"sha256"' in a
    wavs = sorted((tmp_path / "a" / "audio").glob("*.wav"))
    assert wavs and all(w.read_bytes() == (tmp_path / "b" / "audio" / w.name).read_bytes() for w in wavs)
    import soundfile as sf

    from avstack import media

    rec = next(r for r in load_manifest(tmp_path / "a") if r.audio)
    samples, rate = sf.read(tmp_path / "a" / rec.audio["path"], dtype="float32")
    want = media.load_audio(root / rec.video)
    assert rate == 16000 and want is not None and (samples == want).all()


# --------------------------------------------------------------------------- smaller


def test_11_smaller_things(sample_root, tmp_path):
    from test_egogap import _bundles, _images

    # the EgoGap input errors are failed items: named, and the run exits 1
    bundles, images = _bundles(tmp_path / "b.jsonl"), _images(tmp_path / "img")
    (images / "000000000003.jpg").unlink()
    res = CliRunner().invoke(
        app,
        [
            "run",
            "--task",
            "egogap",
            "--bundles",
            str(bundles),
            "--images",
            str(images),
            "--model",
            "oracle",
            "--out",
            str(tmp_path / "eg"),
        ],
    )
    assert res.exit_code == 1 and "2 of 8 items failed: " in res.output and "input" in res.output, res.output
    # outputs follow the umask like any file
    old = os.umask(0o022)
    try:
        out = tmp_path / "modes"
        prepare(sample_root / "指令2", out, PrepareSettings(anchors=("frames",)), workers=1, layouts=LAYOUTS)
    finally:
        os.umask(old)
    assert {oct(f.stat().st_mode & 0o777) for f in out.rglob("*") if f.is_file()} == {"0o644"}
    # no clips: said, and a failure
    (tmp_path / "empty").mkdir()
    res = CliRunner().invoke(app, ["prepare", str(tmp_path / "empty"), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "no clips found" in res.output
    # a linked task folder is followed, like a linked video
    root = tmp_path / "linked"
    root.mkdir()
    (root / "指令2").symlink_to((sample_root / "指令2").resolve(), target_is_directory=True)
    report = prepare(root, tmp_path / "lo", PrepareSettings(anchors=("frames",)), workers=1, layouts=LAYOUTS)
    assert len(report.records) == 2 and not report.failed
