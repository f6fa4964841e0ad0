// Chapter 11: decoding (one to 16 query rows a sequence against its whole K/V cache), each
// step one idea: a block a query head, the keys split across blocks, a block a key/value head.
//
// Build and run (from the repository root):
//   cmake --preset default && cmake --build build --target ch11_decoding
//   ./build/chapters/11_decoding/ch11_decoding --help
//   ./build/chapters/11_decoding/ch11_decoding --batch 1 --heads 32 --heads-kv 8 --seq-len 1
//       --len-kv 32768 --head-dim 128 --dtype bf16 --causal --causal-align bottom-right   (one line)
#include "11_decoding/decoding.hpp"
#include "harness/program.hpp"

int main(int argc, char** argv) {
  ft::ProgramSpec spec;
  spec.program = "ch11_decoding";
  spec.title = "Chapter 11: decoding against a long K/V cache";
  spec.forwards = ch11::forward_impls();
  spec.extra = ch11::decode_extras;  // the streaming-read ceiling and the paged cache
  return ft::run_program(argc, argv, spec);
}
