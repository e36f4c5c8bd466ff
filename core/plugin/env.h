// WEFT_PLUGINS (weft/plugin.h): a ':'-separated list of plugin paths loaded, in order and once
// per process, when the first communicator is created, so an unchanged program gains them.
#pragma once

namespace weft::plugin {

// Loads WEFT_PLUGINS' plugins on the first call; later calls return at once. When a path failed,
// every call (the first and each later one) throws that path's error, so each communicator
// creation fails the same way. Thread-safe.
void load_env_plugins();

}  // namespace weft::plugin
