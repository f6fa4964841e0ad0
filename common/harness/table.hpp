/// @file table.hpp
/// @brief One measured row of the staircase, printed as a table and written as CSV
/// (`tour.csv`, columns fixed by the results contract, contract 4 in docs/contracts.md).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace ft {

/// A measured (or, without a GPU, predicted) line: one implementation on one problem.
struct Row {
  std::string chapter;   ///< "01" … "05"
  std::string variant;   ///< e.g. "naive", "fast", "flash"
  std::string what;      ///< what this step changes, for the table
  std::string pass = "forward";  ///< "forward" or "backward"
  std::string dtype = "float32";
  int batch = 0, heads = 0, seq_len = 0, head_dim = 0;  ///< heads_q and len_q of the problem
  bool causal = false;
  int heads_kv = 0, len_kv = 0;       ///< the key/value side (equal to heads, seq_len: self-attention)
  std::string causal_align = "top-left";  ///< "top-left" or "bottom-right" (problem.hpp)
  double ms = -1;            ///< median time; negative: not measured
  double ms_min = -1, ms_max = -1;
  int iters = 0;
  double tflops = -1;
  double model_bytes = 0;    ///< DRAM bytes predicted by the traffic model (read + write)
  double model_requested_bytes = 0;  ///< bytes requested from global memory, model
  double gbps = -1;          ///< model_bytes / ms
  double rel_err = -1;       ///< relative L2 error against the float64 reference; negative: not checked
  double speedup_vs_ch01 = -1;  ///< ch01's ms on the same problem / this ms; negative: unknown
  double extra_mem_bytes = -1;  ///< device memory beyond inputs and outputs, measured
  std::string gpu;           ///< device name, empty without a GPU
  std::string timing = "call";  ///< "call": launched from the host; "graph": a CUDA graph's replay (--graph)
};

/// The CSV header: the contract's columns first, extra columns after.
std::string csv_header();
/// One row as CSV (no trailing newline).
std::string csv_line(const Row& r);
/// "" when rows can be appended to `path` under csv_header(): it does not exist, is empty, or
/// starts with that header. Otherwise why not (a file from an older build, with other columns:
/// rows under two headers in one file would be misread), for the caller's error.
std::string csv_columns_differ(const std::string& path);
/// Appends rows to `path`, writing the header first when the file is new or empty.
/// Throws std::runtime_error when the file cannot be written or csv_columns_differ says why not.
void append_csv(const std::string& path, const std::vector<Row>& rows);

/// Fills speedup_vs_ch01 of every row that has a chapter-01 row of the same pass and shape.
void fill_speedups(std::vector<Row>& rows);

/// Prints the staircase table (measured rows) to `out`.
void print_rows(const std::vector<Row>& rows, FILE* out = stdout);

/// Human-readable byte counts: "1.07 GB", "512 B".
std::string format_bytes(double bytes);

}  // namespace ft
