"""The bill before paying it: per stack and in total, the requests, images, image and text
tokens, what the answer cache already holds or an earlier stack asks too, and the price
(avstack.runs.cost). Nothing is sent; the requests are the ones the run would send."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from avstack.io import read_jsonl_objects, write_json_atomic
from avstack.prompting.messages import Audio, Image, Request, Text, Video
from avstack.runs.cost import (
    audio_rule,
    audio_tokens,
    cached_tokens,
    image_rule,
    image_size,
    image_tokens,
    load_prices,
    price_of,
    text_counter,
    usage_tokens,
    wav_duration_ms,
)
from avstack.runs.engine import AnswerCache, request_key


@dataclass
class StackBill:
    """One stack's requests; `to_pay` are those neither cached nor asked by an earlier stack."""

    requests: int = 0
    images: int = 0
    videos: int = 0
    image_tokens: int = 0
    text_tokens: int = 0
    audio_parts: int = 0
    audio_tokens: int = 0
    cached: int = 0
    repeats: int = 0
    to_pay_input_tokens: int = 0
    to_pay_audio_tokens: int = 0  # of to_pay_input_tokens: what an audio price applies to
    to_pay_requests: int = 0
    notes: list[str] = field(default_factory=list)


class ServerCount(Protocol):
    """A back-end whose server counts a request's text itself (OpenAICompat on llama.cpp or vLLM)."""

    def count_text_tokens(self, request: Request) -> int | None: ...

    def counts_text_by(self) -> str | None: ...


@dataclass(frozen=True)
class Counting:
    """How the plan counts: the image rule (None: chosen by the model's name), OpenAI's image
    detail, and the server that counts a request's text itself where it can (chat template
    included; where it cannot, `text_counter`'s count)."""

    image_rule: str | None = None
    detail: str = "high"
    server: ServerCount | None = None

    @classmethod
    def of(cls, backend: Any, image_rule: str | None = None, detail: str = "high") -> Counting:
        counts = callable(getattr(backend, "count_text_tokens", None))
        return cls(image_rule, detail, backend if counts else None)


def bill_request(
    req: Request,
    model: str,
    counting: Counting,
    count_text: Any,
    sizes: dict[Path, tuple[int, int]] | None = None,
) -> tuple[int, int, int, int, int, int]:
    """(images, videos, image tokens, text tokens, audio parts, audio tokens) of one request;
    image or audio tokens 0 where the model has no published rule (the plan says so). `sizes`
    remembers each picture's size (and each sound's length): the stacks of an ablation show the
    same frames."""
    images = videos = image_toks = sounds = audio_toks = 0
    text = req.system
    sizes = {} if sizes is None else sizes
    for part in req.parts:
        if isinstance(part, Image):
            images += 1
            path = req.path_of(part)
            if path not in sizes:
                sizes[path] = image_size(path)
            w, h = sizes[path]
            image_toks += image_tokens(w, h, model, counting.detail, counting.image_rule) or 0
        elif isinstance(part, Video):
            videos += 1
        elif isinstance(part, Audio):
            sounds += 1
            path = req.path_of(part)
            if path not in sizes:
                sizes[path] = (wav_duration_ms(path), 0)
            audio_toks += audio_tokens(sizes[path][0], model) or 0
        elif isinstance(part, Text):
            text += part.text
    served = counting.server.count_text_tokens(req) if counting.server is not None else None
    return images, videos, image_toks, count_text(text) if served is None else served, sounds, audio_toks


