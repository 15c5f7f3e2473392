# avstack — common tasks. `make setup` once, then `make demo` / `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
RUN := $(BIN)/avstack

.PHONY: setup test check bench demo docs clean

$(BIN)/avstack: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[asr-offline,dev,ray]'
	rm -rf avstack.egg-info  # a build leftover that would shadow the installed metadata (inspect's task names)
	touch $(BIN)/avstack

setup: $(BIN)/avstack

test: setup
	$(BIN)/python -m pytest -q

check: setup
	$(BIN)/ruff check src cli tests benchmarks
	$(BIN)/mypy src cli

# The documentation site (MkDocs Material + mkdocstrings) into site/; --strict: a broken link or
# reference fails the build. Opens from file://.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet
	@echo "site: site/index.html"

bench: setup
	$(BIN)/python benchmarks/perf.py
	$(BIN)/python benchmarks/asr_timing.py

# The main job on the bundled sample data: prepare (frames + audio + ASR), then the
# input-stack ablation with the offline `deixis` baseline, scored and reported.
demo: setup
	$(RUN) prepare samples/ecog_en --out out/demo/prepared --anchors full --asr-model tiny.en --lang en
	$(RUN) ablate out/demo/prepared --model deixis --drop frame_ts --drop word_ts --out out/demo/ablate
	$(RUN) view out/demo/prepared out/demo/ablate/full out/demo/ablate/full-no_frame_ts out/demo/ablate/full-no_word_ts --out out/demo/site
	@echo "report: out/demo/ablate/report.md"
	@echo "site:   out/demo/site/index.html (opens from file://, no server)"

clean:
	rm -rf out site
