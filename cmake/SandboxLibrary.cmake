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
