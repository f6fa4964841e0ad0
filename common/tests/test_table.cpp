// CPU tests of result rows: the CSV contract (column names and order), empty fields for
// unmeasured numbers, appending, and the speedup column.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "harness/table.hpp"

namespace {

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) {
      out.push_back(field);
      field.clear();
    } else field += c;
  }
  out.push_back(field);
  return out;
}

ft::Row row(const std::string& chapter, double ms) {
  ft::Row r;
  r.chapter = chapter;
  r.variant = "v";
  r.what = "tiles, then more";
  r.batch = 4;
  r.heads = 32;
  r.seq_len = 4096;
  r.head_dim = 64;
  r.ms = ms;
  r.tflops = 1.5;
  r.model_bytes = 1e9;
  return r;
}

TEST(Csv, ContractColumnsFirstInOrder) {
  const auto cols = split(ft::csv_header());
  const std::vector<std::string> contract{
      "chapter", "variant", "pass", "dtype", "batch", "heads", "seq_len", "head_dim",
      "causal", "ms", "tflops", "model_bytes", "gbps", "rel_err", "speedup_vs_ch01"};
  ASSERT_GE(cols.size(), contract.size());
  for (size_t i = 0; i < contract.size(); ++i) EXPECT_EQ(cols[i], contract[i]) << "column " << i;
}

TEST(Csv, LineHasOneFieldPerColumnAndEmptyForUnmeasured) {
  const auto r = row("02", 12.5);
  const auto fields = split(ft::csv_line(r));
  const auto cols = split(ft::csv_header());
  ASSERT_EQ(fields.size(), cols.size());
  auto at = [&](const std::string& name) {
    for (size_t i = 0; i < cols.size(); ++i)
      if (cols[i] == name) return fields[i];
    return std::string("<missing>");
  };
  EXPECT_EQ(at("chapter"), "02");
  EXPECT_EQ(at("ms"), "12.5");
  EXPECT_EQ(at("model_bytes"), "1000000000");
  EXPECT_EQ(at("rel_err"), "") << "not verified: empty, not -1";
  EXPECT_EQ(at("speedup_vs_ch01"), "");
  EXPECT_EQ(at("what"), "tiles, then more") << "a comma inside text is quoted";
  EXPECT_EQ(at("causal"), "0");
  EXPECT_EQ(at("timing"), "call") << "launched from the host unless --graph";
}

TEST(Csv, AppendWritesHeaderOnce) {
  const std::string path = ::testing::TempDir() + "ft_table_test.csv";
  std::remove(path.c_str());
  ft::append_csv(path, {row("01", 10)});
  ft::append_csv(path, {row("02", 5), row("03", 4)});
  std::ifstream in(path);
  std::string line;
  int lines = 0, headers = 0;
  while (std::getline(in, line)) {
    ++lines;
    headers += line == ft::csv_header();
  }
  EXPECT_EQ(lines, 4);
  EXPECT_EQ(headers, 1);
  std::remove(path.c_str());
}

TEST(Csv, AppendRefusesAFileWithOtherColumns) {
  const std::string path = ::testing::TempDir() + "ft_table_old_header.csv";
  const std::string old = "chapter,variant,pass\n01,naive,forward\n";  // an older build's, shorter
  {
    std::ofstream out(path);
    out << old;
  }
  try {
    ft::append_csv(path, {row("02", 5)});
    ADD_FAILURE() << "rows appended under another header";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("other columns"), std::string::npos) << e.what();
  }
  std::ifstream in(path);
  const std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(kept, old) << "nothing written";
  std::remove(path.c_str());
}

TEST(Csv, AppendToUnwritablePathThrows) {
  EXPECT_THROW(ft::append_csv("/nonexistent-dir/x.csv", {row("01", 1)}), std::runtime_error);
}

TEST(Speedup, AgainstChapterOneOfTheSameShape) {
  std::vector<ft::Row> rows{row("01", 100), row("02", 25), row("04", 2)};
  ft::Row other = row("04", 1);
  other.seq_len = 1024;  // no chapter-01 row of this shape: speedup stays unknown
  rows.push_back(other);
  ft::fill_speedups(rows);
  EXPECT_DOUBLE_EQ(rows[0].speedup_vs_ch01, 1.0);
  EXPECT_DOUBLE_EQ(rows[1].speedup_vs_ch01, 4.0);
  EXPECT_DOUBLE_EQ(rows[2].speedup_vs_ch01, 50.0);
  EXPECT_LT(rows[3].speedup_vs_ch01, 0);
}

TEST(Format, Bytes) {
  EXPECT_EQ(ft::format_bytes(512), "512 B");
  EXPECT_EQ(ft::format_bytes(1.5e9), "1.5 GB");
  EXPECT_EQ(ft::format_bytes(34359738368.0), "34.4 GB");
}

TEST(Table, PrintsEveryRow) {
  char* buf = nullptr;
  size_t size = 0;
  FILE* f = open_memstream(&buf, &size);
  ft::print_rows({row("01", 100), row("02", 25)}, f);
  std::fclose(f);
  const std::string text(buf, size);
  free(buf);
  EXPECT_NE(text.find("01"), std::string::npos);
  EXPECT_NE(text.find("100.000"), std::string::npos);
  EXPECT_NE(text.find("25.000"), std::string::npos);
}

}  // namespace
