"""The prompt cache as the plan predicts it and the back-ends mark it (#58): the providers' data
file (cache rules and limits per model family, a wrong entry named), the longest-common-prefix
prediction worked by hand under OpenAI's automatic rule (1,024 tokens, steps of 128) and
Anthropic's breakpoint rule (a write, then reads, nothing below the minimum), the order requests
go out in, Claude's `cache_control` on the block that ends a clip's shared prefix (checked
against the SDK's types), and OpenAI's `prompt_cache_key` only where a prefix is shared."""

from __future__ import annotations

import json

import pytest

from avstack.prompting.messages import Image, Request, Text, prefix_digest, to_anthropic
from avstack.runs.planning.plan import PrefixCache, send_order
from avstack.runs.planning.providers import CacheRule, family_of, load_families
from avstack.runs.sending.runners import BackendOptions

OPENAI = CacheRule("automatic", min_tokens=1024, step=128, read=0.1)
CLAUDE = CacheRule("breakpoint", min_tokens=1024, read=0.1, write=1.25)


def test_openais_rule_by_hand():
    # nothing below 1,024 tokens; above it the cached share grows in steps of 128
    assert [OPENAI.cached(n) for n in (0, 1023, 1024, 1151, 1152, 5000)] == [0, 0, 1024, 1024, 1152, 4992]
    assert CacheRule("automatic").cached(1) == 1 and CacheRule("automatic").cached(0) == 0


def _req(*parts, shared=0, system="sys"):
    return Request(system, tuple(parts), "/r", shared_prefix=shared)


def _tokens(req: Request, n: int, text: str) -> int:
    """A hand-countable prefix size: 500 per image, 1 per character of text."""
    head = [*req.parts[:n], *((Text(text),) if text else ())]
    return sum(500 if isinstance(p, Image) else len(p.text) for p in head)


def test_the_longest_common_prefix_with_the_recent_requests_by_hand():
    cache = PrefixCache(CacheRule("automatic"), window=2, prefix_tokens=_tokens)
    a = _req(Image("a1.jpg"), Image("a2.jpg"), Text("describe x"))
    b = _req(Image("a1.jpg"), Image("a2.jpg"), Text("describe y"))  # shares 2 images + "describe "
    c = _req(Image("a1.jpg"), Image("b2.jpg"), Text("describe x"))  # shares 1 image with a and b
    d = _req(Image("z.jpg"))
    e = _req(Image("a1.jpg"), Image("a2.jpg"), Text("describe x"))  # a is out of the window of 2 by now
    other_system = _req(Image("a1.jpg"), system="another")
    assert cache.predict(a) == (0, 0)
    assert cache.predict(b) == (500 + 500 + len("describe "), 0)
    assert cache.predict(c) == (500, 0)
    assert cache.predict(d) == (0, 0)  # window now holds c, d: e still shares a1 with c
    assert cache.predict(e) == (500, 0)
    assert cache.predict(other_system) == (0, 0)  # the system prompt comes first: nothing shared


def test_openais_minimum_keeps_a_short_shared_prefix_out():
    cache = PrefixCache(OPENAI, window=4, prefix_tokens=_tokens)
    cache.predict(_req(Image("a.jpg"), Text("q1")))
    assert cache.predict(_req(Image("a.jpg"), Text("q2"))) == (0, 0)  # 501 tokens < 1,024
    cache.predict(_req(Image("a.jpg"), Image("b.jpg"), Image("c.jpg"), Text("q1")))
    # 1,500 shared image tokens + "q" = 1,501: cached in whole steps of 128 -> 1,408
    assert cache.predict(_req(Image("a.jpg"), Image("b.jpg"), Image("c.jpg"), Text("q2"))) == (1408, 0)


