// GPU tests of the C API (common/flashtut.h): every exported pass, called exactly as C code
// (or ctypes) would call it, matches the float64 reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "buffer.cuh"
#include "capi.hpp"
#include "flashtut.h"
#include "inputs.hpp"
#include "reference.hpp"
#include "testing.hpp"
#include "verify.hpp"

namespace {

ft_problem problem(int N, int d, bool causal) {
  return ft_problem{2, 3, N, d, causal ? 1 : 0, 0.f, FT_DTYPE_FLOAT32};
}

using ForwardC = ft_forward_fn;
using WorkspaceC = ft_workspace_fn;
using BackwardC = ft_backward_fn;

struct ForwardCase {
  const char* name;
  ForwardC fn;
  WorkspaceC workspace;
};

struct BackwardCase {
  const char* name;
  ForwardC forward;  // the pass that leaves O, lse (and the workspace) for the backward
  WorkspaceC forward_workspace;
  BackwardC backward;
  WorkspaceC workspace;
};

// Test listings print the export's name, not the struct's bytes.
void PrintTo(const ForwardCase& c, std::ostream* os) { *os << c.name; }
void PrintTo(const BackwardCase& c, std::ostream* os) { *os << c.name; }

ft::Problem to_problem(const ft_problem& c) { return ft::capi::to_problem(c); }

void expect_close(const char* what, const std::vector<float>& got, const std::vector<double>& ref) {
  const ft::VerifyResult v = ft::verify(what, got.data(), ref.data(), got.size(), ft::kFloat32Tolerance);
  EXPECT_TRUE(v.ok) << v.message;
}

class CApiForward : public ::testing::TestWithParam<ForwardCase> {};

TEST_P(CApiForward, MatchesReference) {
  FT_REQUIRE_GPU();
  for (bool causal : {false, true}) {
    const ft_problem c = problem(77, 64, causal);  // 77: a partial tile for every kernel
    const ft::Problem p = to_problem(c);
    const auto in = ft::make_inputs(p, ft::InputKind::Uniform, 99);
    const size_t n = size_t(p.elems());
    ft::DeviceBuffer<float> Q(n), K(n), V(n), O(n), lse(size_t(p.rows()));
    ft::DeviceBuffer<unsigned char> work(GetParam().workspace(c));
    Q.upload(in.Q);
    K.upload(in.K);
    V.upload(in.V);
    O.poison();
    lse.poison();
    ASSERT_EQ(GetParam().fn(c, Q.get(), K.get(), V.get(), O.get(), lse.get(), work.get(), 0), 0)
        << ft_last_error();
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<double> rO(n), rlse(size_t(p.rows()));
    ft::reference_forward(p, in.Q.data(), in.K.data(), in.V.data(), rO.data(), rlse.data());
    expect_close("O", O.download(), rO);
    expect_close("lse", lse.download(), rlse);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Exports, CApiForward,
    ::testing::Values(
        ForwardCase{"ch01", ft_ch01_forward, ft_ch01_forward_workspace_bytes},
        ForwardCase{"ch02", ft_ch02_forward, ft_ch02_forward_workspace_bytes},
        ForwardCase{"ch03", ft_ch03_forward, ft_ch03_forward_workspace_bytes},
        ForwardCase{"ch04_simple", ft_ch04_forward_simple, ft_ch04_forward_simple_workspace_bytes},
        ForwardCase{"ch04", ft_ch04_forward, ft_ch04_forward_workspace_bytes},
        ForwardCase{"ch05_materialize", ft_ch05_forward_materialize,
                    ft_ch05_forward_materialize_workspace_bytes}),
    [](const ::testing::TestParamInfo<ForwardCase>& param_info) { return std::string(param_info.param.name); });

class CApiBackward : public ::testing::TestWithParam<BackwardCase> {};

TEST_P(CApiBackward, MatchesReference) {
  FT_REQUIRE_GPU();
  for (bool causal : {false, true}) {
    const ft_problem c = problem(77, 64, causal);
    const ft::Problem p = to_problem(c);
    const auto in = ft::make_inputs(p, ft::InputKind::Uniform, 98);
    const size_t n = size_t(p.elems());
    ft::DeviceBuffer<float> Q(n), K(n), V(n), O(n), lse(size_t(p.rows())), dO(n), dQ(n), dK(n), dV(n);
    // One workspace serves both passes, as large as either needs.
    const size_t ws = std::max(GetParam().forward_workspace(c), GetParam().workspace(c));
    ft::DeviceBuffer<unsigned char> work(ws);
    Q.upload(in.Q);
    K.upload(in.K);
    V.upload(in.V);
    dO.upload(in.dO);
    for (auto* b : {&dQ, &dK, &dV}) b->poison();
    ASSERT_EQ(GetParam().forward(c, Q.get(), K.get(), V.get(), O.get(), lse.get(), work.get(), 0), 0)
        << ft_last_error();
    ASSERT_EQ(GetParam().backward(c, Q.get(), K.get(), V.get(), O.get(), lse.get(), dO.get(),
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

INSTANTIATE_TEST_SUITE_P(
    Exports, CApiBackward,
    ::testing::Values(
        BackwardCase{"materialize", ft_ch05_forward_materialize,
                     ft_ch05_forward_materialize_workspace_bytes, ft_ch05_backward_materialize,
                     ft_ch05_backward_materialize_workspace_bytes},
        BackwardCase{"flash", ft_ch04_forward, ft_ch04_forward_workspace_bytes, ft_ch05_backward,
                     ft_ch05_backward_workspace_bytes},
        BackwardCase{"flash_dq_pass", ft_ch04_forward, ft_ch04_forward_workspace_bytes,
                     ft_ch05_backward_dq_pass, ft_ch05_backward_dq_pass_workspace_bytes},
        BackwardCase{"flash_bc128", ft_ch04_forward, ft_ch04_forward_workspace_bytes,
                     ft_ch05_backward_bc128, ft_ch05_backward_bc128_workspace_bytes}),
    [](const ::testing::TestParamInfo<BackwardCase>& param_info) { return std::string(param_info.param.name); });

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
  EXPECT_EQ(ft_ch04_forward(c, Q.get() + 1, K.get(), V.get(), O.get(), lse.get(), nullptr, 0), -1);
  EXPECT_NE(std::string(ft_last_error()).find("Q = 0x"), std::string::npos) << ft_last_error();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  CUDA_CHECK(cudaMemcpy(Q.get(), in.Q.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  O.poison();
  ASSERT_EQ(ft_ch04_forward(c, Q.get(), K.get(), V.get(), O.get(), lse.get(), nullptr, 0), 0)
      << ft_last_error();
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> rO(n), rlse(size_t(p.rows()));
  ft::reference_forward(p, in.Q.data(), in.K.data(), in.V.data(), rO.data(), rlse.data());
  expect_close("O", O.download(), rO);
}

}  // namespace
