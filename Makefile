# toolgate — the two commands a newcomer needs:
#   go run ./cmd/toolgate serve   # embedded default on 127.0.0.1:8080/mcp
#   make test                     # the whole suite, as CI runs it

GO ?= go
PKGS := ./...

.PHONY: test vet fmt-check build release image bench peerbench npm-deps chromium redis-server balancers

NPM_DIR := tests/npm

test: fmt-check vet npm-deps chromium redis-server balancers
	$(GO) test -race -count=1 -tags $(TAGS) -timeout 30m $(PKGS)

# The real MCP servers the end-to-end tests run behind toolgate, the official
# MCP conformance suite and the Node 22 it runs on (tests/npm/node_modules/
# .bin/node: the prebuilt node-<os>-<cpu> package matching this machine, an
# optional dependency, so no install script runs), pinned in
# tests/npm/package-lock.json. Reinstalled when the lockfile changes.
npm-deps: $(NPM_DIR)/node_modules/.package-lock.json

$(NPM_DIR)/node_modules/.package-lock.json: $(NPM_DIR)/package-lock.json $(NPM_DIR)/package.json
	cd $(NPM_DIR) && npm ci --ignore-scripts --no-audit --no-fund

# The programs the end-to-end tests run, each installed only if missing,
# by .ci/need: from Debian's packages with apt-get install --no-upgrade
# (nothing already installed is upgraded). Without apt-get it names what is
# missing and how to get it, and the tests that need it are skipped (under
# CI=true both fail): internal/prereq.
#   chromium: headless Chromium for the /ui browser tests (tests/ui_test.go)
#   redis-server: the cluster tests' Redis (internal/redistest starts it in
#     the foreground on a free port of 127.0.0.1, with no persistence)
#   balancers: HAProxy and nginx in front of three replicas with the configs
#     shipped in examples/cluster/ (tests/cluster_lb_test.go)
chromium:
	@.ci/need chromium

redis-server:
	@.ci/need redis-server

balancers:
	@.ci/need haproxy nginx

vet:
	$(GO) vet -tags $(TAGS) $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

# toolgate and toolgate-agent, side by side: `toolgate agent` runs the
# toolgate-agent next to it (the model SDKs stay out of toolgate's RSS).
# Static (CGO_ENABLED=0), as release builds are: no libc mapped, and Go's own
# DNS resolver; toolgate serve starts 1.7 MB smaller (docs/benchmarks.md §10).
build:
	CGO_ENABLED=0 $(GO) build -tags $(TAGS) -ldflags "$(VERSION_LDFLAGS)" -o bin/ ./cmd/toolgate ./cmd/toolgate-agent

# The build tags of every binary that ships (make build, make release, the
# Dockerfile's build stage) and that the tests and benches run.
# grpcnotrace leaves gRPC's golang.org/x/net/trace out (gRPC's own event
# tracing, which toolgate never turns on): its HTML templates call methods
# by name through reflect, so the linker has to keep every exported method
# of every linked type. Without it toolgate is 48 MB instead of 33, and
# starts 3.4 MB larger in RSS (docs/benchmarks.md §14).
TAGS := grpcnotrace

# What `toolgate version` and toolgate_build_info report
# (internal/buildinfo): the tag or commit, and the commit, given here
# because go build stamps no VCS information in a git worktree or a source
# archive. Override with make release VERSION=v1.2.3.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo 0.1.0-dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
VERSION_LDFLAGS := -X github.com/toolgate/toolgate/internal/buildinfo.version=$(VERSION) -X github.com/toolgate/toolgate/internal/buildinfo.revision=$(REVISION)
PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64

# Release archives in dist/ (docs/install.md): for each platform,
# toolgate_VERSION_OS_ARCH.tar.gz with static toolgate and toolgate-agent
# (CGO_ENABLED=0, -trimpath, symbols stripped), LICENSE and README.md, and
# dist/SHA256SUMS over them. Owner and order are fixed in the tarballs.
release:
	rm -rf dist && mkdir -p dist
	@set -e; for p in $(PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; d=toolgate_$(VERSION)_$${os}_$${arch}; \
		echo "building $$d"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -tags $(TAGS) -ldflags "-s -w $(VERSION_LDFLAGS)" -o dist/$$d/ ./cmd/toolgate ./cmd/toolgate-agent; \
		cp LICENSE README.md dist/$$d/; \
		tar -C dist --owner=0 --group=0 --numeric-owner --sort=name -czf dist/$$d.tar.gz $$d; \
		rm -rf dist/$$d; \
	done
	cd dist && if command -v sha256sum >/dev/null 2>&1; then sha256sum *.tar.gz; else shasum -a 256 *.tar.gz; fi > SHA256SUMS
	@cat dist/SHA256SUMS

# The container image (Dockerfile), with whichever of buildah, podman and
# docker is installed. Its build stage pulls the golang image, so it needs
# a container registry; the sandbox these tests run in has none
# (tests/image_test.go runs the build stage's go build instead).
IMAGE ?= toolgate:$(VERSION)
image:
	@b=$$(command -v buildah || command -v podman || command -v docker) || \
		{ echo "make image needs buildah, podman or docker: apt-get install buildah (Debian), brew install podman (macOS)"; exit 1; }; \
	case $$b in *buildah) sub=bud;; *) sub=build;; esac; \
	echo "$$b $$sub -t $(IMAGE) ."; \
	$$b $$sub --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(IMAGE) .

bench:
	$(GO) run ./bench -n 20000 -c 1,16,64

# The shared harness's scenario (../shared/peerbench) for toolgate: every
# kind, both protocol eras, C=1/16/64, RSS (docs/benchmarks.md, issue 16).
peerbench:
	bench/peerbench.sh
