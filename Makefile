# Two commands do all set-up on a fresh machine:
#   make demo   create .venv, install stoker; plan, stage, checkpoint, stream, provision
#   make test   create .venv, install stoker + test tools + Azurite, run the tests
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.stoker-installed

.PHONY: demo test test-needs debian-tools chromium cloud-init bench bench-stage bench-stage-flags bench-checkpoint bench-stream bench-measure checkov lint clean

# setup.py builds the one compiled part in place (src/stoker/_native): a changed source rebuilds it.
NATIVE := setup.py $(wildcard src/stoker/_native/*.c src/stoker/_native/*.h)
$(STAMP): pyproject.toml $(NATIVE)
	$(PYTHON) -m venv $(VENV)
	@# playwright (the browser tests' driver) uses Debian's Chromium: never a downloaded one.
	PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 $(BIN)/pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

# checkov (infrastructure-code scanner) in its own venv: it pins many packages of its own.
CHECKOV := .bench/checkov-venv/bin/checkov
$(CHECKOV):
	$(PYTHON) -m venv .bench/checkov-venv
	.bench/checkov-venv/bin/pip install --quiet --disable-pip-version-check 'checkov>=3.2'

checkov: $(CHECKOV)

node_modules/.package-lock.json: package.json
	npm install --no-audit --no-fund --loglevel=error
	touch $@

# Azurite 3.37, the first with Put Block From URL, for the tests and the bench of copies between
# accounts (tests/test_stage_flags.py; they skip without it). Best effort: 3.36+ asks for Node
# 22, though its Blob service ran here on Node 20; the pin above stays on 3.35 for the rest.
AZURITE_NEXT := .bench/azurite-next/node_modules/.bin/azurite-blob
$(AZURITE_NEXT):
	-npm install --prefix .bench/azurite-next --no-audit --no-fund --loglevel=error azurite@3.37.0

# Debian's Chromium, for the report's browser tests (tests/test_report_browser.py), and Debian's
# cloud-init, for its own schema check of cloud-init.yaml (tests/test_node_units.py): installed
# as root (CI is root) when missing, in one apt-get (two at once would fight over dpkg's lock).
# No browser is downloaded from anywhere else.
DEBIAN_TOOLS := chromium cloud-init
debian-tools:
	@missing=""; for tool in $(DEBIAN_TOOLS); do command -v $$tool > /dev/null || missing="$$missing $$tool"; done; \
	test -z "$$missing" || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing > /dev/null; }
chromium cloud-init: debian-tools

demo: $(STAMP) $(CHECKOV)
	@# stoker's bytecode, as an installed package has it: under PYTHONDONTWRITEBYTECODE an
	@# editable install compiles modules it imports late in the middle of the timed steps.
	$(BIN)/python -m compileall -q src > /dev/null
	$(BIN)/stoker plan examples/pretrain-64vm.toml
	$(BIN)/stoker plan --compare examples/finetune-1vm.toml examples/pretrain-64vm.toml examples/llama3-405b-2048vm.toml
	@echo "--- plan: the 2,048-VM job is more than one scale set (one InfiniBand partition): What to change lists each shape it can be deployed as, its step, and the declaration it needs"
	$(BIN)/stoker plan examples/llama3-405b-2048vm.toml
	@echo "--- simulate: the 2,048-VM example run 20 times, event by event: goodput and time lost by cause beside the plan's figures"
	$(BIN)/stoker simulate examples/llama3-405b-2048vm.toml --runs 20
	@echo "--- stage: a generated dataset in .demo/cold (the cold pool) to .demo/fast (the fast tier)"
	$(BIN)/python examples/make_dataset.py .demo/cold
	$(BIN)/stoker stage .demo/cold .demo/fast --hash
	@echo "--- stage again: in sync with what is there, it moves 0 bytes"
	$(BIN)/stoker stage .demo/cold .demo/fast --hash
	$(BIN)/stoker verify .demo/cold .demo/fast
	@echo "--- cache: a Hugging Face snapshot (its files are symlinks into blobs/) into the model cache, whole"
	$(BIN)/stoker cache pull "$$($(BIN)/python examples/hf_snapshot.py .demo/hub)" .demo/models --name tiny
	@echo "--- checkpoint: a training loop saves asynchronously (fast + durable tier), then restores"
	rm -rf .demo/ckpt
	$(BIN)/python examples/train_checkpoint.py .demo/ckpt --record .demo/checkpoint-saves.json
	$(BIN)/stoker checkpoint ls .demo/ckpt/fast --durable .demo/ckpt/durable
	@echo "--- checkpoint on two emulated nodes (2 ranks each, node-local fast tiers): node 1 is evicted (a Scheduled Event served locally), every rank saves and stops; then 3 ranks load from the durable tier"
	$(BIN)/python examples/checkpoint_nodes.py .demo/ckpt-nodes
	$(BIN)/stoker checkpoint ls .demo/ckpt-nodes/node1 --durable .demo/ckpt-nodes/durable
	@echo "--- doctor: is this node fit for GPU training? (says plainly what it lacks)"
	-$(BIN)/stoker doctor
	@echo "--- stream: the staged files and a second set as shards, mixed 0.7 / 0.3, into 4 ranks in 2 data-parallel groups (an emulated accelerator, 20 ms a batch); stop, resume"
	$(BIN)/python examples/make_dataset.py .demo/cold-b --files 120 --mean-kib 64
	$(BIN)/python -m torch.distributed.run --nproc-per-node 4 --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:0 \
		examples/train_stream.py --source .demo/fast --mix .demo/cold-b --dp-size 2 --workers 1 \
		--data .demo/shards --ckpt .demo/stream-ckpt --compute-ms 20 --record .demo/stream-ledger.json
	@echo "--- provision: the 64-VM job fits one scale set (one InfiniBand partition): its deployment in .demo/deploy-64, checked offline"
	rm -rf .demo/deploy-64
	$(BIN)/stoker provision examples/pretrain-64vm.toml --out .demo/deploy-64
	$(BIN)/python examples/validate_deploy.py .demo/deploy-64
	@echo "--- provision refuses a job past one scale set whose shape is not declared: 128 VMs, scale sets of 100 (exit 2, the shapes named)"
	-$(BIN)/stoker provision examples/moe-3d-parallel-128vm.toml --out .demo/refused --placement-group-limit 100
	@echo "--- provision: the 2,048-VM plan, declared on a fabric arranged with Microsoft, as a deployment (ARM, cloud-init, CCWS) in .demo/deploy, validated offline"
	rm -rf .demo/deploy
	$(BIN)/stoker provision examples/llama3-405b-2048vm.toml --out .demo/deploy
	$(BIN)/python examples/validate_deploy.py .demo/deploy
	@echo "--- preflight, offline: what Azure would refuse (limits from the catalog; quota, SKUs, rights, terms and ARM's validation need credentials) and what its Managed Lustre costs left up over an idle weekend"
	$(BIN)/stoker preflight .demo/deploy --offline
	rm -rf .demo/aks && $(BIN)/stoker provision examples/inference-cache.toml --target aks --out .demo/aks --check
	@echo "--- node set-up: the shipped stoker-node on loop devices (stand-in mdadm): scratch through 3 reboots, a missing Lustre keeps the node not ready (root only)"
	$(BIN)/python examples/node_reboots.py .demo/node
	@echo "--- teardown: the end of that run, dry (offline: each step and what it saves per hour)"
	$(BIN)/stoker teardown --dry-run .demo/deploy
	@echo "--- report: the plan, its simulation (when stoker simulate is there) and the measured stream and checkpoint runs, in one HTML file"
	rm -f .demo/simulation.json
	if $(BIN)/stoker simulate --help > /dev/null 2>&1; then \
		$(BIN)/stoker simulate examples/pretrain-64vm.toml --json > .demo/simulation.json; fi
	$(BIN)/stoker report --out .demo/report.html --plan examples/pretrain-64vm.toml \
		$$(test -s .demo/simulation.json && echo --simulation .demo/simulation.json) \
		--measured .demo/stream-ledger.json --measured .demo/stream-ledger-resumed.json \
		--measured .demo/checkpoint-saves.json

# The suite runs in TEST_WORKERS processes (pytest-xdist): each has its own Azurite, ports and
# folders. Most tests wait on subprocesses and sockets, so more workers than cores pays.
TEST_WORKERS ?= 4
TEST_NEEDS := $(STAMP) $(CHECKOV) node_modules/.package-lock.json $(AZURITE_NEXT) debian-tools
test-needs: $(TEST_NEEDS)
# What the tests need is installed side by side (pip, npm and apt wait on different things).
test:
	$(MAKE) --no-print-directory -j5 test-needs
	$(BIN)/python -m pytest -n $(TEST_WORKERS)

# Each script saves bench/results/NAME.json and renders its section; `python bench/render.py
# --write BENCHMARKS.md` renders every section again from the saved results.
bench: $(STAMP) $(CHECKOV)
	$(BIN)/python bench/plan_speed.py --write BENCHMARKS.md
	$(BIN)/python bench/provision_speed.py --write BENCHMARKS.md
	$(BIN)/python bench/simulate_bench.py --write BENCHMARKS.md

# Installs AzCopy and rclone under .bench/ and runs them beside stoker on Azurite (~30 min).
bench-stage: $(STAMP) node_modules/.package-lock.json
	$(BIN)/python bench/stage_bench.py --write BENCHMARKS.md

# A copy between two accounts (Put Block From URL) against the spool, and --bwlimit (~20 min).
bench-stage-flags: $(STAMP) $(AZURITE_NEXT)
	$(BIN)/python bench/stage_flags.py --write BENCHMARKS.md

# Checkpointer beside torch.save, DCP save and async_save, plus 50 kill -9 runs (~20 min; one
# part alone: --parts compare|growth|crash|first|preempt|ddp keeps the others' results).
bench-checkpoint: $(STAMP)
	$(BIN)/python bench/checkpoint_bench.py --write BENCHMARKS.md

# StreamingDataset beside torch's DataLoader, WebDataset, Mosaic Streaming and LitData (peers
# install into .bench/stream-venv on the first run).
bench-stream: $(STAMP) node_modules/.package-lock.json
	$(BIN)/python bench/stream_bench.py --write BENCHMARKS.md

# bench storage against dd, bench loader against DLIO (installed into .bench/dlio-venv), the
# ledger's overhead.
bench-measure: $(STAMP)
	$(BIN)/python bench/storage_bench.py --write BENCHMARKS.md
	$(BIN)/python bench/loader_vs_dlio.py --write BENCHMARKS.md
	$(BIN)/python bench/ledger_overhead.py --write BENCHMARKS.md

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

clean:
	rm -rf $(VENV) node_modules .pytest_cache .demo .bench build src/stoker/_native/*.so
