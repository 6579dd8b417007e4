#include "common/error.h"

// Error is header-only; this unit anchors the library's vtables for its subclasses.
namespace stagecraft {}
