#pragma once
/// The profile cache of measured stage latencies: a ValueCache (common/value_cache.h) of kind
/// "profile". Keys are settings + canonical stage keys (which carry batch, dtype and layout in
/// their tensor descriptors); the device fingerprint names the file.

#include "common/value_cache.h"

namespace stagecraft::profiler {

/// Measured stage latencies (ms) by key, one file per device.
using ProfileCache = ValueCache;

}  // namespace stagecraft::profiler
