#pragma once
/// Whole-file text I/O with errors that name the path.

#include <string>

namespace stagecraft {

/// Reads a whole file; throws IoError naming the path when it cannot be read.
std::string read_text_file(const std::string& path);

/// Writes a whole file through a temporary file and a rename, so a reader never sees half a file;
/// throws IoError naming the path when it cannot be written.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace stagecraft
