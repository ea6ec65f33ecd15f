# asrtrain: every install step lives here, so a fresh clone needs nothing beforehand.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# Free space a fresh install needs: the venv with torch's CUDA build is 7.2 GB, and pip unpacks the NVIDIA
# wheels in TMPDIR on the way; an install with 11 GB free ran out (2026-11-27). Without this check a full disk
# fails deep in pip's output. MIN_FREE_GB=0 skips it.
MIN_FREE_GB ?= 12

.PHONY: install demo test test-fast bench bench-gpu test-gpu clean check-space

check-space:
	@for d in "$(CURDIR)" "$${TMPDIR:-/tmp}"; do \
	  free=$$(df -Pk "$$d" | awk 'NR == 2 { print int($$4 / 1048576) }'); \
	  if [ "$$free" -lt "$(MIN_FREE_GB)" ]; then \
	    echo "make: $$d has $$free GB free; installing torch and the venv needs about $(MIN_FREE_GB) GB" \
	      "(fix: free disk space, or run with MIN_FREE_GB=0 to try anyway)" >&2; exit 1; \
	  fi; \
	done

$(STAMP): setup.cfg pyproject.toml
	@$(MAKE) --no-print-directory check-space  # only when installing: an installed tree needs no space
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -m pip install -q torch==2.9.1 torchaudio==2.9.1
	$(PY) -m pip install -q -e '.[test]' --config-settings editable_mode=compat  # a path line in site-packages: no import hook to run at every start-up (12 ms of site's 15)
	touch $@

install: $(STAMP)

demo: install
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash recipes/synth/run.sh

test: install
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest -q tests

# Everything but the tests that start learners or subprocesses (marked slow): for the edit-test loop.
test-fast: install
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest -q -m "not slow" tests

bench: install
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) scripts/bench_train.py
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) scripts/bench_rnn.py
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) scripts/bench_att.py
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) scripts/bench_att.py --compare frontend
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) scripts/bench_features.py
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) scripts/bench_strategies.py

# On a machine with CUDA: the gpu-marked tests and the GPU benchmark.
test-gpu: install
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest -q -m gpu tests

bench-gpu: install
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) scripts/bench_gpu.py

clean:
	rm -rf $(VENV) build *.egg-info
