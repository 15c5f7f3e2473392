"""What an ablation pays for the parts its stacks share (#58), against a real llama-server.

The multimodal llama-server of docs/local-servers.md (the tiny Qwen2-VL through llama.cpp's own
converter, `make llama-server tiny-vl`), two slots, a fresh server per arm. One ablation of
`full` and three drops (frame_ts, word_ts, asr) on the prepared samples, two ways:

- before: one stack after another in the benchmark's own order (the instruction and the ASR
  block before the frames);
- after: one clip's stacks together (runs.interleave) with `--layout shared-first` (the frames
  with their tags first).

For each: the prompt tokens the server evaluated (`timings.prompt_n`) over those it was sent
(`usage.prompt_tokens`), the share the plan predicted the server would take from its cache
(avstack.runs.planning.plan.PrefixCache, llama.cpp's rule), and the wall time. The ratio is the server's
own count, so it holds on any machine; the wall times are this machine's, measured in the same run.

    python benchmarks/prefix_share.py [--prepared out/demo/prepared] [--out benchmarks/prefix_share.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the tests' server helpers and the tiny model's recipe


def arm(prepared: Path, url: str, out: Path, interleave: bool, layout: str) -> dict:
    from avstack.manifest import opened
    from avstack.runs.ablation.arms import AblationSpec, ablate, plan
    from avstack.runs.planning.plan import Counting
    from avstack.runs.sending.engine import Asking, RunSettings
    from avstack.runs.sending.runners import make_backend
    from avstack.tasks.ecog.task import EcogAblation

    spec = AblationSpec(drops=("frame_ts", "word_ts", "asr"), layouts=(layout,))
    backend = make_backend("openai:qwen2-vl-tiny", base_url=f"{url}/v1", max_tokens=16)
    task = EcogAblation(opened(prepared))
    # the plan as `ablate` makes it: the server counts the text, its prefix cache is predicted
    bill = plan(task, spec, "openai:qwen2-vl-tiny", out, Counting.of(backend, clip_major=interleave), 16).to_json()
    settings = RunSettings(concurrency=2, interleave=interleave)
    t0 = time.perf_counter()
    ablate(task, spec, Asking(backend, "openai:qwen2-vl-tiny", out / "cache", settings), out, bill)
    wall = time.perf_counter() - t0
    sent = evaluated = requests = 0
    for path in out.glob("*/predictions.jsonl"):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if r["cached"] or r["raw"] is None:
                continue
            requests += 1
            sent += r["usage"]["prompt_tokens"]
            evaluated += r["usage"]["timings"]["prompt_n"]
    planned = bill["total"]["cache_read_tokens"] / bill["total"]["input_tokens"]
    return {"requests": requests, "prompt_tokens_sent": sent, "prompt_tokens_evaluated": evaluated,
            "evaluated_share": round(evaluated / sent, 4), "cached_share": round(1 - evaluated / sent, 4),
            "planned_cached_share": round(planned, 4), "wall_s": round(wall, 2)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prepared", type=Path, default=HERE.parent / "out" / "demo" / "prepared")
    ap.add_argument("--out", type=Path, default=HERE / "prefix_share.json")
    args = ap.parse_args()
    import tiny_qwen2vl
    from llama_servers import llama_binary, llama_server

    binary, made = llama_binary(), tiny_qwen2vl.cached_gguf()
    if binary is None or made is None or not (args.prepared / "manifest.jsonl").is_file():
        sys.exit("needs `make llama-server tiny-vl` and a prepared folder (`make demo` writes out/demo/prepared)")
    model, mmproj = made
    result = {"server": "llama-server, tiny Qwen2-VL + mmproj, -np 2 -c 32768",
              "stacks": "full, -frame_ts, -word_ts, -asr", "concurrency": 2}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for name, interleave, layout in (("before", False, "benchmark"), ("after", True, "shared-first")):
            log = Path(tmp) / f"{name}.log"
            served = ["-m", str(model), "--mmproj", str(mmproj), "-c", "32768", "-np", "2"]
            with llama_server(binary, served, log) as url:
                result[name] = arm(args.prepared, url, Path(tmp) / name, interleave, layout)
            print(name, result[name], flush=True)
    result["evaluated_share_after_over_before"] = round(
        result["after"]["evaluated_share"] / result["before"]["evaluated_share"], 4
    )
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
