// The tour: every chapter on one problem, one staircase table.
//
//   cmake --workflow --preset tour      (configure, build, run this; on a GPU: build/tour.csv)
//   ./build/chapters/tour/tour --seq-len 16384 --batch 1 --csv tour.csv
//
// Each step is the same function-pointer interface the chapter programs measure (see
// common/harness/harness.hpp), timed by the same harness, verified against the same float64
// reference. Without a GPU the tour says so, prints what the traffic model predicts each
// step moves through device memory, writes no CSV, and exits 0. Each step runs in its own
// dtype and variant: the tour refuses --dtype and --variant, saying which program takes them
// (tour.hpp).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/check.cuh"
#include "harness/harness.hpp"
#include "harness/options.hpp"
#include "harness/registry.hpp"
#include "harness/text.hpp"
#include "tour/tour.hpp"

namespace {

/// The staircase, in order: the implementations the chapters registered as tour steps
/// (registry.hpp), forwards first (chapters 01–04 in float32 on the CUDA cores, then the
/// tensor-core chapters in bf16), then the backward passes (chapter 05's two in float32,
/// then the tensor-core backward in bf16), and the decoding steps (chapter 11) on the
/// decode_problem. A new chapter's step appears here by registering.
struct Steps {
  std::vector<ft::ForwardImpl> forwards;
  std::vector<ft::BackwardImpl> backwards;
  std::vector<ft::ForwardImpl> decodes;
  Steps() {
    for (const auto& f : ft::registered_forwards()) {
      if (f.listing.tour) forwards.push_back(f.impl);
      if (f.listing.decode) decodes.push_back(f.impl);
    }
    for (const auto& b : ft::registered_backwards())
      if (b.listing.tour) backwards.push_back(b.impl);
  }
};

/// The tour's problem as a step runs it: in the step's own first dtype when it does not
/// compute in the requested one (the tensor-core chapters run bf16 when the tour is float32).
template <class Impl>
ft::Problem problem_for(const Impl& impl, ft::Problem p) {
  if (std::find(impl.dtypes.begin(), impl.dtypes.end(), p.dtype) == impl.dtypes.end())
    p.dtype = impl.dtypes.front();
  return p;
}

/// The decoding steps' problem: the tour's sequences each decode one new token, one query
/// row against their N keys (the mask's diagonal bottom-right: every key is in its past).
ft::Problem decode_problem(ft::Problem p) {
  p.len_kv = p.len_q;
  p.len_q = 1;
  p.align = ft::CausalAlign::BottomRight;
  return p;
}

void print_predictions(const Steps& steps, const ft::Problem& p) {
  std::printf("\nPredicted by the traffic model (no GPU needed): %s\n", p.describe().c_str());
  constexpr size_t kWhatWidth = 44;  // the other columns take 83: a row stays under 130
  std::printf("%-3s %-12s %-8s %-9s %s %12s %12s %10s %9s\n", "ch", "variant", "dtype",
              "pass", ft::fit_column("what changed", kWhatWidth).c_str(), "DRAM bytes",
              "requested", "FLOPs", "FLOP/B");
  auto line = [](const std::string& ch, const std::string& variant, ft::DType dtype,
                 const char* pass, const std::string& what,
                 const std::vector<ft::KernelTraffic>& kernels) {
    const ft::KernelTraffic t = ft::total(kernels);
    std::printf("%-3s %-12s %-8s %-9s %s %12s %12s %10.3g %9.2f\n", ch.c_str(),
                variant.c_str(), ft::dtype_name(dtype), pass,
                ft::fit_column(what, kWhatWidth).c_str(), ft::format_bytes(t.dram_bytes()).c_str(),
                ft::format_bytes(t.requested_bytes()).c_str(), t.flops, t.intensity());
  };
  for (const auto& f : steps.forwards) {
    try {
      const ft::Problem q = problem_for(f, p);
      ft::check_supported(f, q);
      line(f.chapter, f.variant, q.dtype, "forward", f.what, f.traffic(q));
    } catch (const ft::Unsupported& e) {
      std::printf("%-3s %-12s (%s)\n", f.chapter.c_str(), f.variant.c_str(), e.what());
    }
  }
  for (const auto& b : steps.backwards) {
    try {
      const ft::Problem q = problem_for(b, p);
      ft::check_supported(b, q);
      line(b.chapter, b.variant, q.dtype, "backward", b.what, b.traffic(q));
    } catch (const ft::Unsupported& e) {
      std::printf("%-3s %-12s (%s)\n", b.chapter.c_str(), b.variant.c_str(), e.what());
    }
  }
  for (const auto& f : steps.decodes) {
    try {
      const ft::Problem q = problem_for(f, decode_problem(p));
      ft::check_supported(f, q);
      line(f.chapter, f.variant, q.dtype, "decode", f.what, f.traffic(q));
    } catch (const ft::Unsupported& e) {
      std::printf("%-3s %-12s (%s)\n", f.chapter.c_str(), f.variant.c_str(), e.what());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  ft::ParseResult parsed = ft::parse_options(argc, argv, tour::options());
  if (!parsed.ok) {
    std::fprintf(parsed.exit_code == 0 ? stdout : stderr, "%s\n", parsed.message.c_str());
    return parsed.exit_code;
  }
  ft::Options o = parsed.options;
  if (o.csv.empty()) o.csv = "tour.csv";
  const ft::Problem p = o.problem();
  const Steps steps;

  std::printf("Flash attention, step by step — the tour\n");
  print_predictions(steps, p);

  std::string why;
  if (!ft::gpu_available(&why)) {
    std::printf("\n%s", tour::no_gpu_note(why, o.csv).c_str());
    return 0;
  }
  // Before minutes of measuring: the default tour.csv too must be writable (a --csv given
  // was checked with the flags).
  if (const std::string bad = ft::why_unwritable(o.csv); !bad.empty()) {
    std::fprintf(stderr, "tour: error: cannot write '%s': %s (choose another file with --csv)\n",
                 o.csv.c_str(), bad.c_str());
    return 2;
  }
  try {
    std::printf("\nGPU: %s — verifying against the float64 reference, then timing "
                "(median of up to %d runs, L2 flushed before each)\n",
                ft::gpu_name().c_str(), o.iters);
    ft::MeasureConfig cfg;
    cfg.iters = o.iters;
    cfg.warmup = o.warmup;
    cfg.verify = o.verify;
    cfg.seed = o.seed;
    std::vector<ft::Row> rows;
    bool wrong = false;
    auto attempt = [&](const std::string& label, auto measure) {
      std::printf("  %-40s", label.c_str());
      std::fflush(stdout);
      try {
        rows.push_back(measure());
        std::printf(" %10.3f ms\n", rows.back().ms);
      } catch (const ft::Unsupported& e) {
        std::printf(" skipped: %s\n", e.what());
      } catch (const ft::WrongResult& e) {
        std::printf(" WRONG RESULT\n");
        std::fprintf(stderr, "tour: %s\n", e.what());
        wrong = true;
      }
      std::fflush(stdout);
    };
    for (const auto& f : steps.forwards)
      attempt("chapter " + f.chapter + " " + f.variant,
              [&] { return ft::measure_forward(f, problem_for(f, p), cfg); });
    for (const auto& b : steps.backwards)
      attempt("chapter " + b.chapter + " " + b.variant + " (backward)",
              [&] { return ft::measure_backward(b, problem_for(b, p), cfg); });
    for (const auto& f : steps.decodes)
      attempt("chapter " + f.chapter + " " + f.variant + " (decode)",
              [&] { return ft::measure_forward(f, problem_for(f, decode_problem(p)), cfg); });
    ft::fill_speedups(rows);
    std::printf("\n");
    ft::print_rows(rows);
    std::remove(o.csv.c_str());
    ft::append_csv(o.csv, rows);
    std::printf("\nwrote %s\n", o.csv.c_str());
    return wrong ? 1 : 0;
  } catch (const ft::CudaError& e) {
    std::fprintf(stderr, "tour: CUDA error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tour: error: %s\n", e.what());
    return 1;
  }
}
