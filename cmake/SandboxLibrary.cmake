# sandbox_installed_library(<target>): the properties every installed library shares.
#
# The libraries follow BUILD_SHARED_LIBS (static by default). Shared, each one is versioned
# (libsandbox.so.0.1.0, SONAME libsandbox.so.0.1: while the project is 0.x a minor version may
# break the ABI, so the SONAME carries major.minor) and exports only what SANDBOX_DECL marks
# (include/sandbox/config.hpp): the public API, plus the internal pieces the backends take from
# libsandbox. --no-undefined makes a missing export or dependency fail at the library's own
# link instead of in a user's program. Hidden visibility holds for the static archives too:
# linked into a user's own shared library, they do not add to its exports.
function(sandbox_installed_library target)
  set_target_properties(${target} PROPERTIES
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    POSITION_INDEPENDENT_CODE ON)
  if(BUILD_SHARED_LIBS)
    target_link_options(${target} PRIVATE LINKER:--no-undefined)
    # The libraries need each other (bwrap -> net -> sandbox): found next to each other
    # wherever the prefix is (a RUNPATH is not inherited from the program that loads them).
    set_target_properties(${target} PROPERTIES INSTALL_RPATH "$ORIGIN")
  endif()
endfunction()

# sandbox_add_backend(<name> SOURCES <file>... [LINK <library>...]): the library of backend
# <name>: target sandbox_backend_<name> (sandbox::<name> to consumers), its public headers in
# include/ beside its sources, the properties every installed library shares, and the
# supervisor helper built with it (every exec needs it at run time). Its private includes are
# its own folder, the top of the tree (for the rooms it links, e.g. net/) and lib/ (which
# net's headers include).
function(sandbox_add_backend name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SOURCES;LINK")
  set(target sandbox_backend_${name})
  add_library(${target} ${arg_SOURCES})
  add_library(sandbox::${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  sandbox_installed_library(${target})
  target_include_directories(${target}
    PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/lib)
  target_link_libraries(${target} PUBLIC sandbox ${arg_LINK}
                                   PRIVATE $<BUILD_INTERFACE:sandbox_build_flags>)
  add_dependencies(${target} sandbox-supervisor)
endfunction()
