"""Input stacks as data: which anchors (cues) a request carries.

An ablation is a value here; only the prompt builders read it. Back-ends
receive finished requests and know nothing about anchors.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from avstack.prompting.budget import FrameBudget
from avstack.prompting.timefmt import check_ts_format, check_word_format

ALL_ANCHORS = ("frames", "frame_ts", "asr", "word_ts", "video", "audio", "subtitles")
DROPPABLE = ("frame_ts", "word_ts", "asr", "frames", "subtitles", "audio")
# where the parts a clip's stacks share go: the benchmark's own order (the instruction and the ASR
# block, then the frames), or shared-first (the frames with their tags, and the clip's video or
# sound, before them), so a provider's prompt cache can serve one clip's stacks from one prefix
LAYOUTS = ("benchmark", "shared-first")
VARIANTS = {
    "full": frozenset({"frames", "frame_ts", "asr", "word_ts"}),  # the paper's Images+ASR
    # full plus a dataset's own subtitles with their cue times (videoqa): with --drop asr / subtitles,
    # "our ASR vs the given subtitles vs none" is one ablation
    "subtitled": frozenset({"frames", "frame_ts", "asr", "word_ts", "subtitles"}),
    "video": frozenset({"video"}),  # native Video-Omni: the file with its audio
    "text": frozenset({"asr", "word_ts"}),  # language-only probe: no visual input
    # the interface ablation's other two cells: frames with their times and the clip's own sound
    # (no ASR text), and the file as `video` sends it with the word-timed ASR beside it
    "omni": frozenset({"frames", "frame_ts", "audio"}),
    "video_asr": frozenset({"video", "asr", "word_ts"}),
}

# The interface 2x2 (EcoG-Bench's headline compares its diagonal): how the picture comes
# (frames with their times, or the file) x how the speech comes (word-timed text, or sound)
INTERFACE = {
    "full": ("frames", "text"),
    "omni": ("frames", "sound"),
    "video_asr": ("file", "text"),
    "video": ("file", "sound"),
}


def interface_pairs(variants: Iterable[str]) -> list[tuple[str, str, str]]:
    """(a, b, the factor they differ in) for each pair of interface cells among `variants` that
    differ in one factor only: the picture ("frames -> file") or the speech ("text -> sound")."""
    cells = [v for v in INTERFACE if v in set(variants)]
    out = []
    for i, a in enumerate(cells):
        for b in cells[i + 1 :]:
            (pa, sa), (pb, sb) = INTERFACE[a], INTERFACE[b]
            if pa == pb and sa != sb:
                out.append((a, b, f"speech {sa} -> {sb}"))
            elif sa == sb and pa != pb:
                out.append((a, b, f"picture {pa} -> {pb}"))
    return out


@dataclass(frozen=True)
class Stack:
    """A named set of anchors, e.g. full - frame_ts, and how times are told in it: frame timestamps
    in `ts_format` (`full@seconds`), word times in `word_ts_format` (`full@words-srt`)."""

    variant: str
    anchors: frozenset[str]
    dropped: tuple[str, ...] = ()
    ts_format: str = "ms"
    word_ts_format: str = "json"
    layout: str = "benchmark"
    budget: FrameBudget = FrameBudget()  # the frames it picks from the prepared ones (prompting.budget)
    packed: bool = False  # all of a video's questions in one request (videoqa), each answer parsed back

    @property
    def name(self) -> str:
        name = self.variant + "".join(f"-no_{d}" for d in self.dropped)
        name += f"@{self.ts_format}" if self.ts_format != "ms" else ""
        name += f"@words-{self.word_ts_format}" if self.word_ts_format != "json" else ""
        name += f"@{self.layout}" if self.layout != "benchmark" else ""
        name += f"@{self.budget.label}" if self.has("frames") and not self.budget.unbounded else ""
        return name + ("@packed" if self.packed else "")

    def has(self, anchor: str) -> bool:
        return anchor in self.anchors

    @property
    def hears(self) -> bool:
        """Does the request carry the clip's sound (its audio, or the file with its audio)?"""
        return self.has("audio") or self.has("video")

    def to_meta(self) -> dict[str, object]:
        """The stack as a run's run.json records it."""
        return {
            "stack": self.name,
            "variant": self.variant,
            "anchors": sorted(self.anchors),
            "dropped": list(self.dropped),
            "ts_format": self.ts_format,
            "word_ts_format": self.word_ts_format,
            "layout": self.layout,
            "fps": self.budget.fps,
            "max_frames": self.budget.max_frames,
            "packed": self.packed,
        }


def make_stack(
    variant: str = "full",
    drop: Iterable[str] = (),
    ts_format: str = "ms",
    word_ts_format: str = "json",
    layout: str = "benchmark",
    budget: FrameBudget = FrameBudget(),
    packed: bool = False,
) -> Stack:
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}; found {variant!r}")
    drop = tuple(dict.fromkeys(drop))
    bad = [d for d in drop if d not in DROPPABLE]
    if bad:
        raise ValueError(f"--drop takes {', '.join(DROPPABLE)}; found {', '.join(bad)}")
    anchors = set(VARIANTS[variant]) - set(drop)
    if "asr" not in anchors:
        anchors.discard("word_ts")  # word times live inside the ASR block
    if "frames" not in anchors:
        anchors.discard("frame_ts")
    if layout not in LAYOUTS:
        raise ValueError(f"--layout takes {', '.join(LAYOUTS)}; found {layout!r}")
    ts, words = check_ts_format(ts_format), check_word_format(word_ts_format)
    # a budget picks frames: a stack without them (text, video) has none to pick, and keeps its name
    kept = budget if "frames" in anchors else FrameBudget()
    return Stack(variant, frozenset(anchors), drop, ts, words, layout, kept, packed)


def parse_stack_name(name: str) -> Stack:
    """Inverse of Stack.name: 'full-no_frame_ts@seconds' -> full minus frame_ts, times in seconds."""
    base, *formats = name.split("@")
    variant, *rest = base.split("-no_")
    words = next((f.removeprefix("words-") for f in formats if f.startswith("words-")), "json")
    layout = next((f for f in formats if f in LAYOUTS), "benchmark")
    budget = next((b for f in formats if (b := FrameBudget.parse(f)) is not None), FrameBudget())
    told = [f for f in formats if not f.startswith("words-") and f not in (*LAYOUTS, "packed")
            and FrameBudget.parse(f) is None]  # fmt: skip
    return make_stack(variant, rest, next(iter(told), "ms"), words, layout, budget, "packed" in formats)


@dataclass(frozen=True)
class Subset:
    """One subset of an ablation's cues: the cues kept, the stack run for it (the first with the
    same anchors), and the stack whose requests it repeats when it is an impossible one."""

    present: frozenset[str]
    stack: Stack
    same_as: str | None


def subset_stacks(cues: list[str], variant: str = "full") -> list[Subset]:
    """Every subset of `cues` as a stack, largest first (the variant itself is the baseline). A
    subset whose stack is impossible (word_ts kept without asr) has the anchors of a smaller,
    possible one and reuses it: smaller subsets claim their anchors first."""
    import itertools

    out: list[Subset] = []
    first: dict[frozenset[str], Stack] = {}
    for k in range(len(cues) + 1):
        for kept in itertools.combinations(cues, k):
            stack = make_stack(variant, [c for c in cues if c not in kept])
            prior = first.setdefault(stack.anchors, stack)
            out.append(Subset(frozenset(kept), prior, None if prior is stack else prior.name))
    return out[::-1]
