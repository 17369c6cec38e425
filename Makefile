# seckill-go developer entry points. `make` alone lists them.
# The local stack runs without Docker: see scripts/ (state in .run/, binaries in bin/).

.DEFAULT_GOAL := help
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c

GO ?= go
# Release build flags: the Dockerfile must build with exactly these (it can run `make build`).
GO_BUILD_ENV   := CGO_ENABLED=0
GO_BUILD_FLAGS := -trimpath -ldflags='-s -w'
# Flags for `make test`; extend them, e.g. make test GOTESTFLAGS='-race -count=1 -timeout 15m -run TestOversell -v'
GOTESTFLAGS ?= -race -count=1 -timeout 15m
# The load test reaches the stack's Redis itself (the redis-flush fault, the zoo's clean-up): it
# runs in the stack's environment, so that it finds the topology scripts/env.sh points the app at.
STACK_ENV := . scripts/env.sh &&
# staticcheck is pinned in tools.mod (see the comment there for why not go.mod).
STATICCHECK := $(GO) tool -modfile=tools.mod staticcheck

# The Redis and ZooKeeper topologies of the local stack (scripts/env.sh, scripts/services.sh):
# REDIS_MODE=single|cluster|sentinel and ZK_MODE=single|ensemble, when given, become
# SECKILL_REDIS_MODE and SECKILL_ZK_MODE, e.g. make up REDIS_MODE=cluster ZK_MODE=ensemble.
ifdef REDIS_MODE
export SECKILL_REDIS_MODE := $(REDIS_MODE)
endif
ifdef ZK_MODE
export SECKILL_ZK_MODE := $(ZK_MODE)
endif
# Tracing (issue #33): TRACING=jaeger becomes SECKILL_STACK_TRACING (scripts/env.sh): make up starts
# Jaeger (UI http://127.0.0.1:16686/) and the replicas export to it; TRACING_SAMPLE becomes their
# SECKILL_TRACING_SAMPLE (default 0.01), e.g. make up TRACING=jaeger TRACING_SAMPLE=1.
ifdef TRACING
export SECKILL_STACK_TRACING := $(TRACING)
endif
ifdef TRACING_SAMPLE
export SECKILL_TRACING_SAMPLE := $(TRACING_SAMPLE)
endif

.PHONY: help up down services services-down status build test test-topology test-short lint bench bench-compare bench-locks fuzz loadtest loadtest-pay loadtest-chaos chaos soak zoo k6 compose-check compose-smoke screenshots jaeger jaeger-screenshot logs clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

up: ## start services, 3 replicas and nginx on http://127.0.0.1:8080/ (idempotent); REDIS_MODE=cluster|sentinel, ZK_MODE=ensemble add those topologies; TRACING=jaeger [TRACING_SAMPLE=1] adds Jaeger on http://127.0.0.1:16686/ and traces into it
	scripts/up.sh

down: ## stop everything `make up` started (Jaeger too), the topologies' nodes of any mode too (MariaDB/Redis only if it started them)
	scripts/down.sh all

services: ## start MariaDB, Redis, ZooKeeper, the dev Kafka broker, Redlock's five Redis servers and Memcached (idempotent); REDIS_MODE=cluster|sentinel, ZK_MODE=ensemble add those topologies
	scripts/services.sh up

services-down: ## stop the services that `make services` started, the topologies' nodes of any mode too
	scripts/services.sh down

status: ## show what runs and answers
	scripts/status.sh

build: ## build bin/seckill and bin/devbroker with the release flags
	$(GO_BUILD_ENV) $(GO) build $(GO_BUILD_FLAGS) -o bin/seckill ./cmd/seckill
	$(GO_BUILD_ENV) $(GO) build $(GO_BUILD_FLAGS) -o bin/devbroker ./cmd/devbroker

test: ## all tests (integration and the browser test included, the fuzz targets' seed corpora as regression tests, promtool's alert rule tests) against the local services (started if needed)
	scripts/services.sh up
	scripts/chromium.sh
	scripts/promtool.sh
	$(GO) test $(GOTESTFLAGS) ./...

