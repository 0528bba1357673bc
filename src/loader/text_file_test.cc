// Text inputs a flag names: read whole up to a limit (so /dev/zero is an error, not an endless read), a FIFO
// read like a file, a directory refused by name, and UTF-8 refusals that say where.
#include "loader/text_file.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "core/error.h"
#include "loader/test_files.h"

namespace attnzoo {
namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ArgumentError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ArgumentError";
  return "";
}

TEST(TextFile, ReadsAFileWholeUpToTheLimit) {
  testing::ScratchDir dir;
  const std::string path = (dir.path() / "t.txt").string();
  testing::write_file(path, "hello\nworld\n");
  EXPECT_EQ(read_text_file("-f", path), "hello\nworld\n");
  EXPECT_EQ(read_text_file("-f", path, 12), "hello\nworld\n");
  EXPECT_EQ(error_of([&] { read_text_file("-f", path, 11); }),
            "-f: '" + path + "': more than the 11 bytes a text input may hold");
}

TEST(TextFile, DevZeroStopsAtTheLimit) {
  EXPECT_EQ(error_of([] { read_text_file("--report", "/dev/zero", 3u << 20); }),
            "--report: '/dev/zero': more than the 3 MiB a text input may hold");
}

TEST(TextFile, RefusesADirectoryAndAMissingFileByName) {
  testing::ScratchDir dir;
  EXPECT_EQ(error_of([&] { read_text_file("--calibration", dir.str()); }),
            "--calibration: '" + dir.str() + "' is a directory, not a text file");
  const std::string missing = (dir.path() / "missing.txt").string();
  EXPECT_EQ(error_of([&] { read_text_file("-f", missing); }),
            "-f: cannot open '" + missing + "' (No such file or directory)");
}

TEST(TextFile, ReadsAFifo) {
  testing::ScratchDir dir;
  const std::string fifo = (dir.path() / "in.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] { std::ofstream(fifo) << "through a pipe"; });
  const std::string text = read_text_file("-f", fifo);
  writer.join();
  EXPECT_EQ(text, "through a pipe");
}

TEST(TextFile, Utf8RefusalSaysWhereAndWhose) {
  EXPECT_NO_THROW(require_utf8("héllo", "-p"));
  EXPECT_EQ(error_of([] { require_utf8("ok \xff\xfe", "-p"); }), "-p: not valid UTF-8 (byte 3)");
  EXPECT_EQ(error_of([] { require_utf8("h\xc3\xa9 \xe2\x82", "--system"); }), "--system: not valid UTF-8 (byte 4)");
}

}  // namespace
}  // namespace attnzoo