def plan_requests(
    stacks: Mapping[str, Sequence[Request]],
    model: str,
    backend_id: str,
    cache_dir: Path | None = None,
    counting: Counting | None = None,
    max_output_tokens: int = 512,
    prices_file: Path | None = None,
) -> dict[str, Any]:
    """The plan of asking `model` every request of every stack, in order (the first stack's
    requests are paid first; a later stack's identical request comes from the answer cache)."""
    counting = counting or Counting()
    count_text, text_how = text_counter()
    rule = image_rule(model, counting.image_rule)
    prices, read_on = load_prices(prices_file)
    price = price_of(model, prices)
    cache = AnswerCache(cache_dir)
    seen: set[str] = set()
    sizes: dict[Path, tuple[int, int]] = {}
    bills: dict[str, StackBill] = {}
    for name, requests in stacks.items():
        bill = bills[name] = StackBill()
        for req in requests:
            images, videos, image_toks, text_toks, sounds, audio_toks = bill_request(
                req, model, counting, count_text, sizes
            )
            key = request_key(backend_id, req)
            bill.requests += 1
            bill.images += images
            bill.videos += videos
            bill.image_tokens += image_toks
            bill.text_tokens += text_toks
            bill.audio_parts += sounds
            bill.audio_tokens += audio_toks
            if cache.get(key) is not None:
                bill.cached += 1
            elif key in seen:
                bill.repeats += 1
            else:
                bill.to_pay_requests += 1
                bill.to_pay_input_tokens += image_toks + text_toks + audio_toks
                bill.to_pay_audio_tokens += audio_toks
            seen.add(key)
    total_in = sum(b.to_pay_input_tokens for b in bills.values())
    total_req = sum(b.to_pay_requests for b in bills.values())
    out_tokens = total_req * max_output_tokens
    usd = None
    total_audio = sum(b.to_pay_audio_tokens for b in bills.values())
    if price is not None:
        audio_price = price.input if price.audio_input is None else price.audio_input
        online = ((total_in - total_audio) * price.input + total_audio * audio_price + out_tokens * price.output) / 1e6
        usd = {"online": round(online, 4), "batch": round(online * price.batch, 4)}
    notes = []
    if rule is None:
        notes.append(f"{model}: no published image-token rule known (--image-rule names one); image tokens not counted")
    server_how = counting.server.counts_text_by() if counting.server is not None else None
    if any(b.audio_parts for b in bills.values()) and audio_rule(model) is None:
        notes.append(f"{model}: no published audio-token rule known; audio tokens not counted")
    if any(b.videos for b in bills.values()):
        notes.append("video parts are not counted (each provider samples video its own way)")
    if price is None:
        notes.append(f"{model}: not in the price table (read {read_on}); pass --prices FILE")
    return {
        "model": model,
        "detail": counting.detail,
        "image_rule": rule,
        "audio_rule": audio_rule(model),
        "text_tokens": f"{server_how}, else {text_how}" if server_how else text_how,
        "prices_read_on": read_on,
        "price_usd_per_1m": None if price is None else {"input": price.input, "output": price.output},
        "stacks": {name: vars(b) for name, b in bills.items()},
        "total": {
            "requests": sum(b.requests for b in bills.values()),
            "to_pay_requests": total_req,
            "cached": sum(b.cached for b in bills.values()),
            "repeats": sum(b.repeats for b in bills.values()),
            "input_tokens": total_in,
            "audio_tokens": total_audio,
            "output_tokens_at_most": out_tokens,
            "usd_at_most": usd,
        },
        "notes": notes,
    }


def write_plan(plan: dict[str, Any], out: Path) -> Path:
    path = Path(out) / "plan.json"
    write_json_atomic(path, plan)
    return path


def plan_table(plan: dict[str, Any]) -> str:
    """The plan as a Markdown table, per stack and in total."""
    head = "| stack | requests | images | image tokens | text tokens | audio tokens | cached | repeats |"
    rows = [head + " input tokens to pay |"]
    rows.append("|---|---|---|---|---|---|---|---|---|")
    for name, b in plan["stacks"].items():
        rows.append(
            f"| {name} | {b['requests']} | {b['images']} | {b['image_tokens']} | {b['text_tokens']} | "
            f"{b.get('audio_tokens', 0)} | {b['cached']} | {b['repeats']} | {b['to_pay_input_tokens']} |"
        )
    t = plan["total"]
    usd = t["usd_at_most"]
    cost = f"${usd['online']:.2f} online, ${usd['batch']:.2f} batch (at most)" if usd else "price unknown"
    rows.append(f"| **total** | {t['requests']} | | | | | {t['cached']} | {t['repeats']} | {t['input_tokens']} |")
    lines = [*rows, "", f"{plan['model']}: {cost}; output at most {t['output_tokens_at_most']} tokens; "
             f"text tokens by {plan['text_tokens']}; prices read {plan['prices_read_on']}"]  # fmt: skip
    return "\n".join(lines + [f"note: {n}" for n in plan["notes"]]) + "\n"


def usage_section(plan: dict[str, Any], predictions: Mapping[str, Path]) -> str:
    """The plan beside what the servers reported, per stack (answers actually sent; cached ones
    cost nothing): a check on the estimate, and the bill as the providers count it. Where a server
    reported input tokens taken from its prompt cache, a column says how many."""
    rows, cached_any = [], False
    for name, path in predictions.items():
        bill = plan["stacks"].get(name)
        if bill is None or not Path(path).exists():
            continue
        sent = [r for r in read_jsonl_objects(path, "prediction") if not r.get("cached") and r.get("raw") is not None]
        used = [usage_tokens(r.get("usage")) for r in sent]
        cached = sum(cached_tokens(r.get("usage")) for r in sent)
        cached_any = cached_any or cached > 0
        rows.append(
            [
                name,
                bill["to_pay_requests"],
                len(sent),
                bill["to_pay_input_tokens"],
                sum(u[0] for u in used),
                cached,
                sum(u[1] for u in used),
            ]  # fmt: skip
        )
    head = ["stack", "requests planned to pay", "sent", "input tokens planned", "input tokens reported"]
    head += ["of them from the server's cache"] if cached_any else []
    lines = ["| " + " | ".join(head + ["output tokens reported"]) + " |", "|" + "---|" * (len(head) + 1)]
    for r in rows:
        cells = r[:5] + ([r[5]] if cached_any else []) + [r[6]]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    rule = plan["image_rule"] or "none known"
    note = f"Planned with {plan['model']}'s image rule ({rule}), text by {plan['text_tokens']}."
    return "\n".join(["", "## Plan and usage", "", note, "", *lines, ""])