# The fuzz targets are internal/httpapi's (every input surface of the API; the FuzzApp* ones
# against the real app and services). `go test` (make test) runs each target's seed corpus, the
# committed internal/httpapi/testdata/fuzz/<target>/ included, as a regression test; `make fuzz`
# explores: it builds the instrumented test binary once and runs each target for FUZZTIME in the
# package's directory. A finding is written to testdata/fuzz/<target>/, and committed with its fix
# it is a regression test. The corpus the fuzzer found interesting is kept in go's cache and
# grows with each run, and a run first replays all of it (baseline coverage): worth it for long
# runs, but it can take more than a few seconds, so FUZZ_FROM=seeds starts from the seed corpora
# alone and spends a short FUZZTIME fuzzing (CI's short form).
FUZZTIME ?= 1m
FUZZ_FROM ?= cache
FUZZ_PKG := github.com/seckill-go/seckill-go/internal/httpapi
fuzz_each = set -e; tmp=$$(mktemp -d); bin=$$tmp/httpapi.test; $(GO) test -c -fuzz=. -o $$bin $(FUZZ_PKG); \
	cache=$$($(GO) env GOCACHE)/fuzz/$(FUZZ_PKG); if [[ "$(FUZZ_FROM)" == seeds ]]; then cache=$$tmp/cache; fi; cd internal/httpapi; \
	for t in $$($$bin -test.list '^Fuzz'); do echo "fuzz $$t for $(1)"; \
	run() { $$bin -test.run='^$$' -test.fuzz="^$$t\$$" -test.fuzztime=$(1) -test.fuzzcachedir=$$cache 2>&1; }; \
	if out=$$(run); then echo "$$out"; else echo "$$out"; \
	if echo "$$out" | grep -q 'context deadline exceeded' && ! echo "$$out" | grep -q 'Failing input written'; then \
	echo "fuzz $$t: the fuzzer's end raced its own deadline (Go issue 75804) and no input failed: once more"; run; else exit 1; fi; fi; \
	done; rm -r $$tmp

fuzz: ## every fuzz target for FUZZTIME each (default 1m, e.g. make fuzz FUZZTIME=10m; FUZZ_FROM=seeds: from the seed corpora, not the cached one) against the local services
	scripts/services.sh up
	$(call fuzz_each,$(FUZZTIME))

# The packages of every Redis and ZooKeeper user, which `make test-topology` runs again on the
# cluster and the ensemble of `make services REDIS_MODE=cluster ZK_MODE=ensemble` (.ci/run: a
# shorter list).
TOPOLOGY_PKGS ?= ./internal/lock/... ./internal/stock/... ./internal/ratelimit/ ./internal/livestats/ ./internal/changefeed/ ./internal/stampede/... ./internal/checkout/ ./internal/app/ ./cmd/seckill/

test-topology: ## the Redis and ZooKeeper users' tests again, on a 6-node Redis Cluster and a 3-server ZooKeeper ensemble (started if needed)
	SECKILL_REDIS_MODE=cluster SECKILL_ZK_MODE=ensemble scripts/services.sh up
	SECKILL_TEST_REDIS_MODE=cluster SECKILL_TEST_REDIS_ADDRS=127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003 \
	SECKILL_TEST_ZK_SERVERS=127.0.0.1:2191,127.0.0.1:2192,127.0.0.1:2193 $(GO) test $(GOTESTFLAGS) $(TOPOLOGY_PKGS)

test-short: ## unit tests only: no services needed
	$(GO) test -race -short ./...

