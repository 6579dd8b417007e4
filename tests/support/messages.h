#pragma once
// Checks of the messages errors carry: what a user reads must name the right things.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <string_view>

namespace stagecraft::testing {

/// Expects `message` to contain every one of `parts` (each missing one fails with the message).
inline void expect_mentions(const std::string& message, std::initializer_list<std::string_view> parts) {
  for (std::string_view part : parts) {
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  }
}

/// The message of the `E` that `f()` throws; a failure (and "") when it throws nothing.
template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error was thrown";
  return "";
}

}  // namespace stagecraft::testing
