# Two commands on a fresh clone:
#   make run    create .venv on first use, install ptui and what its main job needs, open the app
#   make test   create .venv with the test extras (and the third-party training libraries the
#               probe is tested against), run the whole test suite
# and, for the inner loop while editing:
#   make test-quick   the same venv, the suite without the tests marked slow, realtime, thirdparty
#                     or e2e (the markers are listed in pyproject.toml)
# All are idempotent: once .venv is up to date with pyproject.toml they go straight to work.
# Options: make run ARGS="--device xavier-agx --speed 60"; make test PYTEST_ARGS="tests/unit -x";
#          JOBS=2 (the default) spreads the tests over two pytest-xdist workers, JOBS=auto one per
#          core, JOBS=0 runs them in this one process;
#          VENV=DIR for another virtual environment, PYTHON=python3.11 for the interpreter.

PYTHON ?= python3.11
VENV ?= .venv
# torch: exactly this pin, the CPU build this machine provides (an unpinned torch pulls GBs of CUDA)
TORCH ?= torch==2.13.0
# A Jetson (L4T): NVIDIA's own torch comes from the system site packages; never install a CPU build.
TEGRA_RELEASE ?= /etc/nv_tegra_release
DT_COMPATIBLE ?= /proc/device-tree/compatible
JETSON ?= $(shell if [ -e $(TEGRA_RELEASE) ] || grep -qas tegra $(DT_COMPATIBLE); then echo yes; fi)

# pytest-xdist workers (0: none, the tests run in this process); loadgroup keeps the tests of one
# xdist_group (the jtop service, one per machine) on one worker.  Two: the CI machine has two cores
# (the whole suite in about half the serial time, also under a load of 10 from other jobs)
JOBS ?= 2
PYTEST := $(VENV)/bin/python -m pytest -q -n $(JOBS) --dist loadgroup
QUICK := -m "not slow and not realtime and not thirdparty and not e2e"

PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --quiet
ifeq ($(JETSON),yes)
VENV_FLAGS := --system-site-packages
RUN_EXTRAS :=
TEST_EXTRAS := [test,scripts]
TORCH_REQ :=
else
VENV_FLAGS :=
RUN_EXTRAS := [train]
TEST_EXTRAS := [train,test,scripts]
TORCH_REQ := $(TORCH)
endif

.PHONY: run test test-quick venv clean

run: $(VENV)/.ptui-run
	$(VENV)/bin/ptui $(ARGS)

test: $(VENV)/.ptui-test
	$(PYTEST) $(PYTEST_ARGS)

test-quick: $(VENV)/.ptui-test
	$(PYTEST) $(QUICK) $(PYTEST_ARGS)

venv: $(VENV)/.ptui-run

$(PY):
	$(PYTHON) -m venv $(VENV_FLAGS) $(VENV)

# the stamps are newer than pyproject.toml and this Makefile once .venv has what they list; the test
# venv is one pip install of everything (a second one for the test extras re-resolved the whole set:
# about 15 s of CI) and holds what `make run` needs too
$(VENV)/.ptui-run: pyproject.toml Makefile | $(PY)
	$(PIP) $(TORCH_REQ) -e ".$(RUN_EXTRAS)"
	@touch $@

$(VENV)/.ptui-test: pyproject.toml Makefile | $(PY)
	$(PIP) $(TORCH_REQ) -e ".$(TEST_EXTRAS)"
	@touch $@ $(VENV)/.ptui-run

clean:
	rm -rf $(VENV) build dist *.egg-info
