"""A request checked against its provider's limits before anything is sent (#59).

A request over a provider's cap fails only after the run has paid for every request before it
(lmms-eval #256: "Too many images in request: 251, maximum allowed: 250", closed unfixed). Here
every request of every stack is measured first (images, the largest image's bytes and side, the
body's bytes as sent in base64, the sound's seconds) against the model family's limits in
runs/planning/providers.json; a breach names the limit, the item and the largest frame budget that fits,
and `--fit-limits` lowers the budget to that instead. A server error that names a limit (the texts
in shared/providers/FACTS.md) is final, and recorded with the limit it names."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from avstack.errors import UsageError
from avstack.prompting.budget import FrameBudget
from avstack.prompting.messages import Audio, Image, Request, Text, Video
from avstack.runs.planning.providers import Family, Limits

# base64 makes 3 bytes 4; a part's JSON framing is small beside an image, so it is left out
BASE64 = 4 / 3

# the error texts each provider returns for a limit (substrings, case-insensitive), by limit
LIMIT_ERRORS: tuple[tuple[str, str], ...] = (
    (r"many-image requests", "many_images"),
    (r"image dimensions exceed", "side_px"),
    (r"image exceeds .*maximum", "image_bytes"),
    (r"too many images in request|at most \d+ image(?:s|\(s\))? may be provided", "images"),
    (r"request exceeds the maximum size|request_too_large|request payload size exceeds", "request_bytes"),
    (
        r"input token count .* exceeds|maximum context length|too long to fit into the model"
        r"|exceeds the available context size|exceed_context_size",
        "context_tokens",
    ),
)


def limit_named(text: str | None) -> str | None:
    """The limit a server's error text names (images, side_px, ...), or None."""
    if not text:
        return None
    return next((name for pattern, name in LIMIT_ERRORS if re.search(pattern, text, re.IGNORECASE)), None)


@dataclass(frozen=True)
class Measured:
    """What a request sends, as its provider's limits count it."""

    images: int
    largest_side: int
    largest_image_bytes: int
    request_bytes: int
    image_bytes: tuple[int, ...]  # each image's bytes as sent, in order
    audio_s: float


def measure(req: Request, sizes: dict[Path, tuple[int, int]] | None = None) -> Measured:
    from avstack.runs.planning.cost import image_size, wav_duration_ms

    sizes = {} if sizes is None else sizes
    sides, sent, body, audio_s = [], [], len(req.system.encode()), 0.0
    for part in req.parts:
        if isinstance(part, Text):
            body += len(part.text.encode())
            continue
        path = req.path_of(part)
        size = int(path.stat().st_size * BASE64) if path.is_file() else 0
        body += size
        if isinstance(part, Image):
            if path not in sizes:
                sizes[path] = image_size(path)
            sides.append(max(sizes[path]))
            sent.append(size)
        elif isinstance(part, Audio):
            audio_s += (wav_duration_ms(path) or 0) / 1000
        elif isinstance(part, Video):
            pass  # a video's length is the provider's to judge; its bytes count above
    return Measured(len(sent), max(sides, default=0), max(sent, default=0), body, tuple(sent), audio_s)


@dataclass(frozen=True)
class Breach:
    """One request over one limit: the stack, the item, the limit, what it sends and what is
    allowed, and the most images that would keep this request within every image limit."""

    stack: str
    item: str
    limit: str
    found: float
    allowed: float
    fits_images: int

    def said(self, family: Family) -> str:
        unit = {"images": "images", "image_bytes": "bytes", "request_bytes": "bytes", "side_px": "px",
                "many_images": "px", "audio_s": "s"}.get(self.limit, "")  # fmt: skip
        what = {"many_images": f"more than {family.limits.many_images[0] if family.limits.many_images else '?'} "
                "images with a side over"}.get(self.limit, self.limit.replace("_", " "))  # fmt: skip
        return (
            f"stack {self.stack}, item {self.item}: sends {self.found:g} {unit} where {family.name} allows "
            f"{what} {self.allowed:g} (providers.json, read {family.read_on})"
        )


def image_fit(m: Measured, limits: Limits) -> int:
    """The most of the request's images it could keep within the image count, the many-image side
    rule and the request's bytes (counted largest first: a uniform pick may keep the largest)."""
    n = m.images
    if limits.images is not None:
        n = min(n, limits.images)
    if limits.many_images is not None and m.largest_side > limits.many_images[1]:
        n = min(n, limits.many_images[0])
    if limits.request_bytes is not None:
        rest = m.request_bytes - sum(m.image_bytes)
        kept, total = 0, rest
        for b in sorted(m.image_bytes, reverse=True):
            if total + b > limits.request_bytes:
                break
            kept, total = kept + 1, total + b
        n = min(n, kept)
    return n