def test_claudes_breakpoint_writes_once_then_reads_and_nothing_below_its_minimum():
    cache = PrefixCache(CLAUDE, window=3, prefix_tokens=_tokens)
    frames = (Image("f1.jpg"), Image("f2.jpg"), Image("f3.jpg"))  # 1,500 tokens up to the breakpoint
    assert cache.predict(_req(*frames, Text("ask with asr"), shared=3)) == (0, 1500)  # the first writes
    assert cache.predict(_req(*frames, Text("ask without"), shared=3)) == (1500, 0)  # the next reads
    # no breakpoint marked (the benchmark's own layout): Claude caches nothing, however alike
    assert cache.predict(_req(*frames, Text("ask without"), shared=0)) == (0, 0)
    # a marked prefix below the minimum: neither written nor read
    small = PrefixCache(CLAUDE, window=3, prefix_tokens=_tokens)
    assert small.predict(_req(Image("f1.jpg"), Text("a"), shared=1)) == (0, 0)
    assert small.predict(_req(Image("f1.jpg"), Text("b"), shared=1)) == (0, 0)


def test_send_order_clip_by_clip_or_stack_by_stack():
    stacks = {"full": ["f0", "f1"], "-asr": ["a0", "a1"], "short": ["s0"]}
    clip_major = [r for _, r in send_order(stacks, clip_major=True)]  # type: ignore[arg-type]
    stack_major = [r for _, r in send_order(stacks, clip_major=False)]  # type: ignore[arg-type]
    assert clip_major == ["f0", "a0", "s0", "f1", "a1"]
    assert stack_major == ["f0", "f1", "a0", "a1", "s0"]


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("openai:gpt-5-mini", "openai-gpt-5"),
        ("openai:gpt-4.1-nano", "openai-gpt-4.1"),
        ("openai:gpt-4o-mini", "openai-gpt-4o"),
        ("anthropic:claude-opus-4-5", "anthropic-4096"),
        ("anthropic:claude-3-5-haiku-latest", "anthropic-2048"),
        ("anthropic:claude-sonnet-4-5", "anthropic"),
        ("gemini:gemini-3-pro-preview", "gemini-3"),
        ("gemini:gemini-2.5-flash", "gemini"),
    ],
)
def test_each_model_finds_its_family(model, family):
    found = family_of(model)
    assert found is not None and found.name == family
    assert found.read_on and found.source  # every entry says when and where it was read


def test_a_local_server_is_known_by_what_it_says_it_is():
    llama = family_of("openai:anything", server="llama.cpp")
    assert llama is not None and llama.name == "llama.cpp" and llama.cache and llama.cache.kind == "automatic"
    assert family_of("openai:my-finetune") is None  # no fragment matches: no rule, no guess


def test_claudes_limits_in_the_bundled_file():
    limits = family_of("anthropic:claude-sonnet-4-5").limits  # type: ignore[union-attr]
    assert limits.images == 100 and limits.many_images == (20, 2000) and limits.request_bytes == 32_000_000


@pytest.mark.parametrize(
    ("entry", "named"),
    [
        ({"match": "gpt"}, "match"),
        ({"match": ["x"], "cache": {"kind": "sometimes"}}, "cache.kind"),
        ({"match": ["x"], "cache": {"kind": "automatic", "min_tokens": "many"}}, "cache"),
        ({"match": ["x"], "limits": {"pictures": 3}}, "limits"),
        ({"match": ["x"], "limits": {"images": "lots"}}, "limits"),
        ("not an object", "expected an object"),
    ],
)
def test_a_wrong_providers_file_is_an_error_naming_the_family_and_field(tmp_path, entry, named):
    path = tmp_path / "providers.json"
    path.write_text(json.dumps({"families": {"mine": entry}}))
    with pytest.raises(ValueError, match="providers.json") as err:
        load_families(path)
    assert "'mine'" in str(err.value) and named in str(err.value)


def test_a_users_file_replaces_the_bundled_one(tmp_path):
    path = tmp_path / "providers.json"
    rule = {"kind": "automatic", "min_tokens": 10}
    path.write_text(json.dumps({"read_on": "2027-01-01", "families": {"mine": {"match": ["gpt-5"], "cache": rule}}}))
    found = family_of("openai:gpt-5", path=path)
    assert found is not None and found.name == "mine" and found.read_on == "2027-01-01"
    assert found.cache == CacheRule("automatic", 10)


