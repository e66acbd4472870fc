# headlab top-level driver. `make demo` and `make test` are the two commands of the README.
BUILD   ?= build
JOBS    ?= $(shell nproc)
CMAKE_FLAGS ?=
# Paths relative to the checkout, so a fresh clone (CI) hits the same ccache entries.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := true

.PHONY: all deps configure build test test-gpu demo up clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache $(CMAKE_FLAGS)

configure: $(BUILD)/CMakeCache.txt

build: deps configure
	cmake --build $(BUILD) -j$(JOBS)
	dashboards/build.sh
	scripts/fetch-data.sh $(BUILD)

# The whole CPU suite: unit tests beside the code and the system tests in tests/.
test: build
	cd $(BUILD) && ctest -L cpu --output-on-failure -j$(JOBS) --timeout 1200

# GPU checks, run on the device machine (scripts/gpu/build-and-test.sh).
test-gpu: build
	cd $(BUILD) && ctest -L gpu --output-on-failure --timeout 1200

demo: build
	scripts/demo.sh

up: build
	scripts/demo.sh --up

clean:
	rm -rf $(BUILD)
