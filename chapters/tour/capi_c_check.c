/* Compiled as C (not C++) so that flashtut.h stays usable from C and through ctypes. */
#include "flashtut.h"

size_t ft_capi_c_check(void) {
  ft_problem p = {1, 1, 16, 64, 0, 0.f};
  return ft_ch04_forward_workspace_bytes(p);
}
