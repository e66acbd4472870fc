# headlab_metric_names(TARGET ROOT): the built-in metric names (common/metric_catalog.cc
# includes generated/metric_names.inc) are the string literals of the headers that define
# them, listed at configure time (re-run when one changes or a method's header appears)
# into the build folder, which TARGET gets on its include path. ROOT is the repository's
# root. The headers: common/metric_names.h (the core's names), payload/exec/noop.h, and
# each method's payload/methods/<m>/<m>_metrics.h, so a method's names live in its folder
# and common/ names no method, yet the torch-free programs (CLI, coordinator) that check a
# grid's comparisons know them.
function(headlab_metric_names target root)
  file(GLOB method_headers CONFIGURE_DEPENDS ${root}/payload/methods/*/*_metrics.h)
  set(headers ${root}/common/metric_names.h ${root}/payload/exec/noop.h ${method_headers})
  set(names "")
  foreach(header ${headers})
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${header})
    # A declaration may wrap after its `=` (clang-format does so when a comment follows).
    file(READ ${header} text)
    string(REGEX MATCHALL "constexpr const char\\* k[A-Za-z0-9]+ =[ \t\r\n]*\"[^\"]*\"" decls "${text}")
    foreach(decl IN LISTS decls)
      if(decl MATCHES "\"([^\"]*)\"$")
        string(APPEND names "    \"${CMAKE_MATCH_1}\",\n")
      endif()
    endforeach()
  endforeach()
  file(WRITE ${PROJECT_BINARY_DIR}/generated/metric_names.inc.new "${names}")
  configure_file(${PROJECT_BINARY_DIR}/generated/metric_names.inc.new
                 ${PROJECT_BINARY_DIR}/generated/metric_names.inc COPYONLY)
  target_include_directories(${target} PRIVATE ${PROJECT_BINARY_DIR})
endfunction()
