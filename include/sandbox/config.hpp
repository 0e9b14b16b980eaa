// sandbox/config.hpp: version and build macros shared by every public header.
#ifndef SANDBOX_CONFIG_HPP
#define SANDBOX_CONFIG_HPP

#define SANDBOX_VERSION_MAJOR 0
#define SANDBOX_VERSION_MINOR 1
#define SANDBOX_VERSION_PATCH 0

// SANDBOX_DECL marks what the compiled libraries export. They are built with hidden symbol
// visibility (static or shared, -DBUILD_SHARED_LIBS=ON), so a shared libsandbox.so exports
// exactly the marked declarations: the public API (and the few internal functions the backend
// libraries call). On a class it exports the members, the vtable and the typeinfo. The same
// attribute serves the library and its users (ELF needs no import marking).
#ifndef SANDBOX_DECL
#if defined(__GNUC__) || defined(__clang__)
#define SANDBOX_DECL __attribute__((visibility("default")))
#else
#define SANDBOX_DECL
#endif
#endif

#endif // SANDBOX_CONFIG_HPP
