# headlab_torch_pch(TARGET ...): LibTorch's headers as a precompiled header (GCC) for each
# TARGET's units that include them, directly or through the project's own headers. They take
# about 14 s per translation unit on a CI core; the payload's library and its test programs
# hold about half of the ~160 units that include them, and each target now compiles them
# once. Units that do not include LibTorch are left as they are (SKIP_PRECOMPILE_HEADERS):
# forcing LibTorch on them costs time, and through glog's stl_logging.h it changes how Catch
# prints a std::vector. ccache caches the units that use it with -fpch-preprocess and the
# sloppiness the Makefile exports. Off with -DHEADLAB_PCH=OFF.
option(HEADLAB_PCH "precompile LibTorch's headers for the payload's targets" ON)

# _headlab_uses_torch(FILE OUT): whether FILE includes <torch/...>, <ATen/...> or <c10/...>,
# itself or through a project header ("dir/file.h" from the repository's root or FILE's
# folder). Answers are kept in global properties, so each header is read once per configure.
function(_headlab_uses_torch file out)
  get_property(known GLOBAL PROPERTY "HEADLAB_USES_TORCH:${file}" SET)
  if(known)
    get_property(answer GLOBAL PROPERTY "HEADLAB_USES_TORCH:${file}")
    set(${out} ${answer} PARENT_SCOPE)
    return()
  endif()
  set_property(GLOBAL PROPERTY "HEADLAB_USES_TORCH:${file}" OFF)  # an include cycle ends here
  file(STRINGS ${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
  set(answer OFF)
  get_filename_component(folder ${file} DIRECTORY)
  foreach(line IN LISTS includes)
    if(line MATCHES "<(torch|ATen|c10)/")
      set(answer ON)
      break()
    endif()
    if(line MATCHES "\"([^\"]+)\"")
      set(name ${CMAKE_MATCH_1})
      foreach(candidate ${PROJECT_SOURCE_DIR}/${name} ${folder}/${name})
        if(EXISTS ${candidate})
          get_filename_component(candidate ${candidate} REALPATH)
          _headlab_uses_torch(${candidate} nested)
          if(nested)
            set(answer ON)
          endif()
          break()
        endif()
      endforeach()
      if(answer)
        break()
      endif()
    endif()
  endforeach()
  set_property(GLOBAL PROPERTY "HEADLAB_USES_TORCH:${file}" ${answer})
  set(${out} ${answer} PARENT_SCOPE)
endfunction()

function(headlab_torch_pch)
  if(NOT HEADLAB_PCH)
    return()
  endif()
  foreach(target ${ARGN})
    if(NOT TARGET ${target})
      continue()
    endif()
    target_precompile_headers(${target} PRIVATE <torch/torch.h>)
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-fpch-preprocess>)
    endif()
    get_target_property(sources ${target} SOURCES)
    foreach(source ${sources})
      if(NOT source MATCHES "\\.cc$")
        continue()
      endif()
      if(NOT IS_ABSOLUTE ${source})
        set(source ${PROJECT_SOURCE_DIR}/${source})
      endif()
      get_filename_component(source ${source} REALPATH)
      _headlab_uses_torch(${source} uses)
      if(NOT uses)
        set_source_files_properties(${source} TARGET_DIRECTORY ${target}
                                    PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
      endif()
    endforeach()
  endforeach()
endfunction()
