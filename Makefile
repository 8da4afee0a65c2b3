# The two commands (see README.md):
#   make serve   install what is needed, build, start the service (namespace backend)
#   make test    install what is needed, build, run every test, then again under ASan+UBSan
# and `make image`: the OCI image hexr-sandbox:VERSION (docs/deploy.md)
BUILD ?= build
BUILD_SAN ?= build-sanitize
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all setup build serve image test check sanitize check-sanitize fuzz clean

all: build

setup:
	@./scripts/setup.sh

build: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

serve: build
	exec ./$(BUILD)/hexr-sandbox serve

# with buildah, from this host's Debian packages; reused while its inputs are unchanged
image: build
	./deploy/container/build.py --build $(BUILD)

check: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

sanitize: setup
	cmake -S . -B $(BUILD_SAN) -DCMAKE_BUILD_TYPE=Debug -DHXS_SANITIZE=ON $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD_SAN) -j $(JOBS)

# The sanitizer pass leaves to `check` the suites in which no instrumented code runs:
# pytest/guest drives the (never sanitized, static) guest agent; pytest/sdk_unit and
# pytest/session test the Python SDK and the session drivers without our binary;
# layering/ and docs/links read the source tree.
SAN_SKIP = ^(pytest/guest|pytest/sdk_unit|pytest/session|layering/.*|docs/links)$$
check-sanitize: sanitize
	cd $(BUILD_SAN) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		ctest --output-on-failure -j $(JOBS) -E '$(SAN_SKIP)'

test: check check-sanitize

clean:
	rm -rf $(BUILD) $(BUILD_SAN)
