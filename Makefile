# SpecChat: `make run` and `make test` do all set-up on a fresh machine.
SHELL := /bin/bash
.DEFAULT_GOAL := run

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
LLAMA_VERSION ?= 0.3.36

# llama.cpp backend: CUDA where nvcc AND an NVIDIA GPU are present (nvcc alone, with no GPU
# to run on, would only make a 40-minute build), Metal on Apple silicon, CPU otherwise.
UNAME_S := $(shell uname -s)
UNAME_M := $(shell uname -m)
HAS_NVCC := $(shell command -v nvcc >/dev/null 2>&1 && echo yes)
HAS_GPU := $(shell nvidia-smi -L 2>/dev/null | grep -q GPU && echo yes)
ifeq ($(UNAME_S)-$(UNAME_M),Darwin-arm64)
  BACKEND ?= metal
  LLAMA_CMAKE_ARGS ?= -DGGML_METAL=on
else ifeq ($(HAS_NVCC)-$(HAS_GPU),yes-yes)
  BACKEND ?= cuda
  LLAMA_CMAKE_ARGS ?= -DGGML_CUDA=on
else
  BACKEND ?= cpu
  LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=on
endif
# Every build carries llama.cpp's RPC backend (GGML_RPC): `specchat rpc-server` offers this
# machine's devices to another, and `--rpc` places a target's layers on other machines.
LLAMA_BUILD_ARGS = $(LLAMA_CMAKE_ARGS) -DGGML_RPC=on
# Built wheels are kept per backend and build flags outside the checkout, so a fresh clone (and
# CI) installs llama-cpp-python in seconds after the first build, a CPU wheel is never taken for
# CUDA, and a wheel built with other flags (one without RPC) is never reused: the folder's name
# ends in a hash of the version and the CMake flags, and so does the venv's stamp.
LLAMA_BUILD_KEY := $(shell printf '%s' "$(LLAMA_VERSION) $(LLAMA_BUILD_ARGS)" | sha256sum | cut -c1-10)
WHEELHOUSE ?= $(HOME)/.cache/specchat/wheelhouse/$(BACKEND)-$(LLAMA_BUILD_KEY)

# `make package` bundles a llama.cpp that runs on any x86-64 CPU: no -march=native, every CPU
# kernel variant built as its own library (libggml-cpu-haswell.so, ...-skylakex.so, ...) and
# the best one for the CPU loaded at start. It has its own virtual environment and wheelhouse,
# so .venv's native build (fastest here, for `make run`) stays as it is. NATIVE=1 bundles
# .venv's build instead: for this machine only. GGML_BACKEND_DIR puts the variants into
# llama_cpp/lib beside libllama (by default they would land in site-packages/bin); :STRING
# keeps CMake from making that relative path absolute (it would point into the build tree).
NATIVE ?=
PACKAGE_VENV ?= .venv-package
PORTABLE_BACKEND ?= cpu-portable
PORTABLE_CMAKE_ARGS ?= -DGGML_NATIVE=off -DGGML_BACKEND_DL=on -DGGML_CPU_ALL_VARIANTS=on \
  -DGGML_BACKEND_DIR:STRING=llama_cpp/lib

STAMP_LLAMA = $(VENV)/.llama-$(LLAMA_VERSION)-$(BACKEND)-$(LLAMA_BUILD_KEY)
STAMP_APP := $(VENV)/.app-installed
STAMP_TEST := $(VENV)/.test-installed
STAMP_SYS := $(VENV)/.system-deps
STAMP_PACKAGE := $(PACKAGE_VENV)/.package-installed

.PHONY: run test test-slow test-package llama-tools gpu-check-payload gpu-check lint bench soak fetch package package-env \
  install-desktop uninstall-desktop clean help

help:
	@echo "make run      set up, fetch the default model pair, open SpecChat"
	@echo "make test     set up with test extras, run the suite (a few minutes)"
	@echo "make test-slow         the long checks: soak, stress, real-pair sessions"
	@echo "make test-package      build the portable llama.cpp and the bundle, check them"
	@echo "make llama-tools       build spec-oracle and chat-oracle (llama.cpp's own speculative loop"
	@echo "                       and chat templates and parsers, for test-package) and llama-server"
	@echo "                       (the peer of specchat bench --peers)"
	@echo "make gpu-check-payload the GPU check's trimmed llama.cpp and wheels (build/gpu-check/payload)"
	@echo "make gpu-check         the GPU check (docs/gpu.md): CUDA build, costs, replays, exactness"
	@echo "make lint     ruff + mypy"
	@echo "make bench    benchmark every drafting mode on the default pair"
	@echo "make soak     generate for SOAK_MINUTES and report memory over time"
	@echo "make package  build the one-file bundle for any x86-64 CPU (dist/specchat)"
	@echo "              NATIVE=1: with .venv's llama.cpp, tuned to this machine's CPU"
	@echo "make install-desktop  menu entry + icons (+ dist/specchat) into ~/.local"

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip wheel

$(STAMP_SYS): packaging/system-deps.sh | $(PY)
	@bash packaging/system-deps.sh
	@touch $@