def _frames(tmp_path, n: int) -> list[Image]:
    import cv2
    import numpy as np

    out = []
    for i in range(n):
        cv2.imwrite(str(tmp_path / f"f{i}.jpg"), np.full((8, 8, 3), 40 * i, np.uint8))
        out.append(Image(f"f{i}.jpg"))
    return out


def test_claudes_breakpoint_lands_on_the_block_that_ends_the_shared_prefix(tmp_path):
    pytest.importorskip("anthropic", reason="no anthropic SDK (pip install 'avstack[anthropic]')")
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
    from pydantic import TypeAdapter

    frames = _frames(tmp_path, 2)
    parts = (Text("<timestamp_ms>0</timestamp_ms>"), frames[0], Text("<timestamp_ms>500</timestamp_ms>"), frames[1])
    shared = Request("sys", (*parts, Text("Instruction with the ASR block")), str(tmp_path), shared_prefix=4)
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, **to_anthropic(shared)}
    TypeAdapter(MessageCreateParamsNonStreaming).validate_python(body)
    content = body["messages"][0]["content"]
    marked = [i for i, b in enumerate(content) if "cache_control" in b]
    assert marked == [3] and content[3]["type"] == "image"  # the last frame, before the instruction
    assert content[3]["cache_control"] == {"type": "ephemeral"}
    plain = to_anthropic(Request("sys", (Text("Instruction"), *parts), str(tmp_path)))
    assert "cache_control" not in json.dumps(plain)  # the benchmark's layout shares nothing: no mark


def test_openais_prompt_cache_key_only_for_a_shared_prefix_and_only_on_openais_api(tmp_path):
    pytest.importorskip("openai", reason="no openai SDK (pip install 'avstack[openai]')")
    from avstack.runs.sending.runners.openai_compat import OpenAICompat

    frames = _frames(tmp_path, 2)
    ask = lambda text: Request("sys", (*frames, Text(text)), str(tmp_path), shared_prefix=2)  # noqa: E731
    api = OpenAICompat("gpt-5", BackendOptions(base_url="https://api.openai.com/v1"), api_key="x")
    full, dropped = api.body(ask("with asr")), api.body(ask("without asr"))
    assert full["prompt_cache_key"] == dropped["prompt_cache_key"] == prefix_digest(ask("any"))
    other_clip = Request("sys", (frames[1], frames[0], Text("with asr")), str(tmp_path), shared_prefix=2)
    assert api.body(other_clip)["prompt_cache_key"] != full["prompt_cache_key"]
    unshared = Request("sys", (Text("with asr"), *frames), str(tmp_path))
    assert "prompt_cache_key" not in api.body(unshared)
    local = OpenAICompat(
        "gpt-5", BackendOptions(base_url="http://127.0.0.1:9/v1")
    )  # a server's own prefix cache needs no key
    assert "prompt_cache_key" not in local.body(ask("with asr"))
    # a field the SDK's own request type has
    from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming

    assert "prompt_cache_key" in CompletionCreateParamsNonStreaming.__optional_keys__


def _plan(prepared, out, *more):
    from avstack_cli.app import app
    from typer.testing import CliRunner

    args = ["ablate", str(prepared), "--model", "anthropic:claude-sonnet-4-5", "--drop", "word_ts", "--drop", "asr"]
    res = CliRunner().invoke(app, [*args, "--dry-run", "--out", str(out), *more])
    assert res.exit_code == 0, res.output
    return json.loads((out / "plan.json").read_text()), res.output


