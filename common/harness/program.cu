/// @file program.cu
#include "harness/program.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "core/check.cuh"

namespace ft {

namespace {

OptionSpec option_spec(const ProgramSpec& spec) {
  OptionSpec o;
  o.program = spec.program;
  o.description = spec.title;
  for (const auto& f : spec.forwards) o.variants.push_back(f.variant);
  for (const auto& b : spec.backwards) o.variants.push_back(b.variant);
  // The head dimensions every implementation supports (empty list: any d).
  bool first = true;
  auto intersect = [&](const std::vector<int>& dims) {
    if (dims.empty()) return;
    if (first) {
      o.head_dims = dims;
      first = false;
      return;
    }
    std::vector<int> keep;
    for (int d : o.head_dims)
      if (std::find(dims.begin(), dims.end(), d) != dims.end()) keep.push_back(d);
    o.head_dims = keep;
  };
  for (const auto& f : spec.forwards) intersect(f.head_dims);
  for (const auto& b : spec.backwards) intersect(b.head_dims);
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
  std::ofstream out(path, std::ios::app);
  if (!out) throw std::runtime_error("cannot write ledger CSV '" + path + "'");
  if (fresh)
    out << "chapter,variant,kernel,pass,batch,heads,seq_len,head_dim,causal,model_read_bytes,"
           "model_write_bytes,model_dram_read_bytes,model_dram_write_bytes,flops\n";
  for (const auto& k : kernels)
    out << chapter << ',' << variant << ',' << k.kernel << ',' << pass << ',' << p.batch << ','
        << p.heads_q << ',' << p.len_q << ',' << p.head_dim << ',' << (p.causal ? 1 : 0) << ','
        << std::fixed << k.read_bytes << ',' << k.write_bytes << ',' << k.dram_read_bytes << ','
        << k.dram_write_bytes << ',' << k.flops << '\n';
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
  auto selected = [&](const std::string& variant) { return o.selects(variant); };

  std::printf("%s\n%s, %s, scale %s\n", spec.title.c_str(), p.describe().c_str(),
              dtype_name(p.dtype), p.scale != 0.f ? std::to_string(p.scale).c_str() : "1/sqrt(d)");
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
                   "%s: no CUDA GPU (%s): printed the traffic model's predictions only; "
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