$(STAMP_LLAMA): | $(PY)
	@echo "llama.cpp backend: $(BACKEND) ($(LLAMA_BUILD_ARGS)), wheelhouse $(WHEELHOUSE)"
	@if ! ls $(WHEELHOUSE)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1; then \
	  echo "Building llama-cpp-python $(LLAMA_VERSION) for $(BACKEND) (one time, ~10 min on 2 cores)"; \
	  mkdir -p $(WHEELHOUSE); \
	  CMAKE_ARGS="$(LLAMA_BUILD_ARGS)" $(PIP) wheel --no-cache-dir --no-deps -w $(WHEELHOUSE) \
	    llama-cpp-python==$(LLAMA_VERSION); \
	else echo "Using cached llama-cpp-python wheel from $(WHEELHOUSE)"; fi
	$(PIP) install -q --no-deps --force-reinstall $(WHEELHOUSE)/llama_cpp_python-$(LLAMA_VERSION)-*.whl
	@rm -f $(VENV)/.llama-*
	@touch $@

$(STAMP_APP): pyproject.toml $(STAMP_LLAMA) $(STAMP_SYS)
	$(PIP) install -q -e .
	@touch $@

# `make test` builds one llama.cpp, .venv's; the portable one is test-package's alone.
$(STAMP_TEST): pyproject.toml $(STAMP_APP)
	$(PIP) install -q -e ".[dev,bench]"
	@touch $@

# The packaging environment: this Makefile's own rules, run with the portable settings.
$(STAMP_PACKAGE): pyproject.toml
	$(MAKE) --no-print-directory VENV=$(PACKAGE_VENV) BACKEND=$(PORTABLE_BACKEND) \
	  LLAMA_CMAKE_ARGS="$(PORTABLE_CMAKE_ARGS)" package-env

package-env: $(STAMP_APP)
	$(PIP) install -q -e ".[package]"
	@touch $(VENV)/.package-installed

fetch: $(STAMP_APP)
	$(VENV)/bin/specchat models fetch default

run: fetch
	$(VENV)/bin/specchat

# Three suites by what they need: `test` the native build and the default pair; `test-slow`
# the long checks (marked slow); `test-package` the portable build and the bundle (marked
# package), built here and cached like the wheel. CI runs all three.
test: $(STAMP_TEST)
	$(VENV)/bin/specchat models fetch default
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -m "not slow and not package" $(PYTEST_ARGS)

test-slow: $(STAMP_TEST)
	$(VENV)/bin/specchat models fetch default
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -m "slow and not package" $(PYTEST_ARGS)

test-package: $(STAMP_TEST) $(STAMP_PACKAGE) llama-tools gpu-check-payload
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -m package $(PYTEST_ARGS)

# spec-oracle: llama.cpp's own speculative decoding, round by round, built against the
# llama.cpp of llama-cpp-python $(LLAMA_VERSION); the oracle tests (tests/oracle, marked package)
# check SpecChat's drafters against it. Cached per harness source hash in
# ~/.cache/specchat/llama-tools/, like the wheel: later runs only print its path.
# chat-oracle: llama.cpp's chat templates and output parsers (common/chat.h), which record
# tests/fixtures/chat_oracle (tools/record_chat_oracle.py) and check it is current.
# llama-server: llama.cpp's own server from the same source, with .venv's backend flags
# (LLAMA_CMAKE_ARGS), the peer `specchat bench --peers` measures SpecChat against.
llama-tools: | $(PY)
	@LLAMA_VERSION=$(LLAMA_VERSION) PYTHON=$(abspath $(PY)) bash tools/build_llama_tools.sh spec-oracle
	@LLAMA_VERSION=$(LLAMA_VERSION) PYTHON=$(abspath $(PY)) bash tools/build_llama_tools.sh chat-oracle
	@LLAMA_VERSION=$(LLAMA_VERSION) PYTHON=$(abspath $(PY)) LLAMA_CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" \
	  bash tools/build_llama_tools.sh llama-server

# The GPU check (packaging/gpu_check, docs/gpu.md): its payload is made here, where pip
# reaches the package index, cached by hash in ~/.cache/specchat/gpu-check and copied into
# build/gpu-check/payload, the ignored folder a machine without network is given with the tree.
gpu-check-payload: $(STAMP_APP)
	@$(PY) tools/gpu_check_payload.py

GPU_CHECK_ARGS ?=
gpu-check: gpu-check-payload
	$(PY) packaging/gpu_check/run.py $(GPU_CHECK_ARGS)

lint: $(STAMP_TEST)
	$(VENV)/bin/ruff check app tests tools packaging
	$(VENV)/bin/ruff format --check app tests tools packaging
	$(VENV)/bin/mypy

bench: $(STAMP_TEST) fetch
	$(VENV)/bin/specchat bench --pair default --out bench-out $(BENCH_ARGS)

SOAK_MINUTES ?= 10
soak: $(STAMP_TEST)
	$(VENV)/bin/specchat soak --minutes $(SOAK_MINUTES)

ifeq ($(NATIVE),1)
package: $(STAMP_APP)
	$(PIP) install -q -e ".[package]"
	$(VENV)/bin/pyinstaller --noconfirm --clean --distpath dist --workpath build/pyinstaller \
	  packaging/pyinstaller/specchat.spec
else
package: $(STAMP_PACKAGE)
	$(PACKAGE_VENV)/bin/pyinstaller --noconfirm --clean --distpath dist \
	  --workpath build/pyinstaller packaging/pyinstaller/specchat.spec
	$(PACKAGE_VENV)/bin/python packaging/check_instructions.py dist/specchat
endif

# Menu entry, hicolor icons and metainfo (PREFIX=~/.local by default, DESTDIR for staging);
# with a built bundle in dist/ the program itself goes to PREFIX/bin as well.
install-desktop:
	bash packaging/linux/install-desktop.sh $(if $(wildcard dist/specchat),--bin dist/specchat)

uninstall-desktop:
	bash packaging/linux/install-desktop.sh --uninstall

clean:
	rm -rf build dist bench-out .pytest_cache .mypy_cache .ruff_cache
