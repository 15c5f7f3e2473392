import json
import re
from pathlib import Path

import pytest
from avstack_cli.app import app
from conftest import manifest_dicts
from typer.testing import CliRunner

HARNESSES = Path(__file__).resolve().parents[1] / "docs" / "harnesses.md"


def _loader_block() -> str:
    blocks = re.findall(r"```python\n(# avstack export loaders.*?)```", HARNESSES.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 1, "docs/harnesses.md must hold exactly one export-loader snippet"
    return blocks[0]


def test_exports_load_with_the_readme_snippet(prepared, tmp_path):
    pytest.importorskip("datasets", reason="the hf export needs avstack[export]")
    out = tmp_path / "export"
    for fmt in ("openai-batch", "jsonl", "hf"):
        res = CliRunner().invoke(app, ["export", str(prepared), "--to", fmt, "--out", str(out)])
        assert res.exit_code == 0, res.output
    scope: dict = {}
    exec(_loader_block().replace('EXPORT = "out/export"', f"EXPORT = {str(out)!r}"), scope)
    assert scope["first_frame"].size[0] > 0
    # the parquet rows carry the same true pts as the manifest, frames in time order
    records = {r["clip_id"]: r for r in manifest_dicts(prepared)}
    for row in scope["ds"]:
        want = [f["pts_ms"] for f in records[row["id"]]["frames"]]
        assert row["image_pts_ms"] == want and len(row["images"]) == len(want)
    assert len(scope["batch"]) == len(scope["rows"]) == len(scope["ds"]) == 7


def test_jsonl_export_follows_the_stack(prepared, tmp_path):
    CliRunner().invoke(app, ["export", str(prepared), "--to", "jsonl", "--out", str(tmp_path), "--drop", "frame_ts"])
    rows = [json.loads(x) for x in (tmp_path / "data.jsonl").read_text().splitlines()]
    assert all("<timestamp_ms>" not in r["question"] and r["stack"] == "full-no_frame_ts" for r in rows)
    assert all(r["images"] and all(Path(p).is_file() for p in r["images"]) for r in rows)
    res = CliRunner().invoke(app, ["export", str(prepared), "--to", "tsv", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "jsonl, openai-batch, hf" in res.output


def test_exports_are_written_in_shards_with_the_same_rows(prepared, tmp_path):
    pytest.importorskip("datasets", reason="the hf export needs avstack[export]")
    from datasets import load_dataset

    for size in ("3", "1000"):
        out = tmp_path / size
        for fmt in ("jsonl", "hf"):
            args = ["export", str(prepared), "--to", fmt, "--out", str(out), "--shard-size", size]
            res = CliRunner().invoke(app, args)
            assert res.exit_code == 0, res.output
    assert sorted(p.name for p in (tmp_path / "3").glob("test-*.parquet")) == [
        "test-00000.parquet",
        "test-00001.parquet",
        "test-00002.parquet",
    ]
    assert (tmp_path / "3" / "data.jsonl").read_bytes() == (tmp_path / "1000" / "data.jsonl").read_bytes()
    a = load_dataset("parquet", data_files=str(tmp_path / "3" / "test-*.parquet"), split="train")
    b = load_dataset("parquet", data_files=str(tmp_path / "1000" / "test-*.parquet"), split="train")
    assert sorted(a["id"]) == sorted(b["id"]) and len(a) == 7
    assert not list(tmp_path.rglob(".export-*"))  # no temporary shard folder left behind
