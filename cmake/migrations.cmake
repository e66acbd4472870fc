# headlab_embed_migrations(TARGET): schema/NNN_*.sql are the migrations a person reads; the
# coordinator embeds the same bytes as raw-string literals generated here into
# <binary dir>/generated/schema/NNN_*.sql.inc (re-run whenever a .sql file changes), on
# TARGET's private include path. Used by the main build and the fuzz build (fuzz/).
function(headlab_embed_migrations target)
  get_filename_component(root ${CMAKE_CURRENT_FUNCTION_LIST_DIR} DIRECTORY)
  file(GLOB migrations CONFIGURE_DEPENDS ${root}/schema/*.sql)
  foreach(sql ${migrations})
    get_filename_component(stem ${sql} NAME_WE)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${sql})
    file(READ ${sql} text)
    set(inc ${PROJECT_BINARY_DIR}/generated/schema/${stem}.sql.inc)
    file(WRITE ${inc}.new "R\"sql(${text})sql\"\n")
    configure_file(${inc}.new ${inc} COPYONLY)  # touches the .inc only when the text changed
  endforeach()
  target_include_directories(${target} PRIVATE ${PROJECT_BINARY_DIR}/generated)
endfunction()
