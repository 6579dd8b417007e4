#pragma once
/// The one project error type. Every mistake a user can cause (a bad file, an unknown network, an
/// unsupported op, a shape mismatch, an invalid schedule, an absent device) raises a subclass of
/// `stagecraft::Error`; the CLI catches it and prints `what()` as one line. Internal invariants use
/// asserts instead.
///
/// Example:
///   try { load_graph("net.yaml"); }
///   catch (const stagecraft::Error& e) { std::cerr << "error: " << e.what() << "\n"; }

#include <exception>
#include <string>

namespace stagecraft {

/// Base of every user-facing error. The message names the file/op/field and the rule broken.
class Error : public std::exception {
 public:
  /// Creates an error with a complete one-line message.
  explicit Error(std::string message) : message_(std::move(message)) {}

  /// The one-line message.
  const char* what() const noexcept override { return message_.c_str(); }

  /// Puts `context` (e.g. "net.yaml:12:3: ") in front of the message. Used by loaders that catch
  /// an error from a lower layer and rethrow it with `throw;`, which keeps its dynamic type.
  void prepend(const std::string& context) { message_.insert(0, context); }

 private:
  std::string message_;
};

/// A file could not be read or written (missing, unreadable, not writable).
class IoError : public Error {
 public:
  using Error::Error;
};

/// A command-line value or option is invalid.
class UsageError : public Error {
 public:
  using Error::Error;
};

}  // namespace stagecraft
