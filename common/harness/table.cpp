/// @file table.cpp
#include "harness/table.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "harness/text.hpp"

namespace ft {

namespace {
/// A measured number, or an empty field when it was not measured (negative).
std::string num(double v, int precision = 6) {
  if (v < 0 || !std::isfinite(v)) return "";
  std::ostringstream s;
  s.precision(precision);
  s << v;
  return s.str();
}
/// CSV quoting for free text (commas or quotes inside).
std::string text(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}
}  // namespace

std::string csv_header() {
  return "chapter,variant,pass,dtype,batch,heads,seq_len,head_dim,causal,ms,tflops,model_bytes,"
         "gbps,rel_err,speedup_vs_ch01,what,model_requested_bytes,ms_min,ms_max,iters,"
         "extra_mem_bytes,gpu,heads_kv,len_kv,causal_align,timing";
}

std::string csv_columns_differ(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string header;
  if (!in || !std::getline(in, header) || header == csv_header()) return "";
  return "CSV file '" + path + "' has other columns than this program writes (from an older build?): "
         "give --csv a new file, or move this one away";
}

std::string csv_line(const Row& r) {
  std::ostringstream s;
  s << text(r.chapter) << ',' << text(r.variant) << ',' << r.pass << ',' << r.dtype << ','
    << r.batch << ',' << r.heads << ',' << r.seq_len << ',' << r.head_dim << ','
    << (r.causal ? 1 : 0) << ',' << num(r.ms) << ',' << num(r.tflops) << ','
    << num(r.model_bytes, 12) << ',' << num(r.gbps) << ',' << num(r.rel_err, 3) << ','
    << num(r.speedup_vs_ch01, 4) << ',' << text(r.what) << ','
    << num(r.model_requested_bytes, 12) << ',' << num(r.ms_min) << ',' << num(r.ms_max) << ','
    << r.iters << ',' << num(r.extra_mem_bytes, 12) << ',' << text(r.gpu) << ','
    << r.heads_kv << ',' << r.len_kv << ',' << r.causal_align << ',' << r.timing;
  return s.str();
}

void append_csv(const std::string& path, const std::vector<Row>& rows) {
  if (std::string why = csv_columns_differ(path); !why.empty()) throw std::runtime_error(why);
  bool fresh = true;
  {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    fresh = !in || in.tellg() == 0;
  }
  errno = 0;
  std::ofstream out(path, std::ios::app);
  if (!out)
    throw std::runtime_error("cannot write CSV file '" + path + "': " + std::strerror(errno));
  if (fresh) out << csv_header() << '\n';
  for (const auto& r : rows) out << csv_line(r) << '\n';
  out.flush();
  if (!out)
    throw std::runtime_error("error writing CSV file '" + path + "': " + std::strerror(errno));
}

void fill_speedups(std::vector<Row>& rows) {
  for (auto& r : rows) {
    if (r.ms <= 0) continue;
    for (const auto& base : rows)
      if (base.chapter == "01" && base.pass == r.pass && base.ms > 0 && base.batch == r.batch &&
          base.heads == r.heads && base.seq_len == r.seq_len && base.head_dim == r.head_dim &&
          base.heads_kv == r.heads_kv && base.len_kv == r.len_kv &&
          base.causal == r.causal && base.causal_align == r.causal_align)
        r.speedup_vs_ch01 = base.ms / r.ms;
  }
}

std::string format_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) {
    b /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.3g %s", b, units[u]);
  return buf;
}

void print_rows(const std::vector<Row>& rows, FILE* out) {
  constexpr size_t kWhatWidth = 30;  // the other columns take 118: a row stays under 150
  std::fprintf(out, "%-3s %-22s %-7s %-9s %-30s %10s %8s %11s %9s %8s %9s %11s\n", "ch",
               "variant", "dtype", "pass", "what changed", "ms", "TFLOP/s", "model bytes", "GB/s", "speedup",
               "rel_err", "extra mem");
  for (const auto& r : rows) {
    auto f = [](double v, const char* fmt) {
      char b[32];
      if (v < 0) return std::string("-");
      std::snprintf(b, sizeof b, fmt, v);
      return std::string(b);
    };
    std::fprintf(out, "%-3s %-22s %-7s %-9s %s %10s %8s %11s %9s %8s %9s %11s\n",
                 r.chapter.c_str(), r.variant.c_str(), r.dtype.c_str(), r.pass.c_str(),
                 fit_column(r.what, kWhatWidth).c_str(),
                 f(r.ms, "%.3f").c_str(), f(r.tflops, "%.2f").c_str(),
                 format_bytes(r.model_bytes).c_str(), f(r.gbps, "%.0f").c_str(),
                 f(r.speedup_vs_ch01, "%.1fx").c_str(), f(r.rel_err, "%.1e").c_str(),
                 r.extra_mem_bytes < 0 ? "-" : format_bytes(r.extra_mem_bytes).c_str());
  }
}

}  // namespace ft
