# scalebench: `make demo` runs one benchmark end to end; `make test` runs the test suite.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STATE := $(CURDIR)/.state
export SCALEBENCH_HOME ?= $(STATE)
export AIRFLOW_HOME ?= $(STATE)/airflow
export AIRFLOW__CORE__DAGS_FOLDER := $(CURDIR)/dags
export AIRFLOW__CORE__PLUGINS_FOLDER := $(CURDIR)/plugins
export AIRFLOW__CORE__LOAD_EXAMPLES := False
export AIRFLOW__CORE__EXECUTOR := LocalExecutor
export AIRFLOW__CORE__PARALLELISM := 4
export GX_ANALYTICS_ENABLED := false
# benchmark:repeats, each run at 1 and 2 devices (smoke profile); make demo BENCHMARKS="..." narrows it
DEMO_BENCHMARKS ?= resnet50_keras_cifar10:2 unet_torch_voc2007:2 frcnn_tf_voc2007:1 frcnn_mmdet_voc2007:1 \
                   maskrcnn_mmdet_voc2012:1 msrcnn_mmdet_voc2012:1
BENCHMARKS ?= $(DEMO_BENCHMARKS)

.PHONY: lint ui-vendor airflow-units images-gpu images-gpu-check bench bench-regressions drills airflow-restart gpu-check gpu-check-wheels help venv docker images browser airflow-db airflow airflow-stop airflow-status secrets stack-images stack stack-down gpu-worker e2e demo test lock clean
help:
	@echo "make demo   - run the six benchmarks (smoke, 1 and 2 devices) in Airflow, then the report; BENCHMARKS=\"id[:repeats] ...\" narrows it"
	@echo "make test   - run the whole test suite (sets up what it needs)"
	@echo "make lint   - ruff and mypy over the code (src/, the kit and the trainers, DAGs, plugins, bench/)"
	@echo "make images - build the CPU training images (offline base, layer cache)"
	@echo "make images-gpu - the four GPU images (no GPU needed; TORCH_CUDA_ARCH_LIST, MAX_JOBS, GPU_BASE_IMAGE, CUDA_VERSION)"
	@echo "make images-gpu-check - each GPU image checked on CPU: CUDA build info, mmcv's CUDA ops, every trainer's smoke cell"
	@echo "make airflow - run Airflow as a service on this machine (UI, scheduler, nightly runs); make airflow-stop"
	@echo "make airflow-units - the same components as systemd units (survive a reboot), verified with systemd-analyze"
	@echo "make secrets, make stack - the distributed deployment (docker-compose: Celery, PostgreSQL, Redis); make stack-down"
	@echo "make e2e    - bring the stack up and drive it end to end (REST, browser, a killed worker), then tear down"
	@echo "make bench  - the orchestrator's own figures: overhead vs a bare docker loop, GPU packing, report scale, regression detectors"
	@echo "make bench-regressions - our regression detector vs Apache Otava and a conbench-style z-score, on simulated nights; then every message of a regression's life scored (bench/lifecycle.py)"
	@echo "make drills - fault drills and security checks; rewrites docs/reliability.md"
	@echo "make gpu-check - on a GPU host: NVML pre-flight, the UNet trainer under torchrun with NCCL, NVML sampling (in scalebench/torch:gpu where Docker is; else natively: make gpu-check-wheels first, here)"
	@echo "make ui-vendor - refresh the committed chart script (uPlot) from the npm registry as web/package-lock.json pins it"

UV_VERSION := 0.13.9
UV = $(BIN)/uv pip install -q --python $(BIN)/python
$(BIN)/.installed: requirements.lock pyproject.toml containers/kit/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# uv installs the same pinned lock from PyPI in about a quarter of pip's time (docs/testing.md)
	$(BIN)/pip install -q "uv==$(UV_VERSION)"
	@# byte-compiled at install: where PYTHONDONTWRITEBYTECODE is set (as on this runner) nothing is cached later
	$(UV) --compile-bytecode --upgrade pip wheel "setuptools<81"
	$(UV) --compile-bytecode -r requirements.lock
	$(UV) --no-deps -e containers/kit -e .
	touch $@

