// Cache files written by several writers at once (server replicas sharing one cache folder save
// the same profile and schedule files): every write succeeds, the file holds one writer's whole
// text, and no temporary file is left behind.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/files.h"
#include "common/strings.h"

namespace stagecraft {
namespace {

TEST(CacheFiles, WritersOfOneFileAtOnceAllSucceed) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / cat("sc_files_", ::getpid());
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "profile.tsv").string();
  std::set<std::string> texts;
  for (int w = 0; w < 6; ++w) texts.insert(std::string(20000 + w, static_cast<char>('a' + w)));
  std::vector<std::string> failures(texts.size());
  std::vector<std::thread> writers;
  int w = 0;
  for (const std::string& text : texts) {
    writers.emplace_back([&, w, text] {
      try {
        for (int i = 0; i < 40; ++i) write_text_file(path, text);
      } catch (const Error& e) {
        failures[static_cast<size_t>(w)] = e.what();
      }
    });
    ++w;
  }
  for (auto& t : writers) t.join();
  for (const std::string& f : failures) EXPECT_EQ(f, "");
  EXPECT_EQ(texts.count(read_text_file(path)), 1u) << "the file mixes writers' texts";
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    ++entries;
    EXPECT_EQ(e.path().filename(), "profile.tsv") << "left behind";
  }
  EXPECT_EQ(entries, 1u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stagecraft
