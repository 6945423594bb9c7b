# The two commands of the README, plus bench. Everything installs into .venv from pyproject.toml.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: serve test bench migrate clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

serve: $(STAMP)
	$(BIN)/rebill serve

migrate: $(STAMP)
	$(BIN)/rebill migrate

test: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/pytest -n 2 --dist loadfile

# wrk is a C load generator from Debian's packages; the benchmark needs nothing else.
bench: $(STAMP)
	command -v wrk >/dev/null || (apt-get update -qq && apt-get install -y -qq wrk)
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) var .pytest_cache