UI_VENDOR := src/scalebench/orchestration/ui/static/vendor
# the history pages' charts (uPlot) are committed in $(UI_VENDOR) with their license and SHA256SUMS
# (a test checks them), so a Python install needs no npm; after changing web/package.json, refresh
# them from the npm registry as pinned by web/package-lock.json (integrity-checked by npm ci)
ui-vendor:
	@command -v npm >/dev/null || { echo "installing npm (Debian package)"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null; }
	cd web && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	cp web/node_modules/uplot/dist/uPlot.iife.min.js web/node_modules/uplot/dist/uPlot.min.css web/node_modules/uplot/LICENSE $(UI_VENDOR)/
	cd $(UI_VENDOR) && sha256sum LICENSE uPlot.iife.min.js uPlot.min.css > SHA256SUMS

venv: $(BIN)/.installed

# ruff: pyflakes, pycodestyle and bugbear; mypy: the typed records and configs (settings in pyproject.toml)
lint: venv
	$(BIN)/ruff check src containers dags plugins bench
	$(BIN)/mypy

docker:
	containers/ensure-docker.sh

images: docker venv  # every stack of include/configs/stacks.yaml, each after the stack it is built FROM
	@for stack in $$($(BIN)/scalebench stacks --build-order); do containers/build.sh $$stack cpu || exit 1; done

images-gpu: docker venv  # the GPU variants, here or on a GPU host (PyPI and Debian only; TORCH_CUDA_ARCH_LIST, MAX_JOBS, GPU_BASE_IMAGE, CUDA_VERSION)
	containers/build-gpu.sh

images-gpu-check: venv airflow-db  # every GPU image checked on CPU: CUDA build info, mmcv's CUDA ops, each trainer's smoke cell
	SCALEBENCH_GPU_IMAGES=all $(BIN)/python -m pytest -q -s -p no:cacheprovider -m gpu_image tests/integration/images/test_gpu_images.py $(PYTEST_ARGS)

browser:  # Debian's headless Chromium + driver, for the UI test
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && [ -f /etc/debian_version ]; then \
	    echo "installing chromium and chromium-driver (Debian packages)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	  else echo "browser: install Chromium and ChromeDriver to run the UI test"; fi; \
	fi

airflow-db: venv
	@mkdir -p $(AIRFLOW_HOME) $(STATE)
	$(BIN)/airflow db migrate > $(STATE)/airflow-migrate.log 2>&1 || { tail -20 $(STATE)/airflow-migrate.log; exit 1; }
	$(BIN)/scalebench db upgrade
	$(BIN)/scalebench pools --apply

airflow: venv images airflow-db  # api-server, scheduler, dag-processor, triggerer; prints the login
	$(BIN)/python deploy/local/airflow_service.py start

airflow-units: venv images airflow-db  # systemd units for the same components (a GPU machine survives a reboot)
	$(BIN)/python deploy/local/airflow_service.py units $(STATE)/systemd
	@if command -v systemd-analyze >/dev/null; then \
	  systemd-analyze verify $(STATE)/systemd/scalebench-airflow* && echo "systemd-analyze verify: ok"; \
	else echo "systemd-analyze not found: units written, not verified"; fi

airflow-stop:
	@if [ -x $(BIN)/python ]; then $(BIN)/python deploy/local/airflow_service.py stop; fi

airflow-restart:  # one component, e.g. make airflow-restart COMPONENT=scheduler; the others keep running
	$(BIN)/python deploy/local/airflow_service.py restart $(COMPONENT)

airflow-status:
	$(BIN)/python deploy/local/airflow_service.py status

secrets:  # .env for docker-compose.yaml with fresh random secrets (kept if it exists)
	deploy/make-secrets.sh

stack-images: docker images
	@[ -f .env ] || { echo "no .env: run make secrets first"; exit 1; }
	deploy/build-images.sh

# the Airflow containers' cpuset: the cores no cell of this host's queues is pinned to (empty: all)
ORCHESTRATOR_CPUS = $$([ -x $(BIN)/python ] && $(BIN)/python deploy/local/airflow_service.py cores $${SCALEBENCH_WORKER_QUEUES:-default})

