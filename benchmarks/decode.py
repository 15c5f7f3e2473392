"""Decode benchmark: avstack's prepare vs the published sampler vs a bare full PyAV decode.

The decode section of benchmarks/perf.py, kept under this name:

    python benchmarks/decode.py [--gop 30] [--noise 8] [--repeats 3]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perf import main  # noqa: E402

if __name__ == "__main__":
    sys.argv[1:1] = ["--only", "decode", "--json", "benchmarks/decode.json"]
    main()
