"""Prompt styles, rebuilt from the options alone, byte for byte as the benchmark sent them."""

from __future__ import annotations

import random
from dataclasses import replace

from avstack.errors import UsageError
from avstack.tasks.egogap.data import OFF_VANTAGE, Item

PROMPT_VERSION = "egogap-1"

_SCENE = (
    "Imagine that the depicted scene is happening in front of you right now.\n"
    "You are physically present at this location and directly seeing the situation with your own eyes.\n\n"
)
_NOTE = (
    "Note:\nAn appropriate action must be possible right now,\n"
    "without needing to walk, run, relocate, spend time moving, or wait for a turn.\n\n"
)
_HEADS = {
    "default": "\n"
    + _SCENE
    + "Your task is to choose the most appropriate action you could take next in this situation.\n\n",
    "egoplan": _SCENE
    + "Select the best answer to the following multiple-choice question based on the image.\n\n"
    + "Considering my current observation in the image, what action should I take next?\n\n",
}
_OPTIONS_TITLE = {"default": "Options:", "egoplan": "Behavior options:"}
# Paper appendix 13. Placed after the Note (a constraint among constraints) and before the
# options, so the options and the answer format stay the last thing the model reads.
EXCLUSION_RULE = (
    "Do not choose an action that another person in the scene is performing; "
    "instead, observe the scene and choose the action that is appropriate for you to take.\n\n"
)
STYLES = ("default", "egoplan", "exclusion")


def _answer_format(letters: list[str]) -> str:
    alts = " | ".join(f'"{c}"' for c in letters)
    return f'Respond with compact JSON and nothing else:\n{{ "answer": {alts}, "rationale": "<=25 words" }}\n'


def build_prompt(item: Item, style: str = "default") -> str:
    """The prompt text for `item` in `style`; default and egoplan equal the benchmark's eval_prompt."""
    if style not in STYLES:
        raise UsageError(f"style must be one of {', '.join(STYLES)}; found {style!r}")
    base = "default" if style == "exclusion" else style
    rule = EXCLUSION_RULE if style == "exclusion" else ""
    options = "".join(f"{letter}) {text}\n" for letter, text, _ in item.options)
    return _HEADS[base] + _NOTE + rule + _OPTIONS_TITLE[base] + "\n" + options + "\n" + _answer_format(item.letters)


def shuffled(item: Item, seed: int) -> Item:
    """Options in a seeded random order (per item), re-lettered; the answer key follows."""
    rng = random.Random(f"{seed}:{item.uid}")
    order = list(range(item.n_options))
    rng.shuffle(order)
    return item.relettered(order)


def drop_off_vantage(item: Item) -> Item:
    """n4 -> n3: remove the off-vantage option and re-letter (n3 items pass through)."""
    keep = [i for i, (_, _, label) in enumerate(item.options) if label != OFF_VANTAGE]
    if len(keep) == item.n_options:
        return item
    return replace(item.relettered(keep), kind=f"mcq{len(keep)}")


def swap_motor(item: Item, pool: list[Item], seed: int) -> Item:
    """Replace one motor option by a correct option drawn from another image's bundle (EgoNormia-style
    control: the distractor is then unrelated to anyone visible). Its label becomes `foreign`."""
    rng = random.Random(f"{seed}:swap:{item.uid}")
    donors = [o for o in pool if o.bundle_uid != item.bundle_uid]
    if not donors:
        raise UsageError(f"item {item.uid}: no item from another bundle to take an option from")
    donor = rng.choice(donors)
    text = next(t for _, t, lab in donor.options if lab == "correct")
    motors = [i for i, (_, _, lab) in enumerate(item.options) if lab.startswith("motor")]
    if not motors:
        return item
    target = rng.choice(motors)
    options = tuple(
        (let, text, "foreign") if i == target else (let, t, lab) for i, (let, t, lab) in enumerate(item.options)
    )
    return replace(item, options=options, eval_prompt=None)
