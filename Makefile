# One entry point for building, testing and running srv6pm. See README.md.
# A python3 that refuses pip installs (Debian's own, PEP 668) gets a virtualenv of ours in .venv.
PYTHON ?= $(shell python3 scripts/python-for-make.py)
PROTO_OUT := proto/src
BPF_SRC := node-manager/bpf
BPF_OUT := node-manager/src/srv6pm/node_manager/bpf
VPP_PLUGIN_SRC := node-manager/vpp-plugin
VPP_PLUGIN_BUILD := build/vpp-plugin
VPP_PLUGIN_OUT := node-manager/src/srv6pm/node_manager/drivers/vpp/plugin
PACKAGES := proto common twamp node-manager collector controller cli lab dashboards
# What `make demo` runs: the lab, its node managers, the collector, the controller and the CLI.
DEMO_PACKAGES := proto common twamp node-manager collector controller cli lab

.PHONY: deps demo-deps peers servers install demo-install python proto bpf vpp-plugin lint test test-unit demo bench clean

deps:
	bash scripts/install-deps.sh

demo-deps:
	bash scripts/install-deps.sh demo

# The interpreter itself: a virtualenv when python3 is externally managed, nothing otherwise.
python:
	@[ "$(PYTHON)" = "python3" ] || [ -x "$(PYTHON)" ] || python3 -m venv .venv

# Independent implementations the interoperability tests run against (built once, cached).
peers:
	bash scripts/install-stamp-suite.sh

# Real servers and tools the tests run: Kafka, InfluxDB, kube-apiserver + etcd + helm, the compose
# CLI (srv6pm.lab.servers and srv6pm.lab.kube run them; built or installed once, cached).
servers:
	bash scripts/install-kafka.sh
	bash scripts/install-influxdb.sh
	bash scripts/install-kube.sh
	bash scripts/install-compose.sh

install: deps python proto bpf vpp-plugin
	$(PYTHON) -m pip install -q $(foreach p,$(PACKAGES),-e ./$(p)) -r requirements-dev.txt

# Only what the demo runs: no linters, no test tools, no kube-apiserver, helm or compose.
demo-install: demo-deps python proto bpf vpp-plugin
	$(PYTHON) -m pip install -q $(foreach p,$(DEMO_PACKAGES),-e ./$(p))
	bash scripts/install-kafka.sh
	bash scripts/install-influxdb.sh

# gRPC/protobuf code is generated, never committed. The virtual path maps proto/srv6pm/v1 to the
# Python package srv6pm.proto.v1.
proto: python
	$(PYTHON) -m pip install -q "grpcio-tools>=1.60"
	mkdir -p $(PROTO_OUT)
	$(PYTHON) -m grpc_tools.protoc -Isrv6pm/proto=proto/srv6pm \
	  --python_out=$(PROTO_OUT) --pyi_out=$(PROTO_OUT) --grpc_python_out=$(PROTO_OUT) \
	  $(shell find proto/srv6pm -name '*.proto' | sed 's|^proto/srv6pm|srv6pm/proto|')

bpf:
	$(MAKE) -C $(BPF_SRC) OUT=$(abspath $(BPF_OUT))

# VPP (installed from a release build when missing: scripts/install-vpp.sh) and srv6pm's VPP
# plugin, built with VPP's development kit; the plugin and its API file go where the vpp driver
# and the lab's VPP routers load them.
vpp-plugin:
	bash scripts/install-vpp.sh
	cmake -S $(VPP_PLUGIN_SRC) -B $(VPP_PLUGIN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_PREFIX_PATH=/opt/vpp -Wno-dev > /dev/null
	# vppapigen runs the first python3 on PATH: Debian's, which has python3-ply
	PATH=/usr/bin:$$PATH ninja -C $(VPP_PLUGIN_BUILD) --quiet
	mkdir -p $(VPP_PLUGIN_OUT)
	# install replaces the files (a new inode): a running VPP keeps the plugin it mapped
	install $(VPP_PLUGIN_BUILD)/lib/vpp_plugins/srv6pm_plugin.so $(VPP_PLUGIN_BUILD)/srv6pm/srv6pm.api.json $(VPP_PLUGIN_OUT)/

lint: install
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m mypy common/src twamp/src node-manager/src collector/src controller/src cli/src lab/src dashboards/src bench
	$(PYTHON) -m srv6pm.dashboards --check
	$(PYTHON) -c 'import sys; from importlinter.cli import lint_imports_command as c; sys.argv[0] = "lint-imports"; c()' pyproject.toml

test: install peers servers lint
	$(PYTHON) -m pytest

# No root, no servers: what runs on any machine with the packages installed.
test-unit:
	$(PYTHON) -m pytest -m "not root and not servers"

demo: demo-install
	$(PYTHON) -m srv6pm.lab.demo

bench: install
	$(PYTHON) -m bench.forwarding

clean:
	rm -rf $(PROTO_OUT) $(BPF_OUT)/*.o $(VPP_PLUGIN_BUILD) $(VPP_PLUGIN_OUT)

# The whole stack with Docker Compose (docs/DEPLOY.md): the lab PKI and .env made if missing,
# images built, every health check waited for, the lab r1 - r2 - r3 registered. Needs Docker.
.PHONY: compose-up compose-down
compose-up:
	bash scripts/compose-up.sh

# Volumes (Kafka, InfluxDB, journals, the controller's database) are kept: `docker compose down -v`
compose-down:
	docker compose down
