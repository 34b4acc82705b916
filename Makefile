# TokenRelay developer commands. `make run` then `make test` on a fresh Debian machine.
SHELL := /bin/bash
.PHONY: run stop deps deps-run build test test-only test-api-random lint fmt bench clean

run: deps-run build        ## install what running needs, build, start PostgreSQL + emulator + service, print curl lines
	@scripts/dev-up

stop:                      ## stop the service and the emulator started by `make run`; returns once they have exited (at most 15 s)
	@scripts/dev-down

deps:                      ## install the Debian packages for building, running and testing (idempotent)
	@scripts/install-deps

deps-run:                  ## install the Debian packages for building and running only (idempotent)
	@scripts/install-deps --run

build:                     ## the commit for releaseId (scripts/release-id), then the package and its tests
	@scripts/release-id
	swift build --build-tests --explicit-target-dependency-import-check error

test: deps build           ## install, build once, start PostgreSQL, run every test, scan the test logs
	@scripts/pg-local start >/dev/null
	@rm -rf .build/test-logs
	@status=0; TOKENRELAY_TEST_LOG_DIR="$$PWD/.build/test-logs" TOKENRELAY_TEST_DATABASE_URL="$$(scripts/pg-local url)" \
		TOKENRELAY_BIN_DIR="$$(swift build --show-bin-path)" TOKENRELAY_TEST_PYTHON_BIN="$$(scripts/python-tools)" \
		swift test --skip-build || { status=1; echo "PostgreSQL's log (scripts/pg-local problems):"; scripts/pg-local problems; }; \
		scripts/scan-test-logs .build/test-logs || status=1; exit $$status
	@scripts/check-deploy
	@"$$(scripts/python-tools)/python" scripts/openapi-check --lint   # an example on every response of openapi.yaml, each matching its schema
	@scripts/schemathesis      # a pinned schemathesis against the live service, seeds in scripts/schemathesis-seeds; about 2 minutes
	@scripts/lint --check

test-api-random: build      ## a longer schemathesis run with a new seed (about 15 minutes); a failure's seed joins scripts/schemathesis-seeds
	@scripts/schemathesis --random

lint:
	@scripts/lint --check

fmt:
	@scripts/lint --fix

bench: deps                ## wrk against the running service vs nginx (see bench/README.md)
	@bench/run

clean:
	rm -rf .build
