"""Word-timing accuracy: speech with known word times (cases: synthesized; real: hand-aligned
recordings) and the scoring (scoring). Used by tests and benchmarks/asr_timing.py.

May import: avstack.asr, avstack.media, avstack.synthetic.
"""

from avstack.asr.evaluation.cases import (
    FESTIVAL_VOICES,
    FILLER_WORDS,
    Case,
    DisfluentCase,
    connected_case,
    disfluent_case,
    festival_available,
    festival_utterance,
    make_case,
    noise_clips,
    sentence,
    templates,
)
from avstack.asr.evaluation.gcin import INSTRUCTIONS as GCIN_INSTRUCTIONS
from avstack.asr.evaluation.gcin import available as gcin_available
from avstack.asr.evaluation.gcin import gcin_case, gcin_cases
from avstack.asr.evaluation.real import REAL_NAMES, praatio_examples, real_cases, shared_take, textgrid_words
from avstack.asr.evaluation.scoring import (
    CaseScore,
    after_filler_begins,
    after_filler_share,
    correct_words,
    evaluate,
    plain_words,
    reliability,
    score_case,
    summarize,
    tail_causes,
    utterances,
)

__all__ = [
    "FESTIVAL_VOICES", "FILLER_WORDS", "GCIN_INSTRUCTIONS", "REAL_NAMES", "Case", "CaseScore", "DisfluentCase",
    "after_filler_begins", "after_filler_share", "connected_case", "correct_words", "disfluent_case", "evaluate",
    "festival_available", "festival_utterance", "gcin_available", "gcin_case", "gcin_cases", "make_case",
    "noise_clips", "plain_words", "praatio_examples", "real_cases", "reliability", "score_case", "sentence",
    "shared_take", "summarize", "tail_causes", "templates", "textgrid_words", "utterances",
]  # fmt: skip