def breaches_of(
    stack: str, item: str, m: Measured, limits: Limits, tokens: tuple[int, int] | None = None
) -> list[Breach]:
    """Every limit `m` goes over; `tokens` (input tokens, of them image tokens), where counted,
    against the context."""
    fit = image_fit(m, limits)
    if tokens is not None and limits.context_tokens is not None and tokens[0] > limits.context_tokens:
        per_image = tokens[1] / max(1, m.images)
        room = limits.context_tokens - (tokens[0] - tokens[1])
        fit = min(fit, max(0, int(room // per_image)) if per_image else 0)
    checks: list[tuple[str, float, float | None]] = [
        ("images", m.images, limits.images),
        ("image_bytes", m.largest_image_bytes / BASE64, limits.image_bytes),
        ("request_bytes", m.request_bytes, limits.request_bytes),
        ("side_px", m.largest_side, limits.side_px),
        ("audio_s", round(m.audio_s, 1), limits.audio_s),
        ("context_tokens", tokens[0] if tokens else 0, limits.context_tokens),
    ]
    if limits.many_images is not None and m.images > limits.many_images[0]:
        checks.append(("many_images", m.largest_side, limits.many_images[1]))
    return [Breach(stack, item, name, found, allowed, fit) for name, found, allowed in checks
            if allowed is not None and found > allowed]  # fmt: skip


def limits_said(family: Family | None, breaches: Sequence[Breach]) -> dict[str, object] | None:
    """The plan's record of the check: the family's limits, and each stack's breaches (counted,
    the first named) with the most images that fit every item of it."""
    if family is None:
        return None
    per_stack: dict[str, dict[str, Any]] = {}
    for b in breaches:
        entry = per_stack.setdefault(b.stack, {"items": set(), "limits": set(), "first": b.said(family),
                                               "fits_images": b.fits_images})  # fmt: skip
        entry["items"].add(b.item)
        entry["limits"].add(b.limit)
        entry["fits_images"] = min(entry["fits_images"], b.fits_images)
    return {
        "family": family.name,
        "read_on": family.read_on,
        "limits": {k: v for k, v in vars(family.limits).items() if v is not None},
        "breaches": {
            s: {
                "items": len(e["items"]),
                "limits": sorted(e["limits"]),
                "first": e["first"],
                "fits_images": e["fits_images"],
            }
            for s, e in per_stack.items()
        },  # fmt: skip
    }


class LimitsExceeded(UsageError):
    """A stack would go over its provider's limits; nothing was sent."""


def refuse_or_fit(
    said: Mapping[str, Any] | None,
    budgets: Sequence[FrameBudget],
    budget_of: Callable[[str], FrameBudget | None],
    fit: bool,
) -> dict[FrameBudget, FrameBudget]:
    """Nothing ({}) when no stack breaches; with `fit`, each breaching budget lowered to the most
    frames every item fits; else LimitsExceeded naming the limit, the item, the stack and the
    largest budget that fits. A breach no frame budget can mend (the sound's length, the text
    alone over the context) is refused either way."""
    breaches = (said or {}).get("breaches") or {}
    if not breaches:
        return {}
    lowered: dict[FrameBudget, FrameBudget] = {}
    for stack, b in breaches.items():
        budget = budget_of(stack)
        fits = int(b["fits_images"])
        # fewer frames mend any limit but the sound's length, where some frames fit at all
        mendable = budget is not None and fits > 0 and "audio_s" not in b["limits"]
        if not fit or not mendable or budget is None:
            budget_said = f"the largest budget that fits: --max-frames {fits}" if mendable else "no frame budget fits"
            raise LimitsExceeded(
                f"{b['first']}; {b['items']} item(s) of stack {stack} go over ({', '.join(b['limits'])}); "
                f"{budget_said}. "
                + ("Pass --fit-limits to lower it to that, or " if mendable else "Pass ")
                + "--providers FILE if the limits have moved. Nothing was sent."
            )
        now = lowered.get(budget, budget)
        cap = min(fits, now.max_frames) if now.max_frames is not None else fits
        lowered[budget] = FrameBudget(budget.fps, cap)
    return {old: new for old, new in lowered.items() if new != old and old in budgets}
