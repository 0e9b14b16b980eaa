// sandbox/config.hpp: version and build macros shared by every public header.
#ifndef SANDBOX_CONFIG_HPP
#define SANDBOX_CONFIG_HPP

#define SANDBOX_VERSION_MAJOR 0
#define SANDBOX_VERSION_MINOR 1
#define SANDBOX_VERSION_PATCH 0

// The library is compiled (static); nothing needs exporting today. Kept so that a shared
// build can add visibility attributes without touching every declaration.
#ifndef SANDBOX_DECL
#define SANDBOX_DECL
#endif

#endif // SANDBOX_CONFIG_HPP
