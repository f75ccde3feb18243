# strata_add_module(NAME DIR SOURCES... [DEPS targets...])
#
# One static library per module. Each module's headers are reachable as "<name>/<file>.h" only by
# targets that link it: the include root is a per-module folder in the build tree holding a single
# link <name> -> the module's source folder. So an include across the wrong boundary (kernels
# including "model/...") fails to compile instead of slowly rotting the layering.
function(strata_add_module name)
  cmake_parse_arguments(ARG "" "DIR" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  set(inc_root ${CMAKE_BINARY_DIR}/include/${name})
  file(MAKE_DIRECTORY ${inc_root})
  if(NOT EXISTS ${inc_root}/${name})
    file(CREATE_LINK ${ARG_DIR} ${inc_root}/${name} SYMBOLIC)
  endif()
  add_library(strata_${name} STATIC ${ARG_SOURCES})
  target_include_directories(strata_${name} PUBLIC ${inc_root})
  target_link_libraries(strata_${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
endfunction()
