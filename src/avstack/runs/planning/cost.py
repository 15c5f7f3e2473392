"""What a run will cost before it is paid: image tokens by each provider's published rule, text
tokens, requests the answer cache already holds or that repeat across stacks, and the price from
an editable table.

Image rules (the providers' documentation, as read on the date in prices.json):
- OpenAI tiles (gpt-4o, gpt-4.1, gpt-5, o1, o3): `detail="low"` is a flat 85; high scales the image
  to fit 2048 x 2048, then its short side to 768, and counts 512 px tiles: 85 + 170 per tile (1024 x
  1024 -> 765). gpt-4o-mini counts the same tiles at 2833 + 5667 per tile, gpt-5 at 70 + 140.
- OpenAI patches (gpt-4.1-mini, gpt-4.1-nano, o4-mini, gpt-5-mini, gpt-5-nano): 32 px patches, at
  most 1536 (the image shrunk to fit), times a model multiplier (1.62, 2.46, 1.72, 1.62, 2.46).
- Gemini (2.x): 258 when both sides are at most 384 px, else 258 per 768 x 768 tile. Gemini 3
  (`gemini3`): a fixed count per picture by `media_resolution`, 1,120 at its default (high).
- Qwen2-VL and Qwen2.5-VL (`qwen2-vl`): the image resized to multiples of 28 px within
  [min_pixels, max_pixels] (its `smart_resize`; the released preprocessor's 4 .. 16384 blocks), one
  token per 28 x 28 block, and the two tokens around it (<|vision_start|>, <|vision_end|>).
  `qwen2-vl-llama.cpp`: the same, within llama.cpp's limits (8 .. 4096 blocks, its mtmd default).
  Qwen3-VL (`qwen3-vl`): 16 px patches merged 2 x 2 (32 px blocks) within 64 .. 16384 blocks.
  Qwen2.5-Omni and Qwen3-Omni see with these towers (a name with `qwen2.5-omni` or `qwen3-omni`).
- InternVL 2 / 2.5 / 3 (`internvl`): 448 px tiles in the grid (1 .. 12 tiles) whose aspect is
  closest to the image's (its `dynamic_preprocess`), plus a thumbnail tile when there are several;
  256 tokens a tile, and <img> </img> around them.
- LLaVA-OneVision (`llava-onevision`): anyres_max_9: 729 tokens of the 384 px base image, the
  best of the 384 px grids up to 6 x 6 unpadded back to the image's aspect (one newline token per
  row), pooled down when over 9 tiles' worth (transformers' `_get_number_of_features`).
- Gemma 3 (`gemma3`): every image 896 x 896, 256 tokens, between <start_of_image> and
  <end_of_image> (pan-and-scan off, its default).
- Claude: w * h / 750 after the long side is brought to at most 1568 px and the image to at most
  about 1600 tokens (1092 x 1092 -> 1590).
A model with no published rule gets no image estimate, and the plan says so. The rule is chosen by
the model's name, or by `--image-rule` (a model served under a name of its own).

Audio rules (a sound part, the `omni` stack's): Gemini counts 32 tokens per second of audio;
OpenAI's audio models (gpt-4o-audio, gpt-4o-mini-audio, gpt-audio) 1 token per 100 ms of user
audio (its Realtime guide's count; those models price audio tokens apart: `audio_input` in the
price table); Qwen2.5-Omni's audio encoder 25 per second (40 ms a token after pooling). The
length comes from the WAV's header.
"""

from __future__ import annotations

import json
import math
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from avstack.errors import UsageError
from avstack.runs.planning.audio_cost import audio_rule, audio_tokens  # noqa: F401 - re-exported, where the plan reads them

PRICES_FILE = Path(__file__).with_name("prices.json")
CHARS_PER_TOKEN = 4  # the stated estimate where no tokenizer is installed (English prose, OpenAI's rule of thumb)

# (base, per tile) by name prefix; every other tile model: (85, 170)
OPENAI_TILES = {"gpt-4o-mini": (2833, 5667), "gpt-5": (70, 140)}
OPENAI_PATCHES = {"gpt-4.1-mini": 1.62, "gpt-4.1-nano": 2.46, "o4-mini": 1.72, "gpt-5-mini": 1.62, "gpt-5-nano": 2.46}
QWEN_MIN_PIXELS, QWEN_MAX_PIXELS = 4 * 28 * 28, 16384 * 28 * 28


def openai_tiles(width: int, height: int, detail: str = "high", base: int = 85, per_tile: int = 170) -> int:
    if detail == "low":
        return base
    scale = min(1.0, 2048 / max(width, height))
    w, h = width * scale, height * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    return base + per_tile * math.ceil(w / 512) * math.ceil(h / 512)


