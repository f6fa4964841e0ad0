// GPU tests of the C API (common/api/flashtut.h): every float32 pass the registry lists, called
// by name exactly as C code (or ctypes) would call it, matches the float64 reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "device/buffer.cuh"
#include "api/capi.hpp"
#include "api/flashtut.h"
#include "reference/inputs.hpp"
#include "reference/precision.hpp"  // ft::reference_inputs
#include "reference/reference.hpp"
#include "harness/testing.hpp"
#include "harness/verify.hpp"

namespace {

ft_problem problem(int N, int d, bool causal) {
  return ft_problem{2, 3, 3, N, N, d, causal ? 1 : 0, FT_CAUSAL_TOP_LEFT, 0.f, FT_DTYPE_FLOAT32};
}

/// A pass the registry lists, by name; a backward with the forward it pairs with (the one
/// that leaves O, lse and, for the baseline, the workspace for it).
struct Case {
  std::string name;
  std::string forward;
};

// Test listings print the name, not the struct's bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

/// The registry's float32 implementations of one pass (the CUDA-core chapters, 01–05).
std::vector<Case> float32_cases(const std::string& pass) {
  std::vector<Case> cases;
  for (int i = 0; i < ft_impl_count(); ++i) {
    ft_impl_info info{};
    if (ft_impl_info_at(i, &info) != 0 || info.pass != pass) continue;
    if ((info.dtypes >> FT_DTYPE_FLOAT32) & 1) cases.push_back({info.name, info.pairs_with});
  }
  return cases;
}

ft::Problem to_problem(const ft_problem& c) { return ft::capi::to_problem(c); }

void expect_close(const char* what, const std::vector<float>& got, const std::vector<double>& ref) {
  const ft::VerifyResult v = ft::verify(what, got.data(), ref.data(), got.size(), ft::kFloat32Tolerance);
  EXPECT_TRUE(v.ok) << v.message;
}

class CApiForward : public ::testing::TestWithParam<Case> {};

TEST_P(CApiForward, MatchesReference) {
  FT_REQUIRE_GPU();
  for (bool causal : {false, true}) {
    const ft_problem c = problem(77, 64, causal);  // 77: a partial tile for every kernel
    const ft::Problem p = to_problem(c);
    const auto in = ft::make_inputs(p, ft::InputKind::Uniform, 99);
    const size_t n = size_t(p.elems());
    ft::DeviceBuffer<float> Q(n), K(n), V(n), O(n), lse(size_t(p.rows()));
    const char* name = GetParam().name.c_str();
    ft::DeviceBuffer<unsigned char> work(ft_forward_workspace_bytes(name, c));
    Q.upload(in.Q);
    K.upload(in.K);
    V.upload(in.V);
    O.poison();
    lse.poison();
    ASSERT_EQ(ft_forward(name, c, Q.get(), K.get(), V.get(), O.get(), lse.get(), work.get(), 0), 0)
        << ft_last_error();
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<double> rO(n), rlse(size_t(p.rows()));
    ft::reference_forward(p, in.Q.data(), in.K.data(), in.V.data(), rO.data(), rlse.data());
    expect_close("O", O.download(), rO);
    expect_close("lse", lse.download(), rlse);
  }
}

INSTANTIATE_TEST_SUITE_P(Registered, CApiForward, ::testing::ValuesIn(float32_cases("forward")),
                         [](const ::testing::TestParamInfo<Case>& param_info) { return param_info.param.name; });

class CApiBackward : public ::testing::TestWithParam<Case> {};

TEST_P(CApiBackward, MatchesReference) {
  FT_REQUIRE_GPU();
  for (bool causal : {false, true}) {
    const ft_problem c = problem(77, 64, causal);
    const ft::Problem p = to_problem(c);
    const auto in = ft::make_inputs(p, ft::InputKind::Uniform, 98);
    const size_t n = size_t(p.elems());
    ft::DeviceBuffer<float> Q(n), K(n), V(n), O(n), lse(size_t(p.rows())), dO(n), dQ(n), dK(n), dV(n);
    // One workspace serves both passes, as large as either needs.
    const char* name = GetParam().name.c_str();
    const char* forward = GetParam().forward.c_str();
    const size_t ws = std::max(ft_forward_workspace_bytes(forward, c), ft_backward_workspace_bytes(name, c));
    ft::DeviceBuffer<unsigned char> work(ws);
    Q.upload(in.Q);
    K.upload(in.K);
    V.upload(in.V);
    dO.upload(in.dO);
    for (auto* b : {&dQ, &dK, &dV}) b->poison();
    ASSERT_EQ(ft_forward(forward, c, Q.get(), K.get(), V.get(), O.get(), lse.get(), work.get(), 0), 0)
        << ft_last_error();
    ASSERT_EQ(ft_backward(name, c, Q.get(), K.get(), V.get(), O.get(), lse.get(), dO.get(),
                          dQ.get(), dK.get(), dV.get(), work.get(), 0),
              0)
        << ft_last_error();
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<double> rdQ(n), rdK(n), rdV(n);
    ft::reference_backward(p, in.Q.data(), in.K.data(), in.V.data(), in.dO.data(), rdQ.data(),
                           rdK.data(), rdV.data());
    expect_close("dQ", dQ.download(), rdQ);
    expect_close("dK", dK.download(), rdK);
    expect_close("dV", dV.download(), rdV);
  }
}

INSTANTIATE_TEST_SUITE_P(Registered, CApiBackward, ::testing::ValuesIn(float32_cases("backward")),
                         [](const ::testing::TestParamInfo<Case>& param_info) { return param_info.param.name; });

// Views through the C API (version 3): q, k, v as a model's projection views, O, dO and the
// gradients in [B, N, H, d], every tensor with strides of its own (ft::testing::test_layout),
// through ft_forward_strided("ch07") and ft_backward_strided("ch08"), against the float64
// reference; the elements between the views stay as poisoned.
struct Spread {
  std::vector<size_t> at;  // element (b, h, n, c)'s place, in the dense order
  size_t span = 0;
  Spread(const ft::Problem& p, const ft::Strides& s) {
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t h = 0; h < p.heads_q; ++h)
        for (int64_t i = 0; i < p.len_q; ++i)
          for (int64_t c = 0; c < p.head_dim; ++c)
            at.push_back(size_t(b * s.batch + h * s.head + i * s.row + c));
    span = *std::max_element(at.begin(), at.end()) + 1;
  }
  std::vector<float> scatter(const std::vector<float>& dense) const {
    std::vector<float> out(span, 0.f);
    for (size_t k = 0; k < at.size(); ++k) out[at[k]] = dense[k];
    return out;
  }
  std::vector<float> gather(const std::vector<float>& spread) const {
    std::vector<float> out(at.size());
    for (size_t k = 0; k < at.size(); ++k) out[k] = spread[at[k]];
    return out;
  }
};