stack: stack-images  # control host: PostgreSQL, Redis, Airflow (Celery) and this host's worker
	SCALEBENCH_ORCHESTRATOR_CPUS=$(ORCHESTRATOR_CPUS) deploy/stack.sh up

stack-down:
	deploy/stack.sh down

gpu-worker: docker  # on a GPU host: its Celery worker (CONTROL_HOST and SCALEBENCH_WORKER_QUEUES set)
	SCALEBENCH_ORCHESTRATOR_CPUS=$(ORCHESTRATOR_CPUS) \
	  deploy/stack.sh compose -f docker-compose.yaml -f deploy/gpu-host.compose.yaml up -d --no-deps airflow-worker

# e2e: the stack on ResNet50 + a failing "drill" benchmark, with the task heartbeat timeout and
# the lease TTL lowered so that the killed-worker drill resolves in minutes, not the defaults' 5 + 2
E2E_ENV := SCALEBENCH_CONFIGS=$(STATE)/e2e-configs AIRFLOW_TASK_HEARTBEAT_TIMEOUT=60 SCALEBENCH_LEASE_TTL_S=30
e2e: venv browser
	@[ -f .env ] || deploy/make-secrets.sh
	$(BIN)/python -m tests.support.drill_configs $(STATE)/e2e-configs
	$(E2E_ENV) $(MAKE) stack
	SCALEBENCH_STACK_ENV=$(CURDIR)/.env $(BIN)/python -m pytest -q -s -p no:cacheprovider -m stack tests/system/test_stack.py $(PYTEST_ARGS); \
	  rc=$$?; $(E2E_ENV) deploy/stack.sh down; \
	  left=$$(docker ps -aq --filter label=org.scalebench.lease; docker ps -aq --filter label=com.docker.compose.project=scalebench); \
	  [ -z "$$left" ] || { echo "left behind: $$left"; rc=1; }; exit $$rc

