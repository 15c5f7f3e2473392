"""Run in an interpreter that has stable-ts (it pulls torch; keep it out of avstack's environment):

    PEER_PYTHON benchmarks/peers/stable_ts_words.py MODEL_DIR JOBS.json OUT.json [LANG]

JOBS.json lists .npy files of 16 kHz mono float32 audio; OUT.json gets, per path, stable-ts's words (text, begin and
end in ms, probability) from `load_faster_whisper(MODEL_DIR).transcribe(...)` with stable-ts's
defaults (silence suppression, regrouping), in LANG (default English), beam 5, one CPU thread: the same model and
decoding width as avstack's default. A clip it fails on (faster-whisper's word alignment raised an
IndexError on a disfluent take under stable-ts's settings, not every run) gets no words and is
listed under "failed"."""

import json
import sys
import time

import numpy as np
import stable_whisper


def main() -> None:
    model_dir, jobs, out = sys.argv[1:4]
    language = sys.argv[4] if len(sys.argv) > 4 else "en"
    model = stable_whisper.load_faster_whisper(model_dir, device="cpu", compute_type="int8", cpu_threads=1)
    results, seconds, failed = {}, 0.0, {}
    for path in json.load(open(jobs)):
        audio = np.load(path).astype(np.float32)
        t0 = time.perf_counter()
        try:
            result = model.transcribe(audio, language=language, beam_size=5, verbose=None)
        except Exception as exc:  # noqa: BLE001 - a clip the peer cannot do is its failure, counted
            failed[path] = f"{type(exc).__name__}: {exc}"
            results[path] = []
            continue
        finally:
            seconds += time.perf_counter() - t0
        results[path] = [
            {"text": w.word, "begin_ms": round(w.start * 1000), "end_ms": round(w.end * 1000), "prob": w.probability}
            for w in result.all_words()
        ]
    found = {"version": stable_whisper.__version__, "seconds": seconds, "words": results, "failed": failed}
    json.dump(found, open(out, "w"))


if __name__ == "__main__":
    main()