ft_strides to_c(const ft::Strides& s) { return ft_strides{s.batch, s.head, s.row}; }

TEST(CApiViews, StridedPassesMatchReference) {
  FT_REQUIRE_GPU();
  for (bool causal : {false, true}) {
    ft_problem c = problem(77, 64, causal);
    c.dtype = FT_DTYPE_BF16;
    const ft::Problem p = to_problem(c);
    const ft::Layout l = ft::testing::test_layout(p, ft::testing::ViewKind::kProjection);
    const ft_layout cl{to_c(l.Q), to_c(l.K), to_c(l.V), to_c(l.O), to_c(l.dO), to_c(l.dQ), to_c(l.dK), to_c(l.dV)};
    const auto in = ft::reference_inputs(p, ft::InputKind::Uniform, 97);  // rounded to bf16
    const Spread sQ(p, l.Q), sK(p, l.K), sV(p, l.V), sO(p, l.O), sdO(p, l.dO), sdQ(p, l.dQ),
        sdK(p, l.dK), sdV(p, l.dV);
    ft::DeviceTensor Q(p.dtype, sQ.span), K(p.dtype, sK.span), V(p.dtype, sV.span), O(p.dtype, sO.span),
        dO(p.dtype, sdO.span), dQ(p.dtype, sdQ.span), dK(p.dtype, sdK.span), dV(p.dtype, sdV.span);
    ft::DeviceBuffer<float> lse(size_t(p.rows()));
    ft::DeviceBuffer<unsigned char> work(
        std::max(ft_forward_workspace_bytes("ch07", c), ft_backward_workspace_bytes("ch08", c)));
    Q.upload(sQ.scatter(in.Q));
    K.upload(sK.scatter(in.K));
    V.upload(sV.scatter(in.V));
    dO.upload(sdO.scatter(in.dO));
    for (auto* t : {&O, &dQ, &dK, &dV}) t->poison();
    ASSERT_EQ(ft_forward_strided("ch07", c, &cl, Q.get(), K.get(), V.get(), O.get(), lse.get(), work.get(), 0), 0)
        << ft_last_error();
    ASSERT_EQ(ft_backward_strided("ch08", c, &cl, Q.get(), K.get(), V.get(), O.get(), lse.get(), dO.get(),
                                  dQ.get(), dK.get(), dV.get(), work.get(), 0),
              0)
        << ft_last_error();
    CUDA_CHECK(cudaDeviceSynchronize());
    const size_t n = size_t(p.elems());
    std::vector<double> rO(n), rlse(size_t(p.rows())), rdQ(n), rdK(n), rdV(n);
    ft::reference_forward(p, in.Q.data(), in.K.data(), in.V.data(), rO.data(), rlse.data());
    ft::reference_backward(p, in.Q.data(), in.K.data(), in.V.data(), in.dO.data(), rdQ.data(),
                           rdK.data(), rdV.data());
    const double tol = 1e-2;  // bf16 (the harness's tests hold these kernels to the full rule)
    for (const auto& [name, t, s, ref] :
         {std::tuple{"O", &O, &sO, &rO}, std::tuple{"dQ", &dQ, &sdQ, &rdQ},
          std::tuple{"dK", &dK, &sdK, &rdK}, std::tuple{"dV", &dV, &sdV, &rdV}}) {
      const std::vector<float> got = s->gather(t->download());
      const ft::VerifyResult v = ft::verify(name, got.data(), ref->data(), got.size(), tol);
      EXPECT_TRUE(v.ok) << v.message;
    }
  }
}

