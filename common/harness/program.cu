/// @file program.cu
#include "harness/program.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/check.cuh"

namespace ft {

namespace {

OptionSpec option_spec(const ProgramSpec& spec) {
  OptionSpec o;
  o.program = spec.program;
  o.description = spec.title;
  // Each variant with the head dimensions it computes: --help lists them, and --head-dim
  // must suit every variant --variant selects.
  for (const auto& f : spec.forwards) {
    o.variants.push_back(f.variant);
    o.variant_head_dims.push_back(f.head_dims);
  }
  for (const auto& b : spec.backwards) {
    o.variants.push_back(b.variant);
    o.variant_head_dims.push_back(b.head_dims);
  }
  // The dtypes every implementation supports, in the first one's order (its first is the
  // default of --dtype).
  auto keep_dtypes = [&](const std::vector<DType>& types) {
    std::vector<DType> keep;
    for (DType t : o.dtypes)
      if (std::find(types.begin(), types.end(), t) != types.end()) keep.push_back(t);
    o.dtypes = keep;
  };
  if (!spec.forwards.empty()) o.dtypes = spec.forwards.front().dtypes;
  else if (!spec.backwards.empty()) o.dtypes = spec.backwards.front().dtypes;
  for (const auto& f : spec.forwards) keep_dtypes(f.dtypes);
  for (const auto& b : spec.backwards) keep_dtypes(b.dtypes);
  return o;
}

void write_ledger_csv(const std::string& path, const Problem& p, const std::string& chapter,
                      const std::string& variant, const std::string& pass,
                      const std::vector<KernelTraffic>& kernels) {
  std::ifstream probe(path, std::ios::ate);
  const bool fresh = !probe || probe.tellg() == 0;
  errno = 0;
  std::ofstream out(path, std::ios::app);
  if (!out)
    throw std::runtime_error("cannot write the --ledger-csv file '" + path + "': " +
                             std::strerror(errno));
  if (fresh)
    out << "chapter,variant,kernel,pass,batch,heads,seq_len,head_dim,causal,model_read_bytes,"
           "model_write_bytes,model_dram_read_bytes,model_dram_write_bytes,flops\n";
  for (const auto& k : kernels)
    out << chapter << ',' << variant << ',' << k.kernel << ',' << pass << ',' << p.batch << ','
        << p.heads_q << ',' << p.len_q << ',' << p.head_dim << ',' << (p.causal ? 1 : 0) << ','
        << std::fixed << k.read_bytes << ',' << k.write_bytes << ',' << k.dram_read_bytes << ','
        << k.dram_write_bytes << ',' << k.flops << '\n';
}

/// The line under the title: the shape, the dtype (once), the softmax scale.
std::string problem_line(const Problem& p) {
  Problem shape = p;
  shape.dtype = DType::Float32;  // describe() names any other dtype; it is named once, here
  return shape.describe() + ", " + dtype_name(p.dtype) + ", scale " +
         (p.scale != 0.f ? std::to_string(p.scale) : "1/sqrt(d)");
}

}  // namespace

int run_program(int argc, char** argv, const ProgramSpec& spec) {
  const ParseResult parsed = parse_options(argc, argv, option_spec(spec));
  if (!parsed.ok) {
    std::fprintf(parsed.exit_code == 0 ? stdout : stderr, "%s\n", parsed.message.c_str());
    return parsed.exit_code;
  }
  const Options& o = parsed.options;
  const Problem p = o.problem();
  std::printf("%s\n%s\n", spec.title.c_str(), problem_line(p).c_str());
  // Without --variant every variant that takes this d runs; the others are named, once.
  std::vector<std::string> skipped;
  auto note_skip = [&](const std::string& variant, const std::vector<int>& dims) {
    if (dims.empty() || std::count(dims.begin(), dims.end(), p.head_dim) > 0) return;
    if (std::find(skipped.begin(), skipped.end(), variant) != skipped.end()) return;
    skipped.push_back(variant);
    std::string list;
    for (int d : dims) list += (list.empty() ? "" : ", ") + std::to_string(d);
    std::printf("(variant %s skipped: it takes d = %s only)\n", variant.c_str(), list.c_str());
  };
  for (const auto& f : spec.forwards)
    if (o.selects(f.variant)) note_skip(f.variant, f.head_dims);
  for (const auto& b : spec.backwards)
    if (o.selects(b.variant)) note_skip(b.variant, b.head_dims);
  auto selected = [&](const std::string& variant) {
    return o.selects(variant) && std::find(skipped.begin(), skipped.end(), variant) == skipped.end();
  };
  try {
    std::vector<Row> rows;
    for (const auto& f : spec.forwards)
      if (selected(f.variant)) {
        check_supported(f, p);
        const auto kernels = f.traffic(p);
        print_ledger("chapter " + f.chapter + " " + f.variant, p, kernels);
        if (!o.ledger_csv.empty())
          write_ledger_csv(o.ledger_csv, p, f.chapter, f.variant, "forward", kernels);
      }
    for (const auto& b : spec.backwards)
      if (selected(b.variant)) {
        check_supported(b, p);
        const auto kernels = b.traffic(p);
        print_ledger("chapter " + b.chapter + " " + b.variant + " (backward)", p, kernels);
        if (!o.ledger_csv.empty())
          write_ledger_csv(o.ledger_csv, p, b.chapter, b.variant, "backward", kernels);
      }

    std::string why;
    if (!gpu_available(&why)) {
      std::fprintf(stderr,
                   "%s: %s: printed the traffic model's predictions only; "
                   "nothing was run or timed\n",
                   spec.program.c_str(), why.c_str());
      return 3;
    }
    std::printf("\nGPU: %s\n", gpu_name().c_str());

    MeasureConfig cfg;
    cfg.warmup = o.warmup;
    cfg.iters = o.iters;
    cfg.verify = o.verify;
    cfg.seed = o.seed;
    cfg.graph = o.graph;
    bool wrong = false;
    auto attempt = [&](const std::string& label, const std::function<Row()>& measure) {
      std::printf("measuring %s ...\n", label.c_str());
      std::fflush(stdout);
      try {
        rows.push_back(measure());
      } catch (const WrongResult& e) {
        std::fprintf(stderr, "%s: WRONG RESULT: %s\n", spec.program.c_str(), e.what());
        wrong = true;
      }
    };
    if (o.baseline)
      for (const auto& b : spec.baseline) {
        try {
          check_fits(forward_device_bytes(b, p), "baseline");
        } catch (const Unsupported& e) {
          std::printf("(baseline chapter 01 skipped: %s)\n", e.what());
          continue;
        }
        attempt("chapter 01 baseline", [&] { return measure_forward(b, p, cfg); });
      }
    for (const auto& f : spec.forwards)
      if (selected(f.variant))
        attempt("chapter " + f.chapter + " " + f.variant, [&] { return measure_forward(f, p, cfg); });
    for (const auto& b : spec.backwards)
      if (selected(b.variant))
        attempt("chapter " + b.chapter + " " + b.variant + " backward",
                [&] { return measure_backward(b, p, cfg); });
    if (spec.extra) {  // chapter-specific rows; a wrong result there fails like any other
      try {
        spec.extra(o, rows);
      } catch (const WrongResult& e) {
        std::fprintf(stderr, "%s: WRONG RESULT: %s\n", spec.program.c_str(), e.what());
        wrong = true;
      }
    }

    fill_speedups(rows);
    std::printf("\n");
    print_rows(rows);
    if (!o.csv.empty()) {
      append_csv(o.csv, rows);
      std::printf("\nappended %zu rows to %s\n", rows.size(), o.csv.c_str());
    }
    return wrong ? 1 : 0;
  } catch (const Unsupported& e) {
    std::fprintf(stderr, "%s: error: %s\n", spec.program.c_str(), e.what());
    return 2;
  } catch (const CudaError& e) {
    std::fprintf(stderr, "%s: CUDA error: %s\n", spec.program.c_str(), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", spec.program.c_str(), e.what());
    return 1;
  }
}

}  // namespace ft
