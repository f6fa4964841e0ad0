// ft::Instances (device/dispatch.cuh): each compiled (dtype, head dim) reaches its own
// instance, everything else is refused naming both lists, and the lists the registry gets
// are the grid that is compiled.
#include <gtest/gtest.h>

#include <string>
#include <type_traits>

#include "device/dispatch.cuh"

namespace {

using Grid = ft::Instances<ft::DTypes<ft::DType::BFloat16, ft::DType::Float16>,
                           ft::HeadDims<64, 128>>;

ft::Problem problem(ft::DType t, int d) {
  ft::Problem p;
  p.dtype = t;
  p.head_dim = d;
  return p;
}

/// Which instance a problem reaches: "bf16/64" and so on.
std::string reached(const ft::Problem& p) {
  std::string seen;
  Grid::dispatch(p, "test", [&](auto i) {
    using I = decltype(i);
    using T = typename I::Element;
    const char* t = std::is_same_v<T, __nv_bfloat16> ? "bf16"
                    : std::is_same_v<T, __half>      ? "fp16"
                                                     : "other";
    seen += std::string(seen.empty() ? "" : "+") + t + "/" + std::to_string(I::kHeadDim);
  });
  return seen;
}

TEST(Dispatch, EachCompiledPairReachesItsOwnInstanceOnce) {
  EXPECT_EQ(reached(problem(ft::DType::BFloat16, 64)), "bf16/64");
  EXPECT_EQ(reached(problem(ft::DType::BFloat16, 128)), "bf16/128");
  EXPECT_EQ(reached(problem(ft::DType::Float16, 64)), "fp16/64");
  EXPECT_EQ(reached(problem(ft::DType::Float16, 128)), "fp16/128");
}

TEST(Dispatch, PairsNotCompiledAreRefusedNamingTheLists) {
  for (const auto& p : {problem(ft::DType::Float32, 64), problem(ft::DType::BFloat16, 96),
                        problem(ft::DType::Float16, 32)}) {
    try {
      reached(p);
      FAIL() << "dtype " << ft::dtype_name(p.dtype) << ", d = " << p.head_dim << " was accepted";
    } catch (const ft::Unsupported& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("test: compiled for dtype bf16, fp16 and head_dim 64, 128"), std::string::npos) << m;
      EXPECT_NE(m.find(std::string("not ") + ft::dtype_name(p.dtype) + " with head_dim " +
                       std::to_string(p.head_dim)), std::string::npos) << m;
    }
  }
}

TEST(Dispatch, TheListsAreTheCompiledGrid) {
  EXPECT_EQ(Grid::dtypes(), (std::vector<ft::DType>{ft::DType::BFloat16, ft::DType::Float16}));
  EXPECT_EQ(Grid::head_dims(), (std::vector<int>{64, 128}));
  using F32 = ft::Instances<ft::DTypes<ft::DType::Float32>, ft::HeadDims<32, 64, 128>>;
  EXPECT_EQ(F32::head_dims(), (std::vector<int>{32, 64, 128}));
  bool ran = false;
  F32::dispatch(problem(ft::DType::Float32, 32), "test", [&](auto i) {
    ran = std::is_same_v<typename decltype(i)::Element, float> && decltype(i)::kHeadDim == 32;
  });
  EXPECT_TRUE(ran);
}

}  // namespace