// A pointer 4 bytes into a real allocation (a view into a larger tensor) is refused before
// any launch, and the CUDA context stays usable: the next, aligned call succeeds.
TEST(CApiAlignment, UnalignedDevicePointerIsRefusedAndTheContextSurvives) {
  FT_REQUIRE_GPU();
  const ft_problem c = problem(64, 64, false);
  const ft::Problem p = to_problem(c);
  const auto in = ft::make_inputs(p, ft::InputKind::Uniform, 97);
  const size_t n = size_t(p.elems());
  ft::DeviceBuffer<float> Q(n + 4), K(n), V(n), O(n), lse(size_t(p.rows()));
  K.upload(in.K);
  V.upload(in.V);
  CUDA_CHECK(cudaMemcpy(Q.get() + 1, in.Q.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  EXPECT_EQ(ft_forward("ch04", c, Q.get() + 1, K.get(), V.get(), O.get(), lse.get(), nullptr, 0), -1);
  EXPECT_NE(std::string(ft_last_error()).find("Q = 0x"), std::string::npos) << ft_last_error();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  CUDA_CHECK(cudaMemcpy(Q.get(), in.Q.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  O.poison();
  ASSERT_EQ(ft_forward("ch04", c, Q.get(), K.get(), V.get(), O.get(), lse.get(), nullptr, 0), 0)
      << ft_last_error();
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> rO(n), rlse(size_t(p.rows()));
  ft::reference_forward(p, in.Q.data(), in.K.data(), in.V.data(), rO.data(), rlse.data());
  expect_close("O", O.download(), rO);
}

}  // namespace
