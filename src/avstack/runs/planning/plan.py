"""The bill before paying it: per stack and in total, the requests, images, image and text
tokens, what the answer cache already holds or an earlier stack asks too, and the price
(avstack.runs.planning.cost). Nothing is sent; the requests are the ones the run would send."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from avstack.io import read_jsonl_objects, write_json_atomic
from avstack.prompting.messages import Audio, Image, Request, Text, Video, shared_prefixes, unmarked_unless_shared
from avstack.runs.ablation.integrity import item_of
from avstack.runs.ablation.reconcile import adjacent_images, input_uncertainty
from avstack.runs.planning.cost import (
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
from avstack.runs.planning.counting import Counting, sent_digest
from avstack.runs.planning.plan_record import Plan, PlanTotal, StackBill
from avstack.runs.planning.provider_limits import Breach, breaches_of, limits_said, measure
from avstack.runs.planning.providers import CacheRule, Family, family_of
from avstack.runs.sending.engine import AnswerCache, request_key


def _part_key(req: Request, part: Any) -> tuple[str, str]:
    """What makes a part the same bytes for a prompt cache: its text, or the file it sends."""
    return ("text", part.text) if isinstance(part, Text) else (type(part).__name__, str(req.path_of(part)))


class PrefixCache:
    """The tokens a provider will take from its prompt cache, predicted: a request's longest
    common prefix (whole parts, then the common start of the first text that differs) with any
    of the last `window` requests sent, under the family's rule (its minimum and step; with a
    `breakpoint` rule only the prefix up to the request's marked end is cached, and the first
    request to send it writes it). `window` is the number of stacks: sent clip by clip, a clip's
    earlier stacks are within it; sent stack by stack, only other clips are."""

    def __init__(self, rule: CacheRule, window: int, prefix_tokens: Any, shared: frozenset[str] | None = None):
        self.rule, self.prefix_tokens, self.shared = rule, prefix_tokens, shared
        self.recent: deque[tuple[str, tuple[tuple[str, str], ...]]] = deque(maxlen=max(1, window))

    def predict(self, req: Request) -> tuple[int, int]:
        """(tokens read from the cache, tokens written to it) for `req`, then remember it."""
        keys = tuple(_part_key(req, p) for p in req.parts)
        best, text = -1, ""
        for system, other in self.recent:
            if system != req.system:
                continue
            n = _common_length(keys, other)
            partial = _common_start(keys[n], other[n]) if n < min(len(keys), len(other)) else ""
            if (n, len(partial)) > (best, len(text)):
                best, text = n, partial
        self.recent.append((req.system, keys))
        if self.rule.kind == "breakpoint":
            mark = unmarked_unless_shared(req, self.shared).shared_prefix  # as the engine sends it
            if mark <= 0:
                return 0, 0
            tokens = self.prefix_tokens(req, mark, "")
            if tokens < self.rule.min_tokens:
                return 0, 0
            return (tokens, 0) if best >= mark else (0, tokens)
        return (0, 0) if best < 0 else (self.rule.cached(self.prefix_tokens(req, best, text)), 0)


def _common_length(a: Sequence[Any], b: Sequence[object]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def _common_start(a: tuple[str, str], b: tuple[str, str]) -> str:
    """The text two differing parts begin with (none unless both are text)."""
    return a[1][: _common_length(a[1], b[1])] if a[0] == b[0] == "text" else ""


def send_order(stacks: Mapping[str, Sequence[Request]], clip_major: bool) -> Iterator[tuple[str, Request]]:
    """The requests as they go out: one clip's stacks together (the k-th request of every stack),
    or one stack after another."""
    if not clip_major:
        yield from ((name, req) for name, reqs in stacks.items() for req in reqs)
        return
    longest = max((len(r) for r in stacks.values()), default=0)
    for k in range(longest):
        yield from ((name, reqs[k]) for name, reqs in stacks.items() if k < len(reqs))


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
    merges = merges_adjacent(req, counting)
    paired = False  # this picture is the second of a pair the server takes as one
    for k, part in enumerate(req.parts):
        if isinstance(part, Image):
            images += 1
            path = req.path_of(part)
            if path not in sizes:
                sizes[path] = image_size(path)
            w, h = sizes[path]
            paired = merges and not paired and k > 0 and isinstance(req.parts[k - 1], Image)
            if not paired:
                image_toks += image_tokens(w, h, model, counting.detail, counting.image_rule) or 0
        elif isinstance(part, Video):
            videos += 1
        elif isinstance(part, Audio):
            sounds += 1
            path = req.path_of(part)
            if path not in sizes:
                sizes[path] = (wav_duration_ms(path), 0)
            audio_toks += audio_tokens(sizes[path][0], model, counting.server_kind) or 0
        elif isinstance(part, Text):
            text += part.text
    served = counting.server.count_text_tokens(req) if counting.server is not None else None
    return images, videos, image_toks, count_text(text) if served is None else served, sounds, audio_toks


def merges_adjacent(req: Request, counting: Counting) -> bool:
    """Does the server take two touching pictures of `req` as one (asked of the server, once, only
    where a request has such pictures): llama.cpp builds differ (docs/ablation.md, "Each arm
    differs by its cue alone")."""
    server = counting.server
    return server is not None and adjacent_images(req) > 0 and server.merges_adjacent_images()


def plan_requests(
    stacks: Mapping[str, Sequence[Request]],
    model: str,
    backend_id: str,
    cache_dir: Path | None = None,
    counting: Counting | None = None,
    max_output_tokens: int = 512,
    prices_file: Path | None = None,
    fresh: Sequence[str] = (),
) -> Plan:
    """The plan of asking `model` every request of every stack, in order (the first stack's
    requests are paid first; a later stack's identical request comes from the answer cache, unless
    the stack is `fresh`: an A/A arm, asked again past every cache)."""
    tally = Tally(stacks, model, counting or Counting(), AnswerCache(cache_dir), set(fresh))
    for name, req in send_order(stacks, tally.counting.clip_major):
        tally.add(name, req, request_key(backend_id + ("|aa" if name in tally.fresh else ""), req))
    prices, read_on = load_prices(prices_file)
    price = price_of(model, prices)
    return plan_json(tally, price, read_on, max_output_tokens)


class Tally:
    """Every request counted, billed and checked as it would be sent: per stack its bill, per item
    its input tokens (with how far they may be off) and its digest as sent, the limits it breaks."""

    def __init__(
        self, stacks: Mapping[str, Sequence[Request]], model: str, counting: Counting, cache: Any, fresh: set[str]
    ) -> None:
        self.model, self.counting, self.cache, self.fresh = model, counting, cache, fresh
        self.count_text, self.text_how = text_counter()
        self.rule = image_rule(model, counting.image_rule)
        self.sizes: dict[Path, tuple[int, int]] = {}
        self.seen: set[str] = set()
        self.bills: dict[str, StackBill] = {name: StackBill() for name in stacks}
        self.family = family_of(model, counting.server_kind, counting.providers_file)
        self.shared = shared_prefixes(r for reqs in stacks.values() for r in reqs)
        rule = self.family.cache if self.family else None
        self.prefixes = PrefixCache(rule, len(stacks), self.prefix_tokens, self.shared) if rule else None
        self.breaches: list[Breach] = []
        # each request's input tokens and how far they may be off, by item: what the server's count
        # is held to after the run (avstack.runs.ablation.reconcile)
        self.inputs: dict[str, dict[str, list[int | None]]] = {name: {} for name in stacks}
        self.sent: dict[str, dict[str, str]] = {name: {} for name in stacks}  # each request as sent, digested

    def prefix_tokens(self, req: Request, n: int, text: str) -> int:
        head = Request(req.system, (*req.parts[:n], *((Text(text),) if text else ())), req.root)
        counted = bill_request(head, self.model, self.counting, self.count_text, self.sizes)
        return counted[2] + counted[3] + counted[5]

    def add(self, name: str, req: Request, key: str) -> None:
        """One request of stack `name`, in send order; `key`: its answer-cache key."""
        bill, counting = self.bills[name], self.counting
        counted = bill_request(req, self.model, counting, self.count_text, self.sizes)
        images, videos, image_toks, text_toks, sounds, audio_toks = counted
        bill.adjacent_images += adjacent_images(req)
        item = item_of(req)
        served = counting.server is not None and counting.server.counts_text_by() is not None
        unc = input_uncertainty(counted, self.rule, self.model, self.text_how, served)
        self.inputs[name][item] = [image_toks + text_toks + audio_toks, unc]
        self.sent[name][item] = sent_digest(req, counting, self.shared)
        if self.family is not None:  # every request against the provider's limits, before any is sent
            toks = (image_toks + text_toks + audio_toks, image_toks)
            self.breaches += breaches_of(name, item, measure(req, self.sizes), self.family.limits, toks)
        bill.requests += 1
        bill.images += images
        bill.videos += videos
        bill.image_tokens += image_toks
        bill.text_tokens += text_toks
        bill.audio_parts += sounds
        bill.audio_tokens += audio_toks
        if self.cache.get(key) is not None:
            bill.cached += 1
        elif key in self.seen:
            bill.repeats += 1
        else:
            bill.to_pay_requests += 1
            bill.to_pay_input_tokens += image_toks + text_toks + audio_toks
            bill.to_pay_audio_tokens += audio_toks
            if self.prefixes is not None and name not in self.fresh:  # the A/A arm asks past the server's cache
                read, written = self.prefixes.predict(req)
                bill.cache_read_tokens += min(read, image_toks + text_toks + audio_toks)
                bill.cache_write_tokens += written
        self.seen.add(key)

    def total(self, field: str) -> int:
        return sum(getattr(b, field) for b in self.bills.values())


def plan_usd(tally: Tally, price: Any, out_tokens: int) -> dict[str, float] | None:
    """What the requests to pay may cost online and in batch (and online with the prompt cache)."""
    if price is None:
        return None
    total_in, total_audio = tally.total("to_pay_input_tokens"), tally.total("to_pay_audio_tokens")
    total_read, total_write = tally.total("cache_read_tokens"), tally.total("cache_write_tokens")
    audio_price = price.input if price.audio_input is None else price.audio_input
    online = ((total_in - total_audio) * price.input + total_audio * audio_price + out_tokens * price.output) / 1e6
    usd = {"online": round(online, 4), "batch": round(online * price.batch, 4)}
    if tally.prefixes is not None and (total_read or total_write):
        kept = tally.prefixes.rule
        # a cached token pays `read` of the input price, a written one `write` (the text rate)
        saved = (total_read * (1 - kept.read) - total_write * (kept.write - 1)) * price.input / 1e6
        usd["online_with_cache"] = round(online - saved, 4)
    return usd


def plan_notes(tally: Tally, price: object, read_on: str) -> list[str]:
    """What the plan could not count, and why."""
    model, bills = tally.model, tally.bills.values()
    notes = []
    if tally.rule is None:
        notes.append(f"{model}: no published image-token rule known (--image-rule names one); image tokens not counted")
    if any(b.audio_parts for b in bills) and audio_rule(model, tally.counting.server_kind) is None:
        notes.append(f"{model}: no published audio-token rule known; audio tokens not counted")
    if any(b.videos for b in bills):
        notes.append("video parts are not counted (each provider samples video its own way)")
    if price is None:
        notes.append(f"{model}: not in the price table (read {read_on}); pass --prices FILE")
    return notes


def plan_json(tally: Tally, price: Any, read_on: str, max_output_tokens: int) -> Plan:
    """The plan as a record (plan.json: its to_json)."""
    counting, bills = tally.counting, tally.bills
    out_tokens = tally.total("to_pay_requests") * max_output_tokens
    server_how = counting.server.counts_text_by() if counting.server is not None else None
    total = PlanTotal(
        requests=tally.total("requests"),
        to_pay_requests=tally.total("to_pay_requests"),
        cached=tally.total("cached"),
        repeats=tally.total("repeats"),
        input_tokens=tally.total("to_pay_input_tokens"),
        cache_read_tokens=tally.total("cache_read_tokens"),
        cache_write_tokens=tally.total("cache_write_tokens"),
        audio_tokens=tally.total("to_pay_audio_tokens"),
        output_tokens_at_most=out_tokens,
        usd_at_most=plan_usd(tally, price, out_tokens),
    )
    return Plan(
        model=tally.model,
        detail=counting.detail,
        image_rule=tally.rule,
        audio_rule=audio_rule(tally.model, counting.server_kind),
        text_tokens=f"{server_how}, else {tally.text_how}" if server_how else tally.text_how,
        prices_read_on=read_on,
        price_usd_per_1m=None if price is None else {"input": price.input, "output": price.output},
        stacks=dict(bills),
        inputs=tally.inputs,
        sent=tally.sent,
        prompt_cache=cache_said(tally.family, counting.clip_major, len(bills)),
        limits=limits_said(tally.family, tally.breaches),
        total=total,
        notes=tuple(plan_notes(tally, price, read_on)),
    )


def cache_said(family: Family | None, clip_major: bool, stacks: int) -> dict[str, object] | None:
    """What the plan assumed of the provider's prompt cache (None: no rule known for the model)."""
    if family is None or family.cache is None:
        return None
    rule = family.cache
    return {"family": family.name, "kind": rule.kind, "min_tokens": rule.min_tokens, "step": rule.step,
            "read_price_share": rule.read, "write_price_share": rule.write,
            "order": "one clip's stacks together" if clip_major else "one stack after another",
            "window_requests": stacks, "read_on": family.read_on, "source": family.source}  # fmt: skip


def write_plan(plan: Plan, out: Path) -> Path:
    path = Path(out) / "plan.json"
    write_json_atomic(path, plan.to_json())
    return path


def plan_table(plan: Plan) -> str:
    """The plan as a Markdown table, per stack and in total."""
    head = "| stack | requests | images | image tokens | text tokens | audio tokens | cached | repeats |"
    rows = [head + " input tokens to pay |"]
    rows.append("|---|---|---|---|---|---|---|---|---|")
    for name, b in plan.stacks.items():
        rows.append(
            f"| {name} | {b.requests} | {b.images} | {b.image_tokens} | {b.text_tokens} | "
            f"{b.audio_tokens} | {b.cached} | {b.repeats} | {b.to_pay_input_tokens} |"
        )
    t = plan.total
    usd = t.usd_at_most
    cost = f"${usd['online']:.2f} online, ${usd['batch']:.2f} batch (at most)" if usd else "price unknown"
    rows.append(f"| **total** | {t.requests} | | | | | {t.cached} | {t.repeats} | {t.input_tokens} |")
    lines = [*rows, "", f"{plan.model}: {cost}; output at most {t.output_tokens_at_most} tokens; "
             f"text tokens by {plan.text_tokens}; prices read {plan.prices_read_on}"]  # fmt: skip
    said = plan.prompt_cache
    if said and t.input_tokens:
        share = 100 * t.cache_read_tokens / t.input_tokens
        with_cache = f"; ${usd['online_with_cache']:.2f} online with it" if usd and "online_with_cache" in usd else ""
        lines.append(
            f"prompt cache ({said['family']}, {said['kind']}, {said['order']}): {t.cache_read_tokens} of "
            f"{t.input_tokens} input tokens predicted read from it ({share:.1f}%), "
            f"{t.cache_write_tokens} written{with_cache}"
        )
    return "\n".join(lines + [f"note: {n}" for n in plan.notes]) + "\n"


def usage_section(plan: Plan, predictions: Mapping[str, Path]) -> str:
    """The plan beside what the servers reported, per stack (answers actually sent; cached ones
    cost nothing): a check on the estimate, and the bill as the providers count it. Where a server
    reported input tokens taken from its prompt cache, a column says how many."""
    rows, cached_any = [], False
    for name, path in predictions.items():
        bill = plan.stacks.get(name)
        if bill is None or not Path(path).exists():
            continue
        packs = Path(path).parent / "packs" / "predictions.jsonl"  # a packed run: its requests are the packs
        path = packs if packs.is_file() else path
        sent = [r for r in read_jsonl_objects(path, "prediction") if not r.get("cached") and r.get("raw") is not None]
        used = [usage_tokens(r.get("usage")) for r in sent]
        cached = sum(cached_tokens(r.get("usage")) for r in sent)
        cached_any = cached_any or cached > 0
        planned_cached = bill.cache_read_tokens
        cached_any = cached_any or planned_cached > 0
        used_in = sum(u[0] for u in used)
        rows.append([name, bill.to_pay_requests, len(sent), bill.to_pay_input_tokens, used_in,
                     planned_cached, cached, sum(u[1] for u in used)])  # fmt: skip
    head = ["stack", "requests planned to pay", "sent", "input tokens planned", "input tokens reported"]
    head += ["from the prompt cache, planned", "from the prompt cache, reported"] if cached_any else []
    lines = ["| " + " | ".join(head + ["output tokens reported"]) + " |", "|" + "---|" * (len(head) + 1)]
    for r in rows:
        cells = r[:5] + (r[5:7] if cached_any else []) + [r[7]]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    rule = plan.image_rule or "none known"
    note = f"Planned with {plan.model}'s image rule ({rule}), text by {plan.text_tokens}."
    return "\n".join(["", "## Plan and usage", "", note, "", *lines, ""])