def openai_patches(width: int, height: int, multiplier: float, cap: int = 1536) -> int:
    patches = math.ceil(width / 32) * math.ceil(height / 32)
    if patches > cap:
        shrink = math.sqrt(cap * 32 * 32 / (width * height))
        # then fit a whole number of patches across the width, in whole pixels (OpenAI's worked
        # example: 1800 x 2400 -> 1056 x 1408 -> 33 x 44 = 1452 patches)
        shrink *= min(1.0, math.floor(width * shrink / 32) / (width * shrink / 32))
        patches = math.ceil(int(width * shrink) / 32) * math.ceil(int(height * shrink) / 32)
    return math.ceil(min(patches, cap) * multiplier)


def gemini(width: int, height: int) -> int:
    if width <= 384 and height <= 384:
        return 258
    return 258 * math.ceil(width / 768) * math.ceil(height / 768)


def qwen25_vl(width: int, height: int, min_pixels: int = QWEN_MIN_PIXELS, max_pixels: int = QWEN_MAX_PIXELS) -> int:
    """Qwen2/2.5-VL's 28 x 28 blocks of one image (its `smart_resize`), without the two vision tokens."""
    return _smart_resize_blocks(width, height, 28, min_pixels, max_pixels)


def qwen_vl(width: int, height: int, block: int, min_blocks: int, max_blocks: int) -> int:
    """Qwen-VL's blocks of one image and the two vision tokens around them."""
    area = block * block
    return _smart_resize_blocks(width, height, block, min_blocks * area, max_blocks * area) + 2


