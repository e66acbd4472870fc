# headlab_torch_prefix(): chooses the LibTorch that find_package(Torch) will find, so that
# plain `make` builds the GPU path wherever it can:
#   - a CUDA toolkit was found (HEADLAB_HAVE_CUDA) and the python3 on PATH (or HEADLAB_PYTHON)
#     imports a CUDA build of PyTorch: that PyTorch's LibTorch (torch.utils.cmake_prefix_path)
#     goes first on CMAKE_PREFIX_PATH, and NCCL's header of its nvidia-nccl wheel becomes
#     HEADLAB_NCCL_HINT (the data-parallel process group, payload/exec/dist.h);
#   - a CPU-only PyTorch: its LibTorch goes last, behind any system LibTorch (Debian's);
#   - no PyTorch, or a CUDA PyTorch without a CUDA toolkit (its package config needs one):
#     nothing is added, and find_package(Torch) finds the system LibTorch (the CPU path).
# -DHEADLAB_TORCH_PREFIX=DIR names the LibTorch CMake prefix and skips the probe;
# -DHEADLAB_PYTHON=OFF skips it too (Torch_DIR or CMAKE_PREFIX_PATH then decide), as does a
# Torch_DIR already in the cache (a reconfigure keeps the LibTorch the first configure found).
# Sets HEADLAB_TORCH_SOURCE (for the configure summary) in the caller's scope.
function(headlab_torch_prefix)
  set(HEADLAB_PYTHON "python3" CACHE STRING "python3 whose PyTorch provides LibTorch (OFF: none)")
  set(HEADLAB_TORCH_PREFIX "" CACHE PATH "LibTorch's CMake prefix (empty: probe HEADLAB_PYTHON)")
  set(source "the system's")
  set(prefix_path ${CMAKE_PREFIX_PATH})
  if(HEADLAB_TORCH_PREFIX)
    list(PREPEND prefix_path ${HEADLAB_TORCH_PREFIX})
    set(source "HEADLAB_TORCH_PREFIX=${HEADLAB_TORCH_PREFIX}")
  elseif(Torch_DIR)  # found by an earlier configure of this build folder (cached)
    set(source "Torch_DIR=${Torch_DIR}")
  elseif(HEADLAB_PYTHON)
    # Two lines: LibTorch's CMake prefix, then the CUDA version it was built for ("" if none).
    execute_process(
      COMMAND ${HEADLAB_PYTHON} -c
              "import torch; print(torch.utils.cmake_prefix_path); print(torch.version.cuda or '')"
      OUTPUT_VARIABLE probe ERROR_QUIET RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(rc EQUAL 0 AND probe)
      string(REPLACE "\n" ";" probe "${probe}")
      list(GET probe 0 torch_prefix)
      list(LENGTH probe n)
      set(torch_cuda "")
      if(n GREATER 1)
        list(GET probe 1 torch_cuda)
      endif()
      if(torch_cuda AND HEADLAB_HAVE_CUDA)
        list(PREPEND prefix_path ${torch_prefix})
        set(source "${HEADLAB_PYTHON}'s CUDA ${torch_cuda} PyTorch first: ${torch_prefix}")
        execute_process(
          COMMAND ${HEADLAB_PYTHON} -c
                  "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'include'))"
          OUTPUT_VARIABLE nccl ERROR_QUIET RESULT_VARIABLE nccl_rc OUTPUT_STRIP_TRAILING_WHITESPACE)
        if(nccl_rc EQUAL 0 AND NOT HEADLAB_NCCL_HINT)
          set(HEADLAB_NCCL_HINT ${nccl} PARENT_SCOPE)
        endif()
      elseif(torch_cuda)
        set(source "the system's (${HEADLAB_PYTHON}'s PyTorch is CUDA ${torch_cuda}, but no CUDA toolkit was found)")
      else()
        list(APPEND prefix_path ${torch_prefix})
        set(source "the system's, else ${HEADLAB_PYTHON}'s CPU PyTorch: ${torch_prefix}")
      endif()
    endif()
  endif()
  set(CMAKE_PREFIX_PATH ${prefix_path} PARENT_SCOPE)
  set(HEADLAB_TORCH_SOURCE ${source} PARENT_SCOPE)
endfunction()
