"""The plan as a typed record: what `--dry-run` writes to plan.json and every later step reads
(the provider's limits, the bill, what the servers reported against it). `to_json` gives
plan.json's shape, `from_json` reads one back as untrusted input."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from avstack.io import DataError


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
    cache_read_tokens: int = 0  # of to_pay_input_tokens: predicted to come from the provider's prompt cache
    cache_write_tokens: int = 0  # of to_pay_input_tokens: predicted to be written to it (Anthropic)
    adjacent_images: int = 0  # pictures touching another (no text between): a server may merge them
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PlanTotal:
    """The whole job: requests, what is paid, the prompt cache, the most it may cost."""

    requests: int
    to_pay_requests: int
    cached: int
    repeats: int
    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    audio_tokens: int
    output_tokens_at_most: int
    usd_at_most: dict[str, float] | None  # online, batch (and online_with_cache); None: price unknown


OWN_SHAPES = ("stacks", "total", "notes", "arms")  # Plan's fields read otherwise than as they stand


@dataclass(frozen=True)
class Plan:
    """What running the stacks would ask and cost; nothing sent."""

    model: str
    detail: str
    image_rule: str | None
    audio_rule: str | None
    text_tokens: str  # how the text was counted
    prices_read_on: str
    price_usd_per_1m: dict[str, float] | None  # input, output
    stacks: dict[str, StackBill]
    inputs: dict[str, dict[str, list[int | None]]]  # per stack, per item: [input tokens, how far off]
    sent: dict[str, dict[str, str]]  # per stack, per item: the request's digest as sent (runs.counting)
    prompt_cache: dict[str, object] | None  # the provider's cache rule assumed (plan.cache_said)
    limits: dict[str, object] | None  # the provider's limits and each stack's breaches (limits.limits_said)
    total: PlanTotal
    notes: tuple[str, ...] = ()
    # the planned arms and what each changes from its parent (runs.integrity); None: not checked
    arms: tuple[dict[str, object], ...] | None = None

    def to_json(self) -> dict[str, object]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["stacks"] = {name: asdict(b) for name, b in self.stacks.items()}
        out["total"] = asdict(self.total)
        out["notes"] = list(self.notes)
        arms = out.pop("arms")
        return out | ({"arms": list(arms)} if arms is not None else {})

    @classmethod
    def from_json(cls, d: object, where: str = "plan.json") -> Plan:
        if not isinstance(d, dict):
            raise DataError(f"{where}: expected a plan object, found {type(d).__name__}")
        try:
            stacks = {name: StackBill(**b) for name, b in d["stacks"].items()}
            total = PlanTotal(**d["total"])
            kw: dict[str, Any] = {f.name: d.get(f.name) for f in fields(cls) if f.name not in OWN_SHAPES}
            kw["inputs"], kw["sent"] = kw["inputs"] or {}, kw["sent"] or {}  # plans written before they were kept
            arms = tuple(d["arms"]) if isinstance(d.get("arms"), list) else None
            return cls(**kw, stacks=stacks, total=total, notes=tuple(d.get("notes") or ()), arms=arms)
        except (KeyError, TypeError, AttributeError) as exc:
            raise DataError(f"{where}: not a plan avstack wrote ({type(exc).__name__}: {exc})") from None

    def with_limits(self, limits: dict[str, object] | None) -> Plan:
        return replace(self, limits=limits)

    def with_arms(self, arms: list[dict[str, object]]) -> Plan:
        return replace(self, arms=tuple(arms))

    @property
    def checked_arms(self) -> list[dict[str, object]]:
        return list(self.arms or ())
