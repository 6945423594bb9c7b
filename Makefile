# The two commands of the README, plus bench. Everything installs into .venv from pyproject.toml.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: serve test fuzz bench soak migrate clean

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
	$(BIN)/pytest -n 3 --dist loadfile --no-loadscope-reorder

# schemathesis against a running server, both API versions: the suite's test of tests/fuzz/, with
# far more cases per operation (docs/openapi.md, "Fuzzing"). REBILL_FUZZ_EXAMPLES=N changes how
# many, REBILL_FUZZ_SEED=N the seed.
fuzz: $(STAMP)
	REBILL_FUZZ_EXAMPLES=$${REBILL_FUZZ_EXAMPLES:-100} $(BIN)/pytest tests/fuzz/test_schemathesis.py -s

# wrk is a C load generator from Debian's packages; the benchmark needs nothing else.
# The PostgreSQL part (issue 18's targets: reads, two API processes, two workers) runs against
# REBILL_BENCH_POSTGRES, by default the local server; it is skipped, saying so, when none answers.
REBILL_BENCH_POSTGRES ?= postgresql://root@127.0.0.1:5432/postgres
bench: $(STAMP)
	command -v wrk >/dev/null || (apt-get update -qq && apt-get install -y -qq wrk)
	$(BIN)/python -m bench.run
	@if $(BIN)/python -c "import psycopg,sys; psycopg.connect(sys.argv[1], connect_timeout=3).close()" \
		"$(REBILL_BENCH_POSTGRES)" 2>/dev/null; then \
		$(BIN)/python -m bench.postgres --database "$(REBILL_BENCH_POSTGRES)"; \
	else echo "bench: no PostgreSQL at $(REBILL_BENCH_POSTGRES): its part is skipped"; fi

# The soak of issue 18 (bench/soak.py): 10 minutes of mixed load on 2 API processes and 2 workers
# on a new PostgreSQL database (dropped at the end); fails on a 5xx, a lost or doubled charge or
# delivery, or a process whose memory grew 10% after the warm-up. Past 400 paying subscribers (the
# warm-up) a new one retires the oldest of them, so the billing days keep one size; `--steady 0` lets it grow.
soak: $(STAMP)
	$(BIN)/python -m bench.soak --minutes 10

clean:
	rm -rf $(VENV) var .pytest_cache
