"""Where a prepare's memory goes: its RSS every 20 ms beside every stage it enters and leaves and
every model it loads, in one process (`--workers 1`), so a peak can be put on its window, stage
and model. Written to OUT/memtrace.json; the events and the peak are printed.

    python benchmarks/memtrace.py IN OUT [prepare options...]
    python benchmarks/memtrace.py read/ out/ --anchors full --fps 0.5 --asr-model tiny.en --lang en

(#69: a 5-minute continuous read peaked at 1,217 MB with the transcriber and the fallback's base
side by side, found this way; 922 MB with one model at a time.)
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

T0 = time.perf_counter()
EVENTS: list[tuple[float, str, int]] = []
SAMPLES: list[tuple[float, int]] = []


def rss_mb() -> int:
    return int(re.search(r"VmRSS:\s+(\d+)", Path("/proc/self/status").read_text()).group(1)) // 1024  # type: ignore[union-attr]


def mark(what: str) -> None:
    EVENTS.append((round(time.perf_counter() - T0, 3), what, rss_mb()))


def instrument() -> None:
    """Stage marks and model loads, patched in before the library's modules import them."""
    import avstack.profiling as profiling

    real_stage = profiling.stage

    @contextmanager
    def stage(name: str) -> Iterator[None]:
        mark("enter " + name)
        with real_stage(name):
            yield
        mark("leave " + name)

    profiling.stage = stage  # type: ignore[assignment]
    from avstack.asr import models

    real_loaded, real_seeded = models._loaded, models.seeded_model

    def loaded(*args: Any) -> Any:
        mark(f"load {args[0]}")
        model = real_loaded(*args)
        mark(f"loaded {args[0]}")
        return model

    def seeded(*args: Any, **kwargs: Any) -> Any:
        mark("load seeded")
        return real_seeded(*args, **kwargs)

    models._loaded = loaded  # type: ignore[assignment]
    models.seeded_model = seeded  # type: ignore[assignment]
    from avstack.asr import whisper

    whisper.seeded_model = seeded  # type: ignore[assignment]


def sample() -> None:
    while True:
        SAMPLES.append((round(time.perf_counter() - T0, 3), rss_mb()))
        time.sleep(0.02)


def main() -> None:
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    src, out, extra = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
    instrument()
    threading.Thread(target=sample, daemon=True).start()
    from avstack_cli.app import main as cli

    sys.argv = ["avstack", "prepare", src, "--out", str(out), "--workers", "1", *extra]
    try:
        cli()
    except SystemExit:
        pass
    peak = max(SAMPLES, key=lambda s: s[1])
    for t, what, rss in EVENTS:
        print(f"{t:9.2f} {rss:6d} MB  {what}")
    print(f"peak {peak[1]} MB at {peak[0]} s")
    (out / "memtrace.json").write_text(json.dumps({"peak": peak, "events": EVENTS, "samples": SAMPLES}))


if __name__ == "__main__":
    main()
