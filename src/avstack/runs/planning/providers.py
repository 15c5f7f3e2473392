"""What each provider and model family allows and how it caches a repeated prefix, from one data
file (providers.json: each family with the date it was read and its source), which a user may
replace (`--providers FILE`) as the price table.

A family is found by the model's name (the first whose fragment the name contains) or, for a local
OpenAI-compatible server, by what the server said it is (llama.cpp, vLLM)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from avstack.errors import UsageError
from avstack.io import read_json_file

PROVIDERS_FILE = Path(__file__).with_name("providers.json")
CACHE_KINDS = ("automatic", "breakpoint")
LIMIT_FIELDS = ("images", "image_bytes", "request_bytes", "side_px", "many_images", "audio_s", "context_tokens")


@dataclass(frozen=True)
class CacheRule:
    """How a provider caches a prefix: `automatic` (any repeated prefix) or `breakpoint` (only up to
    a marked block); nothing below `min_tokens`; cached tokens in multiples of `step`; a cached
    token pays `read` of the input price, a token written to the cache `write`."""

    kind: str
    min_tokens: int = 0
    step: int = 1
    read: float = 1.0
    write: float = 1.0

    def cached(self, prefix_tokens: int) -> int:
        """Tokens of a `prefix_tokens`-long repeated prefix the provider takes from its cache."""
        if prefix_tokens < max(1, self.min_tokens):
            return 0
        return prefix_tokens // self.step * self.step


@dataclass(frozen=True)
class Limits:
    """A request's limits (None: none known). `many_images`: (count, px): with more than `count`
    images, at most `px` on an image's longer side."""

    images: int | None = None
    image_bytes: int | None = None
    request_bytes: int | None = None
    side_px: int | None = None
    many_images: tuple[int, int] | None = None
    audio_s: float | None = None
    context_tokens: int | None = None


@dataclass(frozen=True)
class Family:
    name: str
    match: tuple[str, ...]
    cache: CacheRule | None
    limits: Limits
    read_on: str
    source: str
    server: str | None = None
    notes: tuple[str, ...] = field(default=())


def load_families(path: Path | None = None) -> list[Family]:
    """The families of the data file (the user's if given), in order; a wrong entry is an error
    naming the file, the family and the field."""
    where = path or PROVIDERS_FILE
    data = read_json_file(where, dict)
    families = data.get("families")
    if not isinstance(families, dict):
        raise UsageError(f"{where}: expected {{'families': {{name: {{match, cache, limits}}}}}}")
    return [_family(where, name, entry, str(data.get("read_on", "unknown"))) for name, entry in families.items()]


def _family(where: Path, name: str, entry: object, read_on: str) -> Family:
    def bad(what: str) -> ValueError:
        return ValueError(f"{where}: family {name!r}: {what}")

    if not isinstance(entry, dict):
        raise bad(f"expected an object, found {type(entry).__name__}")
    match = entry.get("match", [])
    if not isinstance(match, list) or not all(isinstance(m, str) for m in match):
        raise bad("match: expected a list of model-name fragments")
    cache = entry.get("cache")
    rule = None
    if cache is not None:
        if not isinstance(cache, dict) or cache.get("kind") not in CACHE_KINDS:
            raise bad(f"cache.kind: expected one of {', '.join(CACHE_KINDS)}")
        try:
            rule = CacheRule(cache["kind"], int(cache.get("min_tokens", 0)), max(1, int(cache.get("step", 1))),
                             float(cache.get("read", 1.0)), float(cache.get("write", 1.0)))  # fmt: skip
        except (TypeError, ValueError) as exc:
            raise bad(f"cache: expected numbers ({exc})") from None
    limits = entry.get("limits", {})
    if not isinstance(limits, dict) or set(limits) - set(LIMIT_FIELDS):
        raise bad(f"limits: expected fields among {', '.join(LIMIT_FIELDS)}")
    try:
        many = limits.get("many_images")
        numbers: dict[str, Any] = {k: float(v) if k == "audio_s" else int(v) for k, v in limits.items()
                                   if k != "many_images"}  # fmt: skip
        parsed = Limits(**numbers, many_images=None if many is None else (int(many[0]), int(many[1])))
    except (TypeError, ValueError, IndexError) as exc:
        raise bad(f"limits: expected whole numbers ({exc})") from None
    server = entry.get("server")
    return Family(name, tuple(m.lower() for m in match), rule, parsed, str(entry.get("read_on", read_on)),
                  str(entry.get("source", "")), server if isinstance(server, str) else None)  # fmt: skip


def family_of(model: str, server: str | None = None, path: Path | None = None) -> Family | None:
    """The family of a model spec (`anthropic:claude-sonnet-4-5`), or of the local server that
    serves it (`server`: llama.cpp, vllm); None when the file knows neither."""
    families = load_families(path)
    if server:
        found = next((f for f in families if f.server == server), None)
        if found is not None:
            return found
    name = model.split(":", 1)[-1].lower()
    return next((f for f in families if any(m in name for m in f.match)), None)
