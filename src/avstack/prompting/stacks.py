"""Input stacks as data: which anchors (cues) a request carries.

An ablation is a value here; only the prompt builders read it. Back-ends
receive finished requests and know nothing about anchors.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from avstack.errors import UsageError
from avstack.prompting.budget import FrameBudget
from avstack.prompting.timefmt import check_ts_format, check_word_format

# silent: the benchmark's own silent copy of the video (AV-SpeakerBench's visual_path)
ALL_ANCHORS = ("frames", "frame_ts", "asr", "word_ts", "video", "audio", "subtitles", "silent")
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
    # one medium alone, as AV-SpeakerBench's arms send them: the sound (its audio_path where the
    # benchmark gives one), the silent video (its visual_path)
    "sound": frozenset({"audio"}),
    "silent": frozenset({"silent"}),
    # a benchmark's own prompt, byte for byte where its code is quoted (tasks/videoqa/shipped_prompts):
    # Video-MME-v2's frames with its subtitles joined (concat) or after each frame (interleave)
    "concat": frozenset({"frames", "subtitles"}),
    "interleave": frozenset({"frames", "subtitles"}),
    # WorldSense's frames with the subtitle cue on screen at each sampled frame (VLMEvalKit's)
    "frame_cues": frozenset({"frames", "subtitles"}),
}
SHIPPED_PROMPTS = ("concat", "interleave", "frame_cues")  # variants whose requests are the benchmark's own
# the variants that show a dataset's own words or files, which only a questions file gives
GIVEN_VARIANTS = ("subtitled", "silent", *SHIPPED_PROMPTS)


def refuse_given_variants(task: str, variants: Iterable[str]) -> None:
    """A task with no questions file (EcoG) refuses the variants only one can feed, before anything runs."""
    bad = [v for v in dict.fromkeys(variants) if v in GIVEN_VARIANTS]
    if bad:
        raise UsageError(
            f"--task {task} takes no variant {', '.join(bad)}: it shows a dataset's own subtitles or files, "
            "which a questions file gives (--task videoqa)"
        )


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
class Changes:
    """What an arm may change in the requests of the arm it is compared with (its parent), part by
    part (avstack.runs.ablation.integrity checks it before anything is sent). Declared beside each cue and
    axis below, so a new axis says what it changes where it is defined.

    text: none | tags (frame tags removed, words deleted from the lines that introduce them) |
    retag (tags replaced, in another format) | fewer (lines removed or shortened, nothing added) |
    region (anything inside one contiguous stretch of text, as an ASR block and its note) | any.
    images: same | fewer (some removed, the rest in order) | replaced (one for one) | any.
    media (the clip's own video and sound): same | fewer | any.
    order: same | permuted (the same parts, moved: a layout)."""

    cue: str
    text: str = "none"
    images: str = "same"
    media: str = "same"
    order: str = "same"


# what dropping each cue may change in its parent's requests, and nothing else
CUE_CHANGES = {
    "frame_ts": Changes("frame_ts", text="tags"),
    "word_ts": Changes("word_ts", text="region"),  # the word times inside the ASR block, and its note
    "asr": Changes("asr", text="region"),  # the ASR block and the words that introduce it
    "subtitles": Changes("subtitles", text="region"),
    "frames": Changes("frames", text="any", images="fewer"),  # the frames, their tags and what says they come
    "audio": Changes("audio", text="any", media="fewer"),
}
# the A/A arm: the baseline asked again, every part the same
REPEAT = Changes("aa")


def axis_changes(axis: str, a: object, b: object) -> Changes:
    """What moving along one of a stack's axes (from value `a` to `b`) may change."""
    if axis == "ts_format":
        burned = "overlay" in (a, b)  # the time is in the pictures: each replaced by its overlaid copy
        return Changes(f"ts_format {a} -> {b}", text="retag", images="replaced" if burned else "same")
    if axis == "word_ts_format":
        return Changes(f"word_ts_format {a} -> {b}", text="region")
    if axis == "layout":
        return Changes(f"layout {a} -> {b}", order="permuted")
    if axis == "budget":
        # another budget picks other frames by time (not a subset): their pictures, tags and the
        # last-frame line change; the clip's sound and video and the parts' order may not
        return Changes("frame budget", text="any", images="any")
    # packing asks a video's questions in one request: its requests are not the unpacked ones
    return Changes(f"{axis} {a} -> {b}", text="any", images="any", media="any", order="permuted")


AXES = ("ts_format", "word_ts_format", "layout", "budget", "packed")


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
    # the A/A arm (`-aa`): the same requests asked again, past the answer cache and the server's
    # prompt cache, for the noise floor a cue's delta is read against
    repeat: bool = False

    @property
    def name(self) -> str:
        name = self.variant + "".join(f"-no_{d}" for d in self.dropped) + ("-aa" if self.repeat else "")
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
            "repeat": self.repeat,
        }

    def changes_from(self, other: object) -> Changes | None:
        """What this stack may change in `other`'s requests when `other` is its parent (one cue
        dropped, one axis moved, the variant itself, or the A/A repeat); None when it is not."""
        if not isinstance(other, Stack) or other == self:
            return None
        if self.repeat or other.repeat:
            return REPEAT if self.repeat and replace(self, repeat=False) == other else None
        axes = [a for a in AXES if getattr(self, a) != getattr(other, a)]
        if self.variant != other.variant:
            # a variant is its own input (the paper's interfaces): compared with the baseline as a whole
            plain = not self.dropped and not other.dropped and not axes
            return Changes(f"variant {self.variant}", "any", "any", "any", "permuted") if plain else None
        gone = [d for d in self.dropped if d not in other.dropped]
        if not axes and len(gone) == 1 and set(other.dropped) < set(self.dropped):
            return CUE_CHANGES[gone[0]]
        if len(axes) == 1 and self.dropped == other.dropped:
            return axis_changes(axes[0], getattr(other, axes[0]), getattr(self, axes[0]))
        return None


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
        raise UsageError(f"variant must be one of {', '.join(VARIANTS)}; found {variant!r}")
    drop = tuple(dict.fromkeys(drop))
    bad = [d for d in drop if d not in DROPPABLE]
    if bad:
        raise UsageError(f"--drop takes {', '.join(DROPPABLE)}; found {', '.join(bad)}")
    anchors = set(VARIANTS[variant]) - set(drop)
    if "asr" not in anchors:
        anchors.discard("word_ts")  # word times live inside the ASR block
    if "frames" not in anchors:
        anchors.discard("frame_ts")
    if layout not in LAYOUTS:
        raise UsageError(f"--layout takes {', '.join(LAYOUTS)}; found {layout!r}")
    ts, words = check_ts_format(ts_format), check_word_format(word_ts_format)
    # a budget picks frames: a stack without them (text, video) has none to pick, and keeps its name
    kept = budget if "frames" in anchors else FrameBudget()
    return Stack(variant, frozenset(anchors), drop, ts, words, layout, kept, packed)


def parse_stack_name(name: str) -> Stack:
    """Inverse of Stack.name: 'full-no_frame_ts@seconds' -> full minus frame_ts, times in seconds."""
    base, *formats = name.split("@")
    repeat = base.endswith("-aa")
    variant, *rest = base.removesuffix("-aa").split("-no_")
    words = next((f.removeprefix("words-") for f in formats if f.startswith("words-")), "json")
    layout = next((f for f in formats if f in LAYOUTS), "benchmark")
    budget = next((b for f in formats if (b := FrameBudget.parse(f)) is not None), FrameBudget())
    told = [f for f in formats if not f.startswith("words-") and f not in (*LAYOUTS, "packed")
            and FrameBudget.parse(f) is None]  # fmt: skip
    stack = make_stack(variant, rest, next(iter(told), "ms"), words, layout, budget, "packed" in formats)
    return replace(stack, repeat=True) if repeat else stack


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
