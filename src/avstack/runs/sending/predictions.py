"""What a run records of each item: a `Prediction` (one line of predictions.jsonl, with one
`to_json`/`from_json` place; a file read back is untrusted input), and how a request failed as a
`Failure` kind, set where the failure happens (the engine's asking), never recovered from the
message, except for the lines of runs written before the kind was recorded."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum

from avstack.io import DataError


class Failure(str, Enum):
    """Why an item has no answer."""

    INPUT = "input"  # the item had no request: its input could not be read or built
    REFUSED = "refused"  # the back-end cannot take the request (runners.Backend.refuses): nothing was sent
    LIMIT = "limit"  # the request goes over a limit the provider named: asking again cannot mend it
    REJECTED = "rejected"  # the server answered this request with an error (a 4xx, a malformed answer)
    GAVE_UP = "gave_up"  # transient failures (429, 5xx, timeouts) outlasted the retries

    @property
    def final(self) -> bool:
        """Whether the failure stands: a rerun asks again only what gave up."""
        return self is not Failure.GAVE_UP

    @classmethod
    def named(cls, kind: object) -> Failure | None:
        """The kind a file names, or None (none named, or one this avstack does not know)."""
        return cls._value2member_map_.get(kind) if isinstance(kind, str) else None  # type: ignore[return-value]


# the lines of runs written before the kind was recorded: their message says it (a 401/403/404
# was stored as an answer then; now it stops the run)
_LEGACY_NOT_FINAL = re.compile(r"^(transient|.*HTTP (401|403|404)\b)")
# the fields of a prediction line before the item's own (the order of the file's keys)
BASE = ("raw", "prediction", "parse_error", "error", "latency_s", "usage", "attempts", "cached", "stack")


def is_final(error: object, failure: Failure | None = None) -> bool:
    """Whether a recorded answer stands (a rerun does not ask again): by its failure kind, or, for
    a line written before kinds were recorded, by its message."""
    if failure is not None:
        return failure.final
    return not _LEGACY_NOT_FINAL.match(str(error or ""))


@dataclass(frozen=True)
class Prediction:
    """One item's outcome as a run records it: the answer and its parse, or why there is none."""

    item_id: str
    id_field: str  # the item's id key in the file: clip_id (EcoG), id (videoqa), uid (EgoGap)
    raw: str | None
    prediction: dict[str, object] = field(default_factory=dict)
    parse_error: str | None = None
    error: str | None = None
    latency_s: float = 0.0
    usage: dict[str, object] = field(default_factory=dict)
    attempts: int = 0
    cached: bool = False
    stack: str | None = None
    extra: dict[str, object] = field(default_factory=dict)  # the item's own fields (the option labels shown)
    limit: str | None = None  # the provider's limit the server named
    failure: Failure | None = None

    @property
    def final(self) -> bool:
        return self.raw is not None or is_final(self.error, self.failure)

    @property
    def failed_request(self) -> bool:
        """No answer: the request failed (refused, a 4xx, an input problem, gave up)."""
        return self.raw is None and bool(self.error)

    def to_json(self) -> dict[str, object]:
        line: dict[str, object] = {self.id_field: self.item_id}
        line |= {name: getattr(self, name) for name in BASE} | self.extra
        if self.limit is not None:
            line["limit"] = self.limit
        if self.failure is not None:
            line["failure"] = self.failure.value
        return line

    @classmethod
    def from_json(cls, d: object, id_field: str, where: str) -> Prediction:
        """A line read from a predictions file: DataError naming the place and the field."""
        if not isinstance(d, dict) or not isinstance(d.get(id_field), str):
            raise DataError(f"{where}: expected a prediction with a string {id_field!r}, found {str(d):.80}")
        checks = {
            "raw": (str, type(None)),
            "prediction": (dict,),
            "parse_error": (str, type(None)),
            "error": (str, type(None)),
            "usage": (dict,),
        }
        for name, kinds in checks.items():
            if name in d and not isinstance(d[name], kinds):
                raise DataError(f"{where}: item {d[id_field]!r}: {name} has the wrong type ({type(d[name]).__name__})")
        failure = d.get("failure")
        if failure is not None and Failure.named(failure) is None:
            raise DataError(f"{where}: item {d[id_field]!r}: unknown failure kind {failure!r}")
        own = {k: v for k, v in d.items() if k not in (id_field, *BASE, "limit", "failure")}
        return cls(
            d[id_field],
            id_field,
            d.get("raw"),
            d.get("prediction") or {},
            d.get("parse_error"),
            d.get("error"),
            d.get("latency_s", 0.0),
            d.get("usage") or {},
            d.get("attempts", 0),
            bool(d.get("cached", False)),
            d.get("stack"),
            own,
            d.get("limit"),
            Failure.named(failure),
        )
