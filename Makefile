# toolgate — the two commands a newcomer needs:
#   go run ./cmd/toolgate serve   # embedded default on 127.0.0.1:8080/mcp
#   make test                     # the whole suite, as CI runs it

GO ?= go
PKGS := ./...

.PHONY: test vet fmt-check build bench fuzz-smoke tidy-check

test: fmt-check vet
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

build:
	$(GO) build -o bin/toolgate ./cmd/toolgate

bench:
	$(GO) run ./bench -n 20000 -c 1,16,64
