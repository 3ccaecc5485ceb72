# Shortcuts for the commands README.md explains. Root is needed for setup and for the
# network tests (without it those tests are skipped).

VENV ?= .venv

.PHONY: help setup speedups test test-fast ci p4 clean-net lint

help:
	@echo "make setup      install Debian packages and $(VENV) (scripts/setup.sh, as root)"
	@echo "make speedups   compile netsim's and the transport's hot path (python -m speedups build)"
	@echo "make test       run the test suite"
	@echo "make test-fast  the inner loop: the tests neither marked slow nor integration"
	@echo "make ci         what CI runs: set-up, clean-up, tests (.ci/run)"
	@echo "make p4         compile p4/mrc.p4 with p4c (make -C p4)"
	@echo "make clean-net  remove namespaces, links and processes a crashed run left"
	@echo "make lint       shellcheck the scripts, ruby -c the Vagrantfile"

setup:
	bash scripts/setup.sh

speedups:
	$(VENV)/bin/python -m speedups build

test:
	$(VENV)/bin/python -m pytest -q tests

test-fast:
	$(VENV)/bin/python -m pytest -q -m "not slow and not integration" tests

ci:
	bash .ci/run

p4:
	$(MAKE) -C p4

clean-net:
	$(VENV)/bin/mrc-testbed clean

lint:
	shellcheck scripts/setup.sh .ci/run vagrant/provision.sh vagrant/cluster.sh
	ruby -c Vagrantfile