def test_claudes_plan_writes_a_clips_frames_once_and_reads_them_for_its_other_stacks(prepared, tmp_path):
    plan, said = _plan(prepared, tmp_path / "shared", "--layout", "shared-first")
    stacks = plan["stacks"]
    full, drops = stacks["full@shared-first"], [stacks[f"full-no_{a}@shared-first"] for a in ("word_ts", "asr")]
    # full goes first for each clip: it writes the frames with their tags; the drops read them (a
    # clip with no words asks the drops what full asked: a repeat, not sent, nothing read)
    assert full["cache_write_tokens"] > 0 and full["cache_read_tokens"] == 0
    for d in drops:
        assert 0 < d["cache_read_tokens"] <= full["cache_write_tokens"] and d["cache_write_tokens"] == 0
        assert d["cache_read_tokens"] < d["to_pay_input_tokens"]  # the instruction and ASR block are paid in full
    usd, total = plan["total"]["usd_at_most"], plan["total"]
    saved = total["cache_read_tokens"] * 0.9 - total["cache_write_tokens"] * 0.25  # 90% off reads, 25% on writes
    assert usd["online"] - usd["online_with_cache"] == pytest.approx(saved * 3.0 / 1e6, abs=1e-4)
    assert "prompt cache (anthropic, breakpoint, one clip's stacks together)" in said
    plain, _ = _plan(prepared, tmp_path / "plain")  # the benchmark's order: no breakpoint, nothing cached
    assert plain["total"]["cache_read_tokens"] == plain["total"]["cache_write_tokens"] == 0
    mine = tmp_path / "providers.json"
    rule = {"kind": "breakpoint", "min_tokens": 10**9, "read": 0.1, "write": 1.25}
    mine.write_text(json.dumps({"families": {"huge-minimum": {"match": ["claude"], "cache": rule}}}))
    high, _ = _plan(prepared, tmp_path / "mine", "--layout", "shared-first", "--providers", str(mine))
    assert high["prompt_cache"]["family"] == "huge-minimum" and high["total"]["cache_read_tokens"] == 0


def test_a_prefix_no_other_request_shares_goes_unmarked():
    from avstack.prompting.messages import shared_prefixes, unmarked_unless_shared

    frames = (Image("a.jpg"), Image("b.jpg"))
    full = _req(*frames, Text("with asr"), shared=2)
    no_asr = _req(*frames, Text("without"), shared=2)
    untagged = _req(Image("a.jpg"), Text("x"), Image("b.jpg"), Text("q"), shared=3)
    repeat = _req(Image("a.jpg"), Text("x"), Image("b.jpg"), Text("q"), shared=3)  # the same request again
    shared = shared_prefixes([full, no_asr, untagged, repeat])
    assert shared == {prefix_digest(full)}
    assert unmarked_unless_shared(full, shared) is full
    assert unmarked_unless_shared(untagged, shared).shared_prefix == 0
    assert unmarked_unless_shared(untagged, None) is untagged  # no job-wide view: as built


def test_claude_gets_a_breakpoint_only_where_another_stack_reads_it(prepared, tmp_path, monkeypatch):
    from avstack_cli.app import app
    from fake_http import serving
    from test_anthropic import KEY, MODEL, Messages, _host
    from typer.testing import CliRunner

    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    Messages.bodies, Messages.headers_seen, Messages.script = [], [], {}
    out = tmp_path / "abl"
    args = ["ablate", str(prepared), "--model", MODEL, "--drop", "frame_ts", "--drop", "asr"]
    args += ["--layout", "shared-first"]
    with serving(Messages) as url:
        res = CliRunner().invoke(app, [*args, "--base-url", _host(url), "--concurrency", "1", "--out", str(out)])
    assert res.exit_code == 0, res.output
    tagged = [b for b in Messages.bodies if "<timestamp_ms>" in json.dumps(b)]  # full and -asr
    untagged = [b for b in Messages.bodies if "<timestamp_ms>" not in json.dumps(b)]  # -frame_ts
    assert tagged and untagged
    by_frames: dict[str, list[dict]] = {}
    for b in tagged:
        images = [c["source"]["data"] for c in b["messages"][0]["content"] if c["type"] == "image"]
        by_frames.setdefault(b["system"] + "".join(images), []).append(b)  # a prefix: the system prompt, frames
    pairs = [group for group in by_frames.values() if len(group) > 1]
    assert pairs and all("cache_control" in json.dumps(b) for group in pairs for b in group)
    # a clip without words asks -asr what full asked: one request, its prefix read by nobody
    alone = [group[0] for group in by_frames.values() if len(group) == 1]
    assert not any("cache_control" in json.dumps(b) for b in alone)
    assert not any("cache_control" in json.dumps(b) for b in untagged)  # nobody would read its prefix
    plan = json.loads((out / "plan.json").read_text())
    assert plan["stacks"]["full-no_frame_ts@shared-first"]["cache_write_tokens"] == 0
