// GPU tests of the timer (common/device/timer.cuh), called as the programs call it:
//   - launched call by call, every warm-up and timed run calls the function once;
//   - with `graph`, the function is called for the warm-up and once more while it is recorded,
//     and every timed run is the graph's replay: a kernel that counts its own runs shows
//     warm-up + 1 (the untimed first replay) + timed runs, while the host saw warm-up + 1 calls;
//   - a run that cannot be recorded (it synchronizes, or launches on the legacy default stream
//     instead of the one it is given) is refused with the advice to time it without --graph,
//     and the next timing works (the recording was ended).
// They skip without a GPU.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/check.cuh"
#include "device/buffer.cuh"
#include "device/timer.cuh"
#include "harness/testing.hpp"

namespace {

__global__ void count_run(unsigned* runs) { atomicAdd(runs, 1u); }

/// The runs the kernel counted on the device since `runs` was zeroed.
unsigned counted(const ft::DeviceBuffer<unsigned>& runs) {
  CUDA_CHECK(cudaDeviceSynchronize());
  return runs.download().at(0);
}

/// A run counted twice: on the host (the function's calls) and on the device (its kernel's
/// runs, to which a graph's replays add without a call).
struct CountedRun {
  ft::DeviceBuffer<unsigned> runs{1};
  int calls = 0;
  CountedRun() { CUDA_CHECK(cudaMemset(runs.get(), 0, sizeof(unsigned))); }
  std::function<void(cudaStream_t)> fn() {
    return [this](cudaStream_t s) {
      ++calls;
      count_run<<<1, 1, 0, s>>>(runs.get());
      CUDA_CHECK_LAUNCH();
    };
  }
};

TEST(Timer, CallByCallRunsTheFunctionEachTime) {
  FT_REQUIRE_GPU();
  CountedRun run;
  const ft::Timing t = ft::time_on_gpu(run.fn(), 2, 5);
  EXPECT_FALSE(t.graph);
  EXPECT_EQ(t.iters, 5);
  EXPECT_GT(t.median_ms, 0);
  EXPECT_EQ(run.calls, 2 + 5);
  EXPECT_EQ(counted(run.runs), 2u + 5u);
}

TEST(Timer, GraphTimesReplaysOfOneRecording) {
  FT_REQUIRE_GPU();
  CountedRun run;
  const ft::Timing t = ft::time_on_gpu(run.fn(), 2, 5, true, 0, true);
  EXPECT_TRUE(t.graph);
  EXPECT_EQ(t.iters, 5);
  EXPECT_GT(t.median_ms, 0);
  EXPECT_EQ(run.calls, 2 + 1) << "the warm-up, then one call while recording; the timed runs are replays";
  EXPECT_EQ(counted(run.runs), 2u + 1u + 5u) << "warm-up, the untimed first replay, five timed replays";
}

TEST(Timer, RefusesARunThatCannotBeRecorded) {
  FT_REQUIRE_GPU();
  ft::DeviceBuffer<unsigned> runs(1);
  CUDA_CHECK(cudaMemset(runs.get(), 0, sizeof(unsigned)));
  const auto synchronizes = [&](cudaStream_t s) {
    count_run<<<1, 1, 0, s>>>(runs.get());
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaStreamSynchronize(s));  // fine when launched, not allowed while recording
  };
  try {
    ft::time_on_gpu(synchronizes, 1, 3, true, 0, true);
    ADD_FAILURE() << "a run that synchronizes was recorded";
  } catch (const ft::CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("time it without --graph"), std::string::npos) << e.what();
  }
  // The refused recording was ended: the stream and the device take the next timing.
  const ft::Timing t = ft::time_on_gpu(synchronizes, 1, 3);
  EXPECT_EQ(t.iters, 3);
}

// Work on stream 0 while recording would run at once, outside the graph, and the replays would
// time less than the call does: refused instead.
TEST(Timer, RefusesARunThatLaunchesOnTheDefaultStream) {
  FT_REQUIRE_GPU();
  ft::DeviceBuffer<unsigned> runs(1);
  CUDA_CHECK(cudaMemset(runs.get(), 0, sizeof(unsigned)));
  const auto ignores_its_stream = [&](cudaStream_t) {
    count_run<<<1, 1>>>(runs.get());
    CUDA_CHECK_LAUNCH();
  };
  try {
    ft::time_on_gpu(ignores_its_stream, 1, 3, true, 0, true);
    ADD_FAILURE() << "a run on the default stream was recorded (replays counted: " << counted(runs) << ")";
  } catch (const ft::CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("time it without --graph"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ft::time_on_gpu(ignores_its_stream, 1, 3).iters, 3) << "the next timing works";
}

}  // namespace
