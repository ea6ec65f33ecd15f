# asrtrain: every install step lives here, so a fresh clone needs nothing beforehand.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install demo test bench bench-gpu test-gpu clean

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -m pip install -q torch==2.9.1 torchaudio==2.9.1
	$(PY) -m pip install -q -e '.[test]'
	touch $@

install: $(STAMP)

demo: install
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash recipes/synth/run.sh

test: install
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest -q tests

bench: install
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) scripts/bench_train.py
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) scripts/bench_rnn.py
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) scripts/bench_att.py
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) scripts/bench_features.py
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) scripts/bench_strategies.py

# On a machine with CUDA: the gpu-marked tests and the GPU benchmark.
test-gpu: install
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest -q -m gpu tests

bench-gpu: install
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) scripts/bench_gpu.py

clean:
	rm -rf $(VENV) build *.egg-info