def _smart_resize_blocks(width: int, height: int, factor: int, min_pixels: int, max_pixels: int) -> int:
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return (h // factor) * (w // factor)


def internvl_tiles(width: int, height: int, max_tiles: int = 12, tile: int = 448) -> int:
    """InternVL's `dynamic_preprocess`: the tiles of the grid closest in aspect (on a tie, the
    larger grid when the image covers more than half of it), and a thumbnail when several."""
    pairs = {(i, j) for i in range(1, max_tiles + 1) for j in range(1, max_tiles + 1) if i * j <= max_tiles}
    grids = sorted(pairs, key=lambda g: g[0] * g[1])
    aspect, best, best_diff = width / height, (1, 1), float("inf")
    for cols, rows in grids:
        diff = abs(aspect - cols / rows)
        if diff < best_diff:
            best, best_diff = (cols, rows), diff
        elif diff == best_diff and width * height > 0.5 * tile * tile * cols * rows:
            best = (cols, rows)
    tiles = best[0] * best[1]
    return tiles + (1 if tiles > 1 else 0)


def internvl(width: int, height: int) -> int:
    return 256 * internvl_tiles(width, height) + 2


ONEVISION_GRIDS = [(384 * i, 384 * j) for i in range(1, 7) for j in range(1, 7)]  # (height, width)


def llava_onevision(width: int, height: int, base: int = 729, side: int = 27, tile: int = 384) -> int:
    """transformers' LLaVA-OneVision count: the best grid (most of the image kept, least wasted),
    its 27 x 27 patches a tile unpadded to the image's aspect plus a newline a row, pooled when
    over 9 tiles' worth, and the 729 of the base image."""
    best, most, waste = ONEVISION_GRIDS[0], -1, float("inf")
    for gh, gw in ONEVISION_GRIDS:
        scale = min(gw / width, gh / height)
        kept = min(int(width * scale) * int(height * scale), width * height)
        wasted = gh * gw - kept
        if kept > most or (kept == most and wasted < waste):
            best, most, waste = (gh, gw), kept, wasted
    cur_h, cur_w = side * (best[0] // tile), side * (best[1] // tile)
    if width / height > cur_w / cur_h:
        new_h = int(round(height * (cur_w / width), 7))
        cur_h -= 2 * ((cur_h - new_h) // 2)
    else:
        new_w = int(round(width * (cur_h / height), 7))
        cur_w -= 2 * ((cur_w - new_w) // 2)
    features, newlines = cur_h * cur_w, cur_h
    ratio = math.sqrt(cur_h * cur_w / (9 * side * side))
    if ratio > 1.1:
        features, newlines = int(cur_h // ratio) * int(cur_w // ratio), int(cur_h // ratio)
    return features + newlines + base


def gemma3(width: int, height: int) -> int:
    return 256 + 2


def claude(width: int, height: int, most: int = 1600) -> int:
    scale = min(1.0, 1568 / max(width, height), math.sqrt(most * 750 / (width * height)))
    return math.ceil(int(width * scale) * int(height * scale) / 750)


# rules that need only the image's size, by the name `--image-rule` takes
SIZE_RULES: dict[str, Callable[[int, int], int]] = {
    "gemini": gemini,
    "qwen2-vl": lambda w, h: qwen_vl(w, h, 28, 4, 16384),
    "qwen2-vl-llama.cpp": lambda w, h: qwen_vl(w, h, 28, 8, 4096),
    "qwen3-vl": lambda w, h: qwen_vl(w, h, 32, 64, 16384),
    "internvl": internvl,
    "llava-onevision": llava_onevision,
    "gemma3": gemma3,
    "claude": claude,
    "gemini3": lambda w, h: 1120,  # Gemini 3: media_resolution per part, high (its default) 1,120 a picture
}
IMAGE_RULES = ("openai-tiles", "openai-patches", *SIZE_RULES)
# model-name fragments (lower case, '_' read as '-') -> rule; the first that matches wins
NAMED_RULES = (
    # the Omni models see with their VL sibling's vision tower: Qwen2.5-Omni Qwen2.5-VL's (14 px
    # patches merged 2 x 2), Qwen3-Omni Qwen3-VL's (16 px merged 2 x 2)
    (("qwen3-vl", "qwen3-omni"), "qwen3-vl"),
    (("qwen2-vl", "qwen2.5-vl", "qwen2-5-vl", "qwen2.5-omni", "qwen2-5-omni"), "qwen2-vl"),
    (("internvl",), "internvl"),
    (("llava-onevision", "llava-ov"), "llava-onevision"),
    (("gemma-3", "gemma3"), "gemma3"),
    (("gemini-3",), "gemini3"),
    (("gemini",), "gemini"),
    (("claude",), "claude"),
)


def image_rule(model: str, chosen: str | None = None) -> str | None:
    """The rule for a model spec (openai:gpt-4o, gemini:gemini-2.0-flash, a Qwen2-VL name, ...);
    `chosen` (--image-rule) overrides the name."""
    if chosen is not None:
        if chosen not in IMAGE_RULES:
            raise UsageError(f"--image-rule: expected one of {', '.join(IMAGE_RULES)}, got {chosen!r}")
        return chosen
    name = model.split(":", 1)[-1].lower()
    if name in OPENAI_PATCHES:
        return "openai-patches"
    if name.startswith(("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3")):
        return "openai-tiles"
    plain = name.replace("_", "-")
    return next((rule for fragments, rule in NAMED_RULES if any(f in plain for f in fragments)), None)


def image_tokens(width: int, height: int, model: str, detail: str = "high", chosen: str | None = None) -> int | None:
    """Tokens one image costs on `model`, or None when no published rule is known for it."""
    rule, name = image_rule(model, chosen), model.split(":", 1)[-1].lower()
    if rule == "openai-tiles":
        tiles = next((v for k, v in sorted(OPENAI_TILES.items(), reverse=True) if name.startswith(k)), (85, 170))
        return openai_tiles(width, height, detail, *tiles)
    if rule == "openai-patches":
        return openai_patches(width, height, OPENAI_PATCHES.get(name, 1.0))
    return SIZE_RULES[rule](width, height) if rule else None


def wav_duration_ms(path: Path) -> int:
    """A WAV file's length in ms from its header (the `fmt ` and `data` chunks), not decoding it."""
    with open(path, "rb") as f:
        head = f.read(12)
        if head[:4] != b"RIFF" or head[8:12] != b"WAVE":
            raise UsageError(f"{path}: not a WAV file (first bytes {head[:4]!r})")
        rate = block = 0
        while chunk := f.read(8):
            if len(chunk) < 8:
                break
            kind, size = chunk[:4], struct.unpack("<I", chunk[4:])[0]
            if kind == b"fmt ":
                fmt = f.read(size)
                rate, block = struct.unpack("<I", fmt[4:8])[0], struct.unpack("<H", fmt[12:14])[0]
                continue
            if kind == b"data":
                if not rate or not block:
                    raise UsageError(f"{path}: a data chunk before its fmt chunk")
                return size // block * 1000 // rate
            f.seek(size + (size & 1), 1)
    raise UsageError(f"{path}: no data chunk in the WAV")


def text_counter() -> tuple[object, str]:
    """(count(text) -> tokens, how): tiktoken's o200k_base where installed, else a stated estimate."""
    try:
        import tiktoken

        enc = tiktoken.get_encoding("o200k_base")
        return (lambda text: len(enc.encode(text))), "tiktoken o200k_base"
    except Exception:  # noqa: BLE001 - not installed, or its vocabulary cannot be fetched offline
        return (lambda text: math.ceil(len(text) / CHARS_PER_TOKEN)), f"estimate: characters / {CHARS_PER_TOKEN}"


def image_size(path: Path) -> tuple[int, int]:
    """(width, height) from a JPEG's or PNG's header, without decoding it."""
    with open(path, "rb") as f:
        head = f.read(26)
        if head[:8] == b"\x89PNG\r\n\x1a\n":
            return struct.unpack(">II", head[16:24])
        if head[:2] != b"\xff\xd8":
            raise UsageError(f"{path}: not a JPEG or PNG (first bytes {head[:4]!r})")
        f.seek(2)
        while True:
            marker = f.read(4)
            if len(marker) < 4 or marker[0] != 0xFF:
                raise UsageError(f"{path}: no frame header in the JPEG")
            kind, length = marker[1], struct.unpack(">H", marker[2:])[0]
            if 0xC0 <= kind <= 0xCF and kind not in (0xC4, 0xC8, 0xCC):
                height, width = struct.unpack(">xHH", f.read(5))
                return width, height
            f.seek(length - 2, 1)


@dataclass(frozen=True)
class Price:
    """USD per million tokens; `batch` the share a batch request pays (0.5: half)."""

    input: float
    output: float
    batch: float = 0.5
    audio_input: float | None = None  # USD per 1M audio input tokens, where the provider prices them apart


def load_prices(path: Path | None = None) -> tuple[dict[str, Price], str]:
    """The price table (model name -> Price) and the date it was read; the user's file if given."""
    data = json.loads((path or PRICES_FILE).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise UsageError(f"{path or PRICES_FILE}: expected {{'read_on': DATE, 'models': {{name: {{input, output}}}}}}")
    table = {}
    for name, p in data["models"].items():
        try:
            audio = p.get("audio_input")
            table[name] = Price(
                float(p["input"]),
                float(p["output"]),
                float(p.get("batch", 0.5)),
                None if audio is None else float(audio),
            )
        except (KeyError, TypeError, ValueError) as exc:
            where = path or PRICES_FILE
            raise UsageError(f"{where}: model {name!r}: expected input and output USD per 1M tokens") from exc
    return table, str(data.get("read_on", "unknown"))


def price_of(model: str, prices: dict[str, Price]) -> Price | None:
    """The table's entry for a model spec: its exact name, else the longest name it starts with."""
    name = model.split(":", 1)[-1]
    if name in prices:
        return prices[name]
    found = [k for k in prices if name.startswith(k)]
    return prices[max(found, key=len)] if found else None


def usage_tokens(usage: object) -> tuple[int, int]:
    """(input, output) tokens of a server's usage report, in any of the shapes providers use
    (OpenAI's prompt/completion_tokens, Anthropic's and OpenAI Responses' input/output_tokens,
    Gemini's prompt_token_count/candidates_token_count); (0, 0) when it says nothing usable."""
    if not isinstance(usage, dict):
        return 0, 0

    def first(*keys: str) -> int:
        for k in keys:
            v = usage.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0:
                return int(v)
        return 0

    return (
        first("prompt_tokens", "input_tokens", "prompt_token_count"),
        first("completion_tokens", "output_tokens", "candidates_token_count"),
    )


def cached_tokens(usage: object) -> int:
    """Input tokens a server says it took from its prompt cache: OpenAI's
    `prompt_tokens_details.cached_tokens`, Anthropic's `cache_read_input_tokens`, Gemini's
    `cached_content_token_count`, llama.cpp's `timings.cache_n`; 0 when it says nothing."""
    if not isinstance(usage, dict):
        return 0
    found = [
        (usage.get("prompt_tokens_details") or {}).get("cached_tokens"),
        usage.get("cache_read_input_tokens"),
        usage.get("cached_content_token_count"),
        (usage.get("timings") or {}).get("cache_n"),
    ]
    return max((int(v) for v in found if isinstance(v, (int, float)) and not isinstance(v, bool)), default=0)


class BudgetReached(UsageError):
    """The servers' reported usage reached the cost budget (--max-cost): the run stopped cleanly
    (resumable). It carries the numbers too."""

    def __init__(self, limit_usd: float, spent_usd: float, out: object):
        self.limit_usd, self.spent_usd, self.out = limit_usd, spent_usd, out
        super().__init__(
            f"--max-cost {limit_usd:g} USD reached: the servers reported {spent_usd:.4f} USD of usage; "
            f"the answers so far are kept in {out}, and a rerun with a higher --max-cost goes on from there"
        )


class Budget:
    """A spending limit shared by every run of a job (the stacks of an ablation), charged from
    the usage each server reports for a request actually sent (cached answers cost nothing)."""

    def __init__(self, limit_usd: float, price: Price):
        self.limit_usd, self.price = limit_usd, price
        self.spent_usd = 0.0
        self._lock = threading.Lock()

    def charge(self, usage: object) -> bool:
        """Add one answer's reported usage; True once the limit is reached."""
        tokens_in, tokens_out = usage_tokens(usage)
        with self._lock:
            self.spent_usd += (tokens_in * self.price.input + tokens_out * self.price.output) / 1e6
            return self.spent_usd >= self.limit_usd

    def reached(self) -> bool:
        with self._lock:
            return self.spent_usd >= self.limit_usd
