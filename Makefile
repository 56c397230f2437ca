# lowwater: every command a developer or CI needs. Nothing here relies on a
# tool installed by hand: linters run through `go run module@version`.
GO            ?= go
STATICCHECK   := honnef.co/go/tools/cmd/staticcheck@v0.8.2
TEST_TIMEOUT  ?= 9m
FUZZTIME      ?= 30s

.PHONY: all build test demo bench lint fuzz soak

all: build test

build:
	$(GO) build ./...

# go vet, then every test (unit, black-box, Examples, fuzz seed corpora)
# under the race detector.
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

# The demo on the embedded default catalog (a bbolt file in a temp dir).
demo:
	$(GO) run ./cmd/demo

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	$(GO) mod tidy -diff

# Each fuzz target for FUZZTIME; `go test -fuzz` takes one target at a time.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$t"; $(GO) test -run='^$$' -fuzz="^$$t$$" -fuzztime=$(FUZZTIME) $$pkg; \
	  done; \
	done
