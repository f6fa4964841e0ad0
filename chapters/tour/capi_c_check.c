/* Compiled as C (not C++) so that flashtut.h stays usable from C and through ctypes. */
#include "flashtut.h"

size_t ft_capi_c_check(void) {
  ft_problem p = {1, 1, 1, 16, 16, 64, 0, FT_CAUSAL_TOP_LEFT, 0.f, FT_DTYPE_FLOAT32};
  return ft_forward_workspace_bytes("ch04", p);
}