lint: ## gofmt, go vet, staticcheck (and shellcheck when installed)
	@unformatted=$$(gofmt -l .); if [[ -n $$unformatted ]]; then echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...
	@if command -v shellcheck >/dev/null; then shellcheck -x scripts/*.sh deploy/nginx/*.sh deploy/standin/*.sh loadtest/k6/*.sh .ci/run; else echo "shellcheck not installed: skipped"; fi

# Flags for `make bench`, e.g. make bench BENCH_FLAGS='-strategies mysql -batch 1,32 -profile'
BENCH_FLAGS ?=

bench: ## the purchase path against this machine's own limits (bare gin, R), medians of -rounds alternated rounds; report in loadtest/results/
	scripts/services.sh up
	$(MAKE) build
	$(GO) run ./loadtest/bench $(BENCH_FLAGS)

# make bench-compare A=<commit> B=<commit> [PAIRS=3] [BENCH_FLAGS=…] [A_ENV=… B_ENV=…]: "." for
# the work tree; A_ENV/B_ENV are NAME=value words for one side's replicas (B_ENV=SECKILL_PLANTED_SLOWDOWN=0.1)
PAIRS ?= 3

bench-compare: ## make bench on two commits A and B, alternated in PAIRS pairs: each measurement's medians and whether the difference is beyond the spread
	A_ENV="$(A_ENV)" B_ENV="$(B_ENV)" scripts/bench-compare.sh "$(A)" "$(B)" "$(PAIRS)" $(BENCH_FLAGS)

bench-locks: ## lock benchmarks (ours beside bsm/redislock, redsync, zk.Lock) against the local services
	scripts/services.sh up
	$(GO) test -run='^$$' -bench=. -benchtime=3s ./internal/lock/...

# Flags for `make scale`, e.g. make scale SCALE_FLAGS='-sweeps data -rows 0,100000 -reps 10'. All the
# sweeps but data need the stack: SECKILL_PAYMENT_WINDOW=30m make up (a million buyers take over 2 min);
# the replicas sweep restarts it with this make's environment, so give it the same variables.
SCALE_FLAGS ?=
.PHONY: scale
scale: ## how the cost grows: the store's queries at 0, 1M, 10M rows; through nginx one sale to 10k–1M buyers, 1–1,000 sales open at once, sales of 1k–10M units, 1k–1M orders due at once, 1–4 replicas (~50 min; all but the first need make up); every point audited; report in loadtest/results/
	scripts/services.sh up
	$(GO) run ./loadtest/scale $(SCALE_FLAGS)

# Flags for `make buckets`, e.g. make buckets BUCKETS_FLAGS='-backends redis -units 1000 -buyers 1500'
BUCKETS_FLAGS ?=
.PHONY: buckets
buckets: ## one sale's stock split in K buckets (K MariaDB rows, K Redis keys): throughput by K, and the end of the sale under each policy (~2 min); report in loadtest/results/
	scripts/services.sh up
	$(GO) run ./loadtest/buckets $(BUCKETS_FLAGS)

loadtest-pay: ## the load test with its payment phase: half the winners pay, the rest expire, a second wave buys the returned units (quick on a stack started with SECKILL_PAYMENT_WINDOW=10s make up; make up's 2m window works, ~2.5 min per strategy)
	$(STACK_ENV) $(GO) run ./loadtest -strategies mysql,redis,zk,redis-lua,none -pay 0.5 -stock 100 -buyers 1000 $(LOADTEST_FLAGS)

# Flags for `make loadtest`, e.g. make loadtest LOADTEST_FLAGS='-stock 1000 -workers 128'
LOADTEST_FLAGS ?=

loadtest: ## load-test mysql, redis, zk, redis-lua and the `none` control over the 3 replicas of `make up`; audit; report
	$(STACK_ENV) $(GO) run ./loadtest -strategies mysql,redis,zk,redis-lua,none $(LOADTEST_FLAGS)

loadtest-chaos: ## the same with one replica SIGKILLed and restarted during each attack
	$(STACK_ENV) $(GO) run ./loadtest -strategies mysql,redis,zk,redis-lua -chaos kill $(LOADTEST_FLAGS)

# Flags for `make chaos`, e.g. make chaos CHAOS_FLAGS='-faults redis,kill -step 30s' (.ci/run
# runs a short form: fewer strategies, shorter steps and stops, every fault).
CHAOS_FLAGS ?=
chaos: ## faults under load on the stack of make up (started if needed): Redis, ZooKeeper, MariaDB, the broker stopped; Redis, MariaDB, the broker SIGKILLed; Redis emptied; a replica SIGKILLed, one SIGTERMed; the order consumer and the redis-lua persister killed between their commits; with REDIS_MODE=cluster|sentinel ZK_MODE=ensemble also a Redis master's and the ZooKeeper leader's failover; each audited; report in loadtest/results/
	scripts/up.sh
	$(STACK_ENV) $(GO) run ./loadtest -faults all -strategies mysql,redis,zk,redis-lua,none -targets http://$${SECKILL_LB_ADDR:-127.0.0.1:8080} -admin http://127.0.0.1:8081 $(CHAOS_FLAGS)

# Flags for `make soak`, e.g. make soak SOAK_FLAGS='-for 3m -rate 100' (.ci/run runs a short form).
SOAK_FLAGS ?=
soak: ## a steady mixed load on the stack of make up (started if needed) for 30 min: purchases of every safe strategy, pays, expiries, stream viewers; fails on growth of a replica's heap, goroutines, open files or MySQL connections past a bound after warm-up, or on any audit failure; report with the gauges plotted in loadtest/results/
	scripts/up.sh
	$(STACK_ENV) $(GO) run ./loadtest/soak $(SOAK_FLAGS)

# Flags for `make zoo`, e.g. make zoo ZOO_FLAGS='-strategies zk,zk-herd -zoo-pause 8s'
# (.ci/run runs a short form: a few strategies, one of each lesson).
ZOO_FLAGS ?=
zoo: ## the lock zoo on the stack of make up (started if needed): every strategy through the same load, then its lock holder paused past its lease and SIGKILLed, and the servers of the locks without persistence restarted during a hold; one matrix against what the write-ups say (~8 min); report in loadtest/results/
	scripts/up.sh
	$(STACK_ENV) $(GO) run ./loadtest -zoo -strategies all $(ZOO_FLAGS)

# `make k6` settings; purchase.js reads more from the environment (BUYERS, PEAK_RATE, RAMP_UP, HOLD,
# MAX_VUS, ...: see loadtest/k6/purchase.js), e.g. make k6 K6_STRATEGY=zk BUYERS=500 PEAK_RATE=300
K6_STOCK ?= 200
K6_STRATEGY ?= mysql

k6: ## k6 stampede on a fresh product of the running stack (K6_STOCK, K6_STRATEGY), then the DB audit
	K6_STOCK=$(K6_STOCK) K6_STRATEGY=$(K6_STRATEGY) loadtest/k6/run.sh

compose-check: ## validate docker-compose.yml with the compose tool and prometheus.yml with promtool (no Docker engine needed)
	scripts/compose-check.sh

# The smoke run's load test flags come from SMOKE_LOADTEST_FLAGS, e.g.
# make compose-smoke SMOKE_LOADTEST_FLAGS='-strategies mysql,none -stock 100' (see the script)
compose-smoke: ## docker-compose.yml for real: images built here (stand-ins for the registry's), up, a purchase, the load test with app2 killed, down -v
	scripts/compose-smoke.sh

screenshots: ## run the browser test and copy its screenshots to docs/ for docs/storefront.md
	scripts/services.sh up
	scripts/chromium.sh
	$(GO) test -count=1 -run TestStorefront ./web/
	cp web/testdata/screenshots/storefront-desktop-full.png docs/storefront-desktop.png
	cp web/testdata/screenshots/storefront-phone.png docs/storefront-phone.png
	cp web/testdata/screenshots/storefront-desktop-drawer.png docs/storefront-drawer.png
	cp web/testdata/screenshots/storefront-queue.png docs/storefront-queue.png

jaeger: ## build bin/jaeger (Jaeger v2's all-in-one, from tools/jaeger's own module) without starting it
	scripts/jaeger.sh build

# The trace of one purchase in Jaeger's UI, for docs/stacks.md (Tracing): the stack traces every
# request for it (an existing stack with other tracing settings is not restarted: make down first).
jaeger-screenshot: ## make up TRACING=jaeger TRACING_SAMPLE=1, one purchase, its trace in Jaeger's UI saved as docs/jaeger-trace.png
	SECKILL_STACK_TRACING=jaeger SECKILL_TRACING_SAMPLE=1 scripts/up.sh
	scripts/chromium.sh
	cd tools/jaeger && $(GO) run ./screenshot -out ../../docs/jaeger-trace.png

logs: ## follow the replica logs
	tail -n 20 -F .run/logs/replica-*.log

clean: down ## stop everything, then remove bin/ and .run/ (ZooKeeper and broker data too)
	rm -rf bin .run