demo: venv images airflow-db
	@start=$$(date +%s); \
	for entry in $(BENCHMARKS); do \
	  b=$${entry%%:*}; r=$${entry##*:}; [ "$$r" != "$$entry" ] || r=1; \
	  log=$(STATE)/demo-$$b.log; t0=$$(date +%s); \
	  $(BIN)/scalebench data $$b --profile smoke > /dev/null && \
	  $(BIN)/airflow dags test scalebench_$$b -c "{\"gpu_counts\": [1, 2], \"repeats\": $$r, \"profile\": \"smoke\", \"seed\": 0}" > $$log 2>&1 \
	    || { grep -E "ERROR|failed|Error" $$log | tail -20; echo "demo DAG run of $$b failed; full log: $$log"; exit 1; }; \
	  grep -q "DagRun Finished.*state=success" $$log \
	    || { grep -E "DagRun Finished|cells have no valid result" $$log | tail -3; echo "demo DAG run of $$b did not succeed; full log: $$log"; exit 1; }; \
	  echo "DAG run scalebench_$$b: success in $$(( $$(date +%s) - t0 )) s"; \
	  $(BIN)/scalebench results --benchmark $$b | tail -n $$(( 2 * r )); \
	done; \
	$(BIN)/airflow dags test scalebench_allreduce > $(STATE)/demo-allreduce.log 2>&1 \
	  && grep -q "DagRun Finished.*state=success" $(STATE)/demo-allreduce.log \
	  || { tail -20 $(STATE)/demo-allreduce.log; echo "the all-reduce sweep failed; full log: $(STATE)/demo-allreduce.log"; exit 1; }; \
	grep -oE "[a-z0-9_-]+ at [0-9]+ devices \((gloo|nccl)\): .*" $(STATE)/demo-allreduce.log | sort -u; \
	$(BIN)/scalebench report && \
	echo "demo took $$(( $$(date +%s) - start )) s (DAG logs: $(STATE)/demo-<benchmark>.log)"

# the orchestrator's own cost, measured side by side in one run (ratios printed, never asserted)
OTAVA_VENV := $(STATE)/otava-venv
OTAVA_VERSION := 0.8.0
$(OTAVA_VENV)/.installed:  # Apache Otava pins numpy 2.2 / scipy 1.16 and pulls cloud clients: its own venv
	test -x $(OTAVA_VENV)/bin/python || $(PYTHON) -m venv $(OTAVA_VENV)
	$(OTAVA_VENV)/bin/pip install -q "apache-otava==$(OTAVA_VERSION)"
	touch $@

bench-regressions: venv $(OTAVA_VENV)/.installed  # our detector vs Apache Otava and a conbench-style z-score
	$(BIN)/python -u bench/regressions.py
	$(BIN)/python -u bench/lifecycle.py

bench: venv images airflow-db bench-regressions
	$(BIN)/python -u bench/overhead.py
	$(BIN)/python -u bench/packing.py --policies packed
	$(BIN)/python -u bench/packing.py --policies packed,exclusive --benchmarks 1
	$(BIN)/python -u bench/report_scale.py

DRILL_ROWS := $(STATE)/drill-rows.jsonl
drills: venv images airflow-db browser  # every drill (tests/ and bench/drills/), then docs/reliability.md from their rows
	@rm -f $(DRILL_ROWS) $(DRILL_ROWS).expected
	SCALEBENCH_DRILL_ROWS=$(DRILL_ROWS) $(BIN)/python -m pytest -q -p no:cacheprovider -m drill tests bench/drills $(PYTEST_ARGS); \
	  rc=$$?; $(BIN)/python bench/drills/render.py $(DRILL_ROWS) docs/reliability.md || rc=1; exit $$rc

gpu-check-wheels:  # here, with PyPI: the kit's dependencies for a GPU host without network
	deploy/gpu-check/fetch-wheels.sh

gpu-check:  # on a GPU host: NVML pre-flight, UNet under torchrun/NCCL, NVML sampling; in the built GPU image where Docker is, else natively
	deploy/gpu-check/run.sh $(or $(GPU_CHECK_OUT),$(STATE)/gpu-check)

# each step of make test timed into $(PHASES) (seconds; .ci/run prints them): what outside pytest costs
PHASES := $(STATE)/test-phases.txt
TEST_WORKERS ?= 2  # pytest-xdist workers, one per core; a unit (module, tests/system) runs whole on one (tests/support/workers.py)
timed = s=$$(date +%s); $(2); rc=$$?; echo "$(1) $$(( $$(date +%s) - s )) s" >> $(PHASES); exit $$rc
test:
	@mkdir -p $(STATE) && rm -f $(PHASES) $(STATE)/machine.txt
	@$(call timed,venv,$(MAKE) --no-print-directory venv)
	@$(call timed,docker engine,$(MAKE) --no-print-directory docker)
	@$(call timed,CPU images,$(MAKE) --no-print-directory images)
	@$(call timed,browser,$(MAKE) --no-print-directory browser)
	@$(call timed,Airflow and results databases,$(MAKE) --no-print-directory airflow-db)
	@# the PyTorch GPU image, built and checked on CPU (tests/integration/images/test_gpu_images.py)
	@$(call timed,PyTorch GPU image,containers/build.sh torch gpu)
	@$(call timed,PostgreSQL image,deploy/build-images.sh postgres)  # the lease and store tests on PostgreSQL
	@$(call timed,Docker Compose,deploy/stack.sh install)  # a test reads the stack's resolved config
	@python3 .ci/machine.py cpu > $(STATE)/cpu-before.txt  # how busy the cores were while pytest ran
	@s=$$(date +%s); $(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) $(PYTEST_ARGS); rc=$$?; \
	  echo "pytest $$(( $$(date +%s) - s )) s" >> $(PHASES); \
	  echo "pytest's CPU busy $$(python3 .ci/machine.py busy $(STATE)/cpu-before.txt) %" > $(STATE)/machine.txt; exit $$rc

lock:
	rm -rf /tmp/scalebench-lock && $(PYTHON) -m venv /tmp/scalebench-lock
	/tmp/scalebench-lock/bin/pip install -q -r requirements.in
	(echo "# Resolved from requirements.in with Python 3.11 on Debian 12 x86_64 (make lock). Installed by make."; \
	 /tmp/scalebench-lock/bin/pip freeze --exclude-editable) > requirements.lock

clean:
	rm -rf $(STATE)
