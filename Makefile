# headlab top-level driver. `make demo` and `make test` are the two commands of the README.
BUILD   ?= build
JOBS    ?= $(shell nproc)
CMAKE_FLAGS ?=
# WERROR=ON: C++ warnings are errors (CMake option HEADLAB_WERROR; .ci/run sets it). Given
# on the command line it is written into an existing build folder's cache too.
WERROR ?=
# Paths relative to the checkout, so a fresh clone (CI) hits the same ccache entries.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := true
# The payload's units use a precompiled header (cmake/torch_pch.cmake): ccache caches them
# only with these.
export CCACHE_SLOPPINESS := pch_defines,time_macros,include_file_mtime,include_file_ctime

.PHONY: all deps configure build test test-gpu demo up clean

all: build

deps:
	@scripts/install-deps.sh

# ccache where it is installed (the device machine has none).
LAUNCHER := $(if $(shell command -v ccache),-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)

# CMakeLists.txt chooses the path: the GPU path where a CUDA toolkit and a CUDA PyTorch (the
# python3 on PATH) are found, the CPU path otherwise. The configure summary names the choice.
$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(LAUNCHER) $(CMAKE_FLAGS) \
	  $(if $(WERROR),-DHEADLAB_WERROR=$(WERROR))

configure: $(BUILD)/CMakeCache.txt
ifneq ($(WERROR),)
	grep -qx 'HEADLAB_WERROR:BOOL=$(WERROR)' $(BUILD)/CMakeCache.txt || \
	  cmake -S . -B $(BUILD) -DHEADLAB_WERROR=$(WERROR)
endif

build: deps configure
	cmake --build $(BUILD) -j$(JOBS)
	dashboards/build.sh
	scripts/fetch-data.sh $(BUILD)

# The whole CPU suite: unit tests beside the code and the system tests in tests/.
test: build
	cd $(BUILD) && ctest -L cpu --output-on-failure -j$(JOBS) --timeout 1200

# The GPU tests (kernels against their CPU references, the fused layers, CUPTI counters,
# the decoder on CUDA): built only on the GPU path, run where a GPU is.
test-gpu: build
	cd $(BUILD) && ctest -L gpu --output-on-failure --timeout 1200

demo: build
	scripts/demo.sh

up: build
	scripts/demo.sh --up

clean:
	rm -rf $(BUILD)
